"""Strict DRF fields: JSON types are checked, never coerced (a string is not a number)."""

from rest_framework import serializers

from infrastructure.errors import flatten_errors
from vocabulary.errors import InvalidInput, unknown_field_problems
from vocabulary.text import stored_text_problem

NUL_FREE_PATTERN = "^[^\\u0000]*$"
"""The published pattern of every strict string: no U+0000 (lone surrogates cannot be written as a pattern that
ECMAScript and Python read alike, so the description names them)."""


class StrictCharField(serializers.CharField):
    """A JSON string only; U+0000 and lone surrogates are refused like at every write boundary.

    ``schema_pattern`` is what the OpenAPI description publishes (infrastructure.openapi): NUL_FREE_PATTERN
    unless a field has a stricter rule of its own, which must then exclude U+0000 too.
    """

    REFUSED = "U+0000 and lone surrogates are refused."

    def __init__(self, *, schema_pattern: str = NUL_FREE_PATTERN, **kwargs):
        self.schema_pattern = schema_pattern
        kwargs.setdefault("trim_whitespace", False)
        # Published in the OpenAPI description, so clients and fuzzers know the rule the server enforces.
        kwargs["help_text"] = f"{kwargs['help_text']} {self.REFUSED}" if kwargs.get("help_text") else self.REFUSED
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        problem = stored_text_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: booleans, floats and numeric strings are refused."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


def unknown_field_errors(data, allowed) -> list[dict]:
    """Error entries for keys DRF would otherwise silently ignore (the first ones named, the rest counted)."""
    if not isinstance(data, dict):
        return []
    return [{"path": path, "message": message} for path, message in unknown_field_problems(data, allowed, "")]


class QueryIntegerField(serializers.IntegerField):
    """An integer query parameter written as plain ASCII digits (no sign, spaces or decimals)."""

    def to_internal_value(self, data):
        if not isinstance(data, str) or not data.isascii() or not data.isdigit():
            self.fail("invalid")
        return super().to_internal_value(data)


class ClosedSerializer(serializers.Serializer):
    """Refuses unknown fields (DRF would ignore them) and reports every problem with its path at once."""

    def cross_field_errors(self, data: dict, validated: dict) -> list[dict]:
        """Rules spanning several fields; may add derived values to ``validated``."""
        return []

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise InvalidInput("the body must be a JSON object", fields=[])
        errors = unknown_field_errors(data, self.fields)
        validated = {}
        try:
            validated = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            errors += flatten_errors(exc.detail)
        errors += self.cross_field_errors(data, validated)
        if errors:
            raise InvalidInput("the request is invalid", fields=errors)
        return validated
