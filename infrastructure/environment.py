"""The environment variables the server reads, each declared once with its type, default and meaning.

``powercontext/settings.py`` turns the environment into raw setting values through the readers below (and nothing
else reads ``os.environ`` for the server's configuration): each reader checks its value at start-up (a bad one
raises ``ImproperlyConfigured`` naming the variable, which stops every entry point) and records the variable in
``VARIABLES``, from which ``docs/settings.md`` is generated (``manage.py settings_page``; a test fails when the page
and the code disagree). Only the standard library and Django's exception: this module sits under every app.

Parsing stays here (an environment value that is no number, no choice, is refused before anything runs); the apps
read the values through one typed accessor per area (``infrastructure/conf.py``), whose system checks refuse a value
of the wrong type or range however it got into the settings (a settings module of one's own, an override), naming
the variable: ``manage.py check``, ``runserver`` and ``migrate`` run them, and ``powercontext/wsgi.py`` before
gunicorn serves.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import overload

from django.core.exceptions import ImproperlyConfigured

AREAS = (
    "server",
    "database",
    "recall",
    "embeddings",
    "search index",
    "prepare log",
    "read replicas",
    "metrics and logs",
    "admin",
    "HTTPS behind a proxy",
)
"""The areas variables are listed under, in the page's order."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: the area it configures, its type and default as an operator writes them, and what
    it does."""

    name: str
    area: str
    kind: str
    default: str
    meaning: str


VARIABLES: dict[str, Variable] = {}
"""Every variable a reader has declared, by name (settings.py declares them all when it is imported)."""


def _declared(name: str, area: str, kind: str, default: str, meaning: str) -> str | None:
    """Record the variable (once; a second declaration must say the same) and return its raw value."""
    if area not in AREAS:
        raise ValueError(f"{name}: unknown area {area!r}")
    variable = Variable(name, area, kind, default, " ".join(meaning.split()))
    if VARIABLES.setdefault(name, variable) != variable:
        raise ValueError(f"{name} is declared twice, differently")
    return os.environ.get(name)


def flag(name: str, default: bool, *, area: str, meaning: str) -> bool:
    """``true``/``false`` (also 1/0, yes/no, on/off; empty is false)."""
    raw = _declared(name, area, "boolean", "`true`" if default else "`false`", meaning)
    if raw is None:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def choice(name: str, choices: tuple[str, ...], default: str, *, area: str, meaning: str) -> str:
    """One of ``choices`` (case-insensitive); unset or empty gives ``default`` ("" for none)."""
    raw = _declared(name, area, "one of " + ", ".join(f"`{c}`" for c in choices), _shown(default), meaning)
    value = (raw or "").strip().lower()
    if value and value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)} or unset, got {value!r}")
    return value or default


def integer(name: str, default: int, *, minimum: int = 1, area: str, meaning: str) -> int:
    """A whole number of at least ``minimum``."""
    raw = _declared(name, area, f"integer ≥ {minimum}", f"`{default}`", meaning)
    return default if raw is None else _whole_number(name, raw, minimum)


def optional_integer(name: str, *, minimum: int = 1, area: str, meaning: str) -> int | None:
    """A whole number of at least ``minimum``, or None when unset or empty."""
    raw = _declared(name, area, f"integer ≥ {minimum}", "unset", meaning)
    return _whole_number(name, raw, minimum) if raw else None


def _whole_number(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum or str(value) != raw.strip():
        described = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise ImproperlyConfigured(f"{name} must be {described}, got {raw!r}")
    return value


def seconds(name: str, default: float, *, area: str, meaning: str) -> float:
    """A number of seconds above 0 and at most 600."""
    raw = _declared(name, area, "seconds (0 < s ≤ 600)", f"`{default:g}`", meaning)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 600:
        raise ImproperlyConfigured(f"{name} must be a number of seconds above 0 and at most 600, got {raw!r}")
    return value


@overload
def text(name: str, default: str, *, area: str, meaning: str, shown: str | None = None) -> str: ...
@overload
def text(name: str, default: None = None, *, area: str, meaning: str, shown: str | None = None) -> str | None: ...
def text(name: str, default: str | None = None, *, area: str, meaning: str, shown: str | None = None) -> str | None:
    """Text, stripped; unset or empty gives ``default``. ``shown``: the default as the page says it (a path, a
    computed value)."""
    raw = _declared(name, area, "text", shown if shown is not None else _shown(default), meaning)
    value = (raw or "").strip()
    return value or default


def raw_text(name: str, default: str = "", *, area: str, meaning: str) -> str:
    """Text exactly as set (spaces kept: a prefix may end in one)."""
    raw = _declared(name, area, "text", _shown(default), meaning)
    return default if raw is None else raw


def listing(name: str, default: str, *, area: str, meaning: str) -> list[str]:
    """Comma-separated items, each stripped; empty items dropped."""
    raw = _declared(name, area, "comma-separated list", _shown(default), meaning)
    return [item.strip() for item in (default if raw is None else raw).split(",") if item.strip()]


def json_object(name: str, *, area: str, meaning: str) -> dict:
    """A JSON object, decoded (its contents are checked by the app that reads them); unset or empty gives {}."""
    raw = (_declared(name, area, "JSON object", "`{}`", meaning) or "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ImproperlyConfigured(f"{name} must be a JSON object, got {raw!r}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of model name -> {{parameter: value}}, got {raw!r}")
    return value


def _shown(default: str | None) -> str:
    return f"`{default}`" if default else "unset"


PAGE_HEADER = """# Settings

Every environment variable the server reads, by area: its type, its default and what it does. A bad value stops
start-up with a message naming the variable (every entry point: the server, a worker, a management command).
Generated from the code (`infrastructure/environment.py`, declared in `powercontext/settings.py`) by
`python manage.py settings_page --write docs/settings.md`; `tests/docs/test_settings_page.py` fails when this page
and the code disagree. The host integrations (the client, the MCP server, Hermes, LangGraph) read their own
variables: docs/hosts.md.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_page() -> str:
    """``docs/settings.md``: every declared variable, grouped by area, in declaration order within each."""
    lines = [PAGE_HEADER]
    for area in AREAS:
        variables = [v for v in VARIABLES.values() if v.area == area]
        if not variables:
            continue
        lines += [f"## {area[0].upper()}{area[1:]}", "", "| variable | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{v.name}` | {v.kind} | {v.default} | {_cell(v.meaning)} |" for v in variables]
        lines.append("")
    lines.append(f"{len(VARIABLES)} variables.")
    return "\n".join(lines) + "\n"
