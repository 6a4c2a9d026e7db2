"""Semantic validation of the request's `assembly` object (pure Python, no Django).

`parse_assembly_options` is the one place the rules live; the HTTP layer and direct runtime calls both
use it, so every invalid combination is rejected the same way, with every offending field reported.
"""

from __future__ import annotations

from typing import TypeGuard

from vocabulary.errors import unknown_field_problems
from vocabulary.families import ASSEMBLED_FAMILIES, DEFAULT_SECTIONS, FAMILY_LIMIT_MAX

from .types import AssemblyOptions, AssemblyValidationError, FieldError, SectionSpec

FORMAT_MARKDOWN = "markdown"
FORMATS = (FORMAT_MARKDOWN,)
SHOW_CONFIDENCE = "confidence"
SHOW_RECALL_RANK = "recall_rank"
SHOW_VALUES = (SHOW_CONFIDENCE, SHOW_RECALL_RANK)

DEFAULT_SECTION_SPECS = tuple(SectionSpec(family, limit) for family, limit in DEFAULT_SECTIONS)
MAX_ENTRIES_SETTING = "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES"

_ASSEMBLY_KEYS = ("format", "sections", "show")
_SECTION_KEYS = ("family", "limit")


def _one_of(values: tuple[str, ...]) -> str:
    return "must be one of " + ", ".join(f'"{value}"' for value in values)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _unknown_keys(raw: dict[object, object], allowed: tuple[str, ...], path: str, errors: list[FieldError]) -> None:
    errors.extend(FieldError(where, message) for where, message in unknown_field_problems(raw, allowed, path))


def _too_long(raw: list[object], most: int, what: str, path: str, errors: list[FieldError]) -> bool:
    # Checked before any item: an array of 100,000 items would otherwise cost one error (and its work) each.
    if len(raw) <= most:
        return False
    errors.append(FieldError(path, f"must have at most {most} {what}, got {len(raw)}"))
    return True


def _parse_sections(raw: object, path: str, errors: list[FieldError]) -> tuple[SectionSpec, ...]:
    if not isinstance(raw, list):
        errors.append(FieldError(path, "must be an array"))
        return ()
    if _too_long(raw, len(ASSEMBLED_FAMILIES), "sections (one per family)", path, errors):
        return ()
    sections: list[SectionSpec] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, dict):
            errors.append(FieldError(item_path, "must be an object with family and limit"))
            continue
        _unknown_keys(item, _SECTION_KEYS, item_path, errors)
        family = item.get("family")
        family_ok = False
        checked_family = ""  # the family, once family_ok
        if "family" not in item:
            errors.append(FieldError(f"{item_path}.family", "is required"))
        elif not isinstance(family, str) or family not in ASSEMBLED_FAMILIES:
            errors.append(FieldError(f"{item_path}.family", _one_of(ASSEMBLED_FAMILIES)))
        elif family in seen:
            errors.append(FieldError(f"{item_path}.family", f'duplicate family "{family}"'))
        else:
            seen.add(family)
            family_ok = True
            checked_family = family
        limit = item.get("limit")
        limit_ok = False
        checked_limit = 0  # the limit, once limit_ok
        if "limit" not in item:
            errors.append(FieldError(f"{item_path}.limit", "is required"))
        elif _is_int(limit):
            maximum = FAMILY_LIMIT_MAX[checked_family] if family_ok else max(FAMILY_LIMIT_MAX.values())
            if not 1 <= limit <= maximum:
                where = f" for {checked_family}" if family_ok else ""
                errors.append(FieldError(f"{item_path}.limit", f"must be between 1 and {maximum}{where}"))
            else:
                limit_ok = True
                checked_limit = limit
        else:
            errors.append(FieldError(f"{item_path}.limit", "must be an integer"))
        if family_ok and limit_ok:
            sections.append(SectionSpec(checked_family, checked_limit))
    return tuple(sections)


def _parse_show(raw: object, path: str, errors: list[FieldError]) -> frozenset[str]:
    if not isinstance(raw, list):
        errors.append(FieldError(path, "must be an array"))
        return frozenset()
    if _too_long(raw, len(SHOW_VALUES), "values", path, errors):
        return frozenset()
    seen: set[str] = set()
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, str) or item not in SHOW_VALUES:
            errors.append(FieldError(item_path, _one_of(SHOW_VALUES)))
        elif item in seen:
            errors.append(FieldError(item_path, f'duplicate value "{item}"'))
        else:
            seen.add(item)
    return frozenset(seen)


def parse_assembly_options(raw: object, *, max_total_entries: int, path: str = "assembly") -> AssemblyOptions:
    """Validate a JSON-decoded `assembly` value and return the effective options.

    Raises `AssemblyValidationError` listing every problem. `max_total_entries` is the server policy
    (POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES); it bounds the sum of the effective
    limits, defaults included.
    """
    if not _is_int(max_total_entries) or max_total_entries < 1:
        raise ValueError(f"{MAX_ENTRIES_SETTING} must be a positive integer, got {max_total_entries!r}")
    if raw is None:
        raise AssemblyValidationError([FieldError(path, "must not be null")])
    if not isinstance(raw, dict):
        raise AssemblyValidationError([FieldError(path, "must be an object")])

    errors: list[FieldError] = []
    _unknown_keys(raw, _ASSEMBLY_KEYS, path, errors)
    if "format" in raw and raw["format"] not in FORMATS:
        errors.append(FieldError(f"{path}.format", _one_of(FORMATS)))
    sections = DEFAULT_SECTION_SPECS
    if "sections" in raw:
        sections = _parse_sections(raw["sections"], f"{path}.sections", errors)
    show: frozenset[str] = frozenset()
    if "show" in raw:
        show = _parse_show(raw["show"], f"{path}.show", errors)
    total = sum(section.limit for section in sections)
    if total > max_total_entries:
        given = "the default limits" if "sections" not in raw else "the limits"
        message = f"{given} add up to {total} entries; {MAX_ENTRIES_SETTING} allows at most"
        message += f" {max_total_entries}"
        errors.append(FieldError(f"{path}.sections", message))
    if errors:
        raise AssemblyValidationError(errors)
    return AssemblyOptions(format=FORMAT_MARKDOWN, sections=sections, show=show)
