"""Configuration of the PowerContext memory provider.

Read from ``$HERMES_HOME/powercontext.json``; environment variables override the file:

======================  ==============================  ==============================================
key                     environment variable            meaning
======================  ==============================  ==============================================
``base_url``            ``POWERCONTEXT_URL``            the PowerContext server, e.g. http://127.0.0.1:8000
``api_key``             ``POWERCONTEXT_API_KEY``        an API key with read on the scope, and write for
                                                        ``write_memory`` (keep it in .env)
``scope_id``            ``POWERCONTEXT_SCOPE``          the current Scope, e.g. ``project:demo``
``max_bytes``           ``POWERCONTEXT_MAX_BYTES``      byte budget of the prepared text (512-32768; 8000)
``assembly``            ``POWERCONTEXT_ASSEMBLY``       absent or null: legacy output, ``assembly`` is not
                                                        sent. An object (``{}`` for the defaults) enables
                                                        Markdown V1 and is sent exactly as written.
``selection``           ``POWERCONTEXT_SELECTION``      absent or null: not sent. An object such as
                                                        ``{"policy": "authority-v1", "max_tokens": 600}``
                                                        asks the server to select memory under that policy
                                                        (needs ``assembly``), sent exactly as written.
``timeout_seconds``     ``POWERCONTEXT_TIMEOUT``        HTTP timeout of one prepare (default 5)
``freeze_per_turn``                                     a configuration change applies from the next turn
                                                        (default true)
``prefetch_on_turn_start``                              start the prepare when the turn starts (default true)
``read_tool``                                           expose the ``powercontext_read_citation`` tool
                                                        (default true)
``write_memory``                                        mirror writes of Hermes' built-in memory tool into
                                                        memory entries of the scope (default true)
``prompt_max_tokens``   (1)                             token budget of the injected memory block
                                                        (default 3000, in the client's offline units or
                                                        the provider's ``token_counter``; null: none)
``prompt_max_chars``    (2)                             character budget of the injected memory block
                                                        (default: none)
======================  ==============================  ==============================================

(1) ``POWERCONTEXT_PROMPT_MAX_TOKENS``, (2) ``POWERCONTEXT_PROMPT_MAX_CHARS``; ``null`` there means no budget.

The variables are read by ``powercontext_client.environment``, under the names every integration shares; the
old ``POWERCONTEXT_BASE_URL`` and ``POWERCONTEXT_SCOPE_ID`` still work for one release, with a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from powercontext_client import OMITTED, AssemblyOptions, SelectionOptions
from powercontext_client.environment import API_KEY, SCOPE, URL, read_variable
from powercontext_client.prefetch import _Omitted, as_assembly_options, as_selection_options, effective_max_bytes

CONFIG_FILE = "powercontext.json"
DEFAULT_TIMEOUT_SECONDS = 5.0
# A full default prepare (8000 bytes) is 1700-2700 offline units in English and Chinese (3.2-4.7 bytes a unit
# on the golden texts), so the default only drops memory prepared under a much larger max_bytes.
DEFAULT_PROMPT_MAX_TOKENS = 3000

# Configuration key -> the environment variable that overrides it (docs/hosts.md lists them, tested).
ENVIRONMENT_VARIABLES = {
    "base_url": URL,
    "api_key": API_KEY,
    "scope_id": SCOPE,
    "max_bytes": "POWERCONTEXT_MAX_BYTES",
    "assembly": "POWERCONTEXT_ASSEMBLY",
    "selection": "POWERCONTEXT_SELECTION",
    "timeout_seconds": "POWERCONTEXT_TIMEOUT",
    "prompt_max_tokens": "POWERCONTEXT_PROMPT_MAX_TOKENS",
    "prompt_max_chars": "POWERCONTEXT_PROMPT_MAX_CHARS",
}
_INTEGER_KEYS = ("max_bytes", "prompt_max_tokens", "prompt_max_chars")
_PROMPT_BUDGETS = {"prompt_max_tokens": DEFAULT_PROMPT_MAX_TOKENS, "prompt_max_chars": None}
_KEYS = {
    "base_url",
    "api_key",
    "scope_id",
    "max_bytes",
    "assembly",
    "selection",
    "timeout_seconds",
    "freeze_per_turn",
    "prefetch_on_turn_start",
    "read_tool",
    "write_memory",
    "prompt_max_tokens",
    "prompt_max_chars",
}


class ConfigError(ValueError):
    """The provider's configuration is invalid; the provider stays inactive."""


