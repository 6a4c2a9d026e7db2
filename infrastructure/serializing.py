"""The API's DRF serializers without their per-request set-up: one bound instance per class, reused.

DRF deep-copies a serializer's declared fields for every new instance (``Serializer.fields``): the twenty-odd
fields of an exact read's query and answer cost more to copy than the read's SQL cost to run. The API's
serializers keep nothing between one value and the next (no context, instance or partial; ``ClosedSerializer``
raises its own error), so one instance per class validates and represents every request, in every thread.
``validated`` and ``represented`` answer exactly what ``cls(data=…).is_valid(raise_exception=True)`` and
``cls(instance).data`` answer, errors included.
"""

from __future__ import annotations

import functools

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.settings import api_settings


@functools.cache
def _prototype(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    serializer = serializer_class()
    serializer.fields  # noqa: B018 - bound once, here, rather than on first use by two threads at once
    return serializer


def validated(serializer_class: type[serializers.Serializer], data) -> dict:
    """The validated data; raises the ValidationError (or domain error) ``is_valid(raise_exception=True)`` would."""
    try:
        return _prototype(serializer_class).run_validation(data)
    except ValidationError as exc:
        detail = exc.detail
        if isinstance(detail, list) and len(detail) == 1 and getattr(detail[0], "code", None) == "null":
            # As ``Serializer.errors`` words a null body.
            detail = {api_settings.NON_FIELD_ERRORS_KEY: [ErrorDetail("No data provided", code="null")]}
        raise ValidationError(detail) from None


def represented(serializer_class: type[serializers.Serializer], instance) -> dict:
    """``serializer_class(instance).data``."""
    return _prototype(serializer_class).to_representation(instance)
