"""One typed accessor per area of settings (issue 53, item 2), in the style of DRF's ``api_settings``.

``powercontext/settings.py`` turns the environment into raw values (``infrastructure/environment.py`` still refuses a
value it cannot parse, naming the variable, before anything else runs). Each area's code then reads its settings
through one accessor, owned by the app whose area it is (``artifacts/recall/conf.py``'s ``recall_settings()``,
``infrastructure/replicas/conf.py``'s ``replica_settings()``, …): a frozen dataclass of typed fields, read from
``django.conf.settings`` once per process and cached, read anew after Django's ``setting_changed`` signal (sent by
``override_settings`` and pytest-django's ``settings`` fixture; ``monkeypatch.setattr(settings, …)`` sends none: tests
use the fixture, or ``tests/conftest.py``'s ``patch_setting``).

Each accessor's values are checked by a system check (tag ``SETTINGS_TAG``, registered by the app's ``ready()``):
a bad value, e.g. one a settings module or an override sets, is a check ``Error`` naming the environment variable,
which stops ``runserver``, ``migrate`` and every management command that runs checks; ``powercontext/wsgi.py`` runs
the same checks before gunicorn serves (``refuse_bad_settings``). Django and the standard library only: this module
sits under every app.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

SETTINGS_TAG = "powercontext_settings"
"""The tag of every area's settings check (``manage.py check --tag powercontext_settings`` runs them alone)."""

T = TypeVar("T")
Problem = Callable[[object], "str | None"]
"""What is wrong with a value (completing "<VARIABLE> must …"), or None when it is fine."""

_UNSET = object()

ACCESSORS: list[Accessor[Any]] = []
"""Every accessor made (tests' ``patch_setting`` drops their copies)."""


@dataclass(frozen=True)
class Field:
    """One field of an area's settings: the attribute it fills, the Django setting (and, for a dictionary setting,
    the key) it is read from, the environment variable an error names, what a good value is, its default when the
    setting is absent, and how the raw value becomes the field's (``convert``)."""

    name: str
    setting: str
    variable: str
    problem: Problem
    default: object = None
    key: str | None = None
    convert: Callable[[Any], Any] | None = None

    def raw(self) -> object:
        value = getattr(settings, self.setting, _UNSET if self.key is None else {})
        if self.key is not None:
            value = value.get(self.key, _UNSET) if isinstance(value, Mapping) else _UNSET
        return self.default if value is _UNSET else value


class Accessor(Generic[T]):
    """``accessor()``: the area's settings as a ``T``, built once and kept until a setting it reads changes;
    ``accessor.check``: the area's system check (``check_id``, an ``Error`` per bad value naming its variable)."""

    def __init__(self, build: Callable[..., T], fields: Iterable[Field], check_id: str) -> None:
        self._build = build
        self.fields = tuple(fields)
        self.check_id = check_id
        self._settings = frozenset(field.setting for field in self.fields)
        self.cached: T | None = None
        """The settings as last read (None: read them at the next call)."""
        ACCESSORS.append(self)
        setting_changed.connect(self._changed, weak=False)

        def check(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
            return [checks.Error(problem, id=check_id) for problem in self.problems()]

        # A function of its own: Django's registry tags the callable it registers (a bound method takes no tags).
        self.check = check

    def __call__(self) -> T:
        cached = self.cached
        if cached is None:
            problems = self.problems()
            if problems:
                raise ImproperlyConfigured("; ".join(problems))
            values = {}
            for field in self.fields:
                raw = field.raw()
                values[field.name] = field.convert(raw) if field.convert else raw
            cached = self.cached = self._build(**values)
        return cached

    def problems(self) -> list[str]:
        """Each bad value, as "<VARIABLE> must …, got …"."""
        found = []
        for field in self.fields:
            raw = field.raw()
            problem = field.problem(raw)
            if problem is not None:
                found.append(f"{field.variable} {problem}, got {raw!r}")
        return found

    def _changed(self, *, setting: str, **kwargs: object) -> None:
        if setting in self._settings:
            self.cached = None


def setting_set(name: str, value: object) -> None:
    """Change a setting at run time (a benchmark's switch) so that the accessors see it: ``setattr(settings, …)``
    alone sends no ``setting_changed``; this sends it, as ``override_settings`` does."""
    setattr(settings, name, value)
    setting_changed.send(sender=type(settings), setting=name, value=value, enter=True)


def refuse_bad_settings() -> None:
    """Raise ``ImproperlyConfigured`` with every settings check's error (for an entry point that runs no checks,
    gunicorn's ``powercontext.wsgi``)."""
    errors = [message for message in checks.run_checks(tags=[SETTINGS_TAG]) if message.is_serious()]
    if errors:
        raise ImproperlyConfigured("\n".join(f"{message.id}: {message.msg}" for message in errors))


# --- what a good value is -----------------------------------------------------------------------------------------


def whole(minimum: int = 1) -> Problem:
    """An integer of at least ``minimum``."""

    def problem(value: object) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return None
        return f"must be an integer of at least {minimum}"

    return problem


def amount(minimum: float = 0) -> Problem:
    """A number (an integer or not) of at least ``minimum``."""

    def problem(value: object) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= minimum:
            return None
        return f"must be a number of at least {minimum:g}"

    return problem


def seconds(value: object) -> str | None:
    """A number of seconds above 0 and at most 600 (as ``environment.seconds`` reads it)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 600:
        return None
    return "must be a number of seconds above 0 and at most 600"


def one_of(choices: Iterable[str]) -> Problem:
    allowed = tuple(choices)

    def problem(value: object) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return problem


def boolean(value: object) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


def optional_text(value: object) -> str | None:
    """Text, or None / empty for unset."""
    return None if value is None or isinstance(value, str) else "must be text or unset"


def text(value: object) -> str | None:
    return None if isinstance(value, str) else "must be text"


def optional_path(value: object) -> str | None:
    """A path (text or ``os.PathLike``), or None / empty for unset."""
    return None if value is None or isinstance(value, str | os.PathLike) else "must be a path or unset"


def mapping(value: object) -> str | None:
    return None if isinstance(value, Mapping) else "must be a JSON object"


def names(value: object) -> str | None:
    """A list of names (text)."""
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return None
    return "must be a list of names"


def path_text(value: str | os.PathLike[str] | None) -> str:
    """A path setting as text ("" for unset)."""
    return os.fspath(value) if value else ""