@dataclass(frozen=True)
class ProviderConfig:
    base_url: str
    api_key: str
    scope_id: str
    max_bytes: int | _Omitted = OMITTED
    assembly: AssemblyOptions | _Omitted = OMITTED
    selection: SelectionOptions | _Omitted = OMITTED
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    freeze_per_turn: bool = True
    prefetch_on_turn_start: bool = True
    read_tool: bool = True
    write_memory: bool = True
    prompt_max_tokens: int | None = DEFAULT_PROMPT_MAX_TOKENS
    prompt_max_chars: int | None = None

    @property
    def assembly_enabled(self) -> bool:
        return self.assembly is not OMITTED


def config_path(hermes_home: str | os.PathLike[str]) -> Path:
    return Path(hermes_home) / CONFIG_FILE


def read_raw_config(hermes_home: str | os.PathLike[str]) -> dict[str, Any]:
    path = config_path(hermes_home)
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must hold a JSON object")
    return raw


def _from_env(raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    merged = dict(raw)
    for key, variable in ENVIRONMENT_VARIABLES.items():
        value = read_variable(variable, environ)
        if value is None:
            continue
        if key in ("assembly", "selection"):
            try:
                merged[key] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{variable} must be JSON: {exc}") from exc
        elif key in _INTEGER_KEYS:
            try:
                merged[key] = None if key in _PROMPT_BUDGETS and value == "null" else int(value)
            except ValueError as exc:
                raise ConfigError(f"{variable} must be an integer") from exc
        elif key == "timeout_seconds":
            try:
                merged[key] = float(value)
            except ValueError as exc:
                raise ConfigError(f"{variable} must be a number") from exc
        else:
            merged[key] = value
    return merged


def parse_config(raw: dict[str, Any]) -> ProviderConfig:
    """Validate a merged configuration object (file plus environment)."""
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ConfigError(f"unknown configuration keys: {', '.join(unknown)}")
    missing = [key for key in ("base_url", "api_key", "scope_id") if not raw.get(key)]
    if missing:
        raise ConfigError(f"missing configuration: {', '.join(missing)}")
    for key in ("base_url", "api_key", "scope_id"):
        if not isinstance(raw[key], str):
            raise ConfigError(f"{key} must be a string")
    max_bytes: int | _Omitted = OMITTED
    if raw.get("max_bytes") is not None:
        try:
            max_bytes = effective_max_bytes(raw["max_bytes"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"max_bytes: {exc}") from exc
    assembly: AssemblyOptions | _Omitted = OMITTED
    if raw.get("assembly") is not None:  # absent or null: assembly is not sent (legacy output)
        try:
            assembly = as_assembly_options(raw["assembly"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"assembly: {exc}") from exc
    selection: SelectionOptions | _Omitted = OMITTED
    if raw.get("selection") is not None:  # absent or null: selection is not sent
        if assembly is OMITTED:
            raise ConfigError("selection: only allowed together with assembly")
        try:
            selection = as_selection_options(raw["selection"])
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"selection: {exc}") from exc
    timeout = raw.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError("timeout_seconds must be a positive number")
    flags = {}
    for key in ("freeze_per_turn", "prefetch_on_turn_start", "read_tool", "write_memory"):
        value = raw.get(key, True)
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false")
        flags[key] = value
    # Any: passed by name into ProviderConfig below, whose fields mypy cannot match to keys read from a table.
    budgets: dict[str, Any] = {}
    for key, default in _PROMPT_BUDGETS.items():
        value = raw.get(key, default)  # absent: the default; null: no budget of that kind
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"{key} must be a positive integer or null")
        budgets[key] = value
    return ProviderConfig(
        base_url=raw["base_url"],
        api_key=raw["api_key"],
        scope_id=raw["scope_id"],
        max_bytes=max_bytes,
        assembly=assembly,
        selection=selection,
        timeout_seconds=float(timeout),
        **flags,
        **budgets,
    )


def load_config(hermes_home: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> ProviderConfig:
    """The configuration from ``$HERMES_HOME/powercontext.json`` and the environment."""
    return parse_config(_from_env(read_raw_config(hermes_home), os.environ if environ is None else environ))


def save_config(values: dict[str, Any], hermes_home: str | os.PathLike[str]) -> Path:
    """Merge non-secret ``values`` into ``$HERMES_HOME/powercontext.json`` (the API key belongs in .env)."""
    merged = read_raw_config(hermes_home)
    for key, value in values.items():
        if key == "api_key":
            continue
        if key in ("assembly", "selection") and isinstance(value, str):  # typed at a setup prompt
            value = json.loads(value) if value.strip() else None
        elif key in (*_INTEGER_KEYS, "timeout_seconds") and isinstance(value, str):
            value = (float if key == "timeout_seconds" else int)(value) if value.strip() else None
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    parse_config({"base_url": "-", "scope_id": "-", **merged, "api_key": "-"})  # refuse invalid values
    path = config_path(hermes_home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
