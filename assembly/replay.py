"""Exact replay of a logged prepare: rebuild its candidates from the immutable revisions, run the same core.

``prepare_replay`` re-renders the content byte for byte and proves it against the logged SHA-256; a
mismatch (or a cited row that cannot be found) is reported, never hidden. The encoders here produce what
the prepare log stores of a request, so the log and its replay agree on one format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from artifacts import selectors
from artifacts.models import PrepareLog
from artifacts.selectors import RebuiltCandidates
from assembly.options import FORMAT_MARKDOWN
from assembly.selection import assemble_legacy, assemble_markdown, empty_result
from assembly.types import AssemblyOptions, PreparedResult, SectionSpec
from vocabulary.citation import Citation
from vocabulary.text import sha256_text

MODE_MARKDOWN = "markdown"
MODE_LEGACY = "legacy"


def options_record(options: AssemblyOptions | None) -> dict | None:
    """The effective options as the log stores them (None: the legacy envelope)."""
    if options is None:
        return None
    return {"sections": [[s.family, s.limit] for s in options.sections], "show": sorted(options.show)}


def options_from_record(raw: dict | None) -> AssemblyOptions | None:
    """The inverse of ``options_record``."""
    if raw is None:
        return None
    sections = tuple(SectionSpec(family, limit) for family, limit in raw["sections"])
    return AssemblyOptions(format=FORMAT_MARKDOWN, sections=sections, show=frozenset(raw["show"]))


def assembly_request_json(raw: dict | None) -> str | None:
    """The request's ``assembly`` object for recorded options, as JSON text (None: legacy)."""
    if raw is None:
        return None
    sections = [{"family": family, "limit": limit} for family, limit in raw["sections"]]
    return json.dumps({"sections": sections, "show": raw["show"]}, ensure_ascii=False)


def content_sha256(content: str | None) -> str:
    """What the log stores of the content: its SHA-256, empty for no content."""
    return "" if content is None else sha256_text(content)


@dataclass(frozen=True)
class Replay:
    """A logged prepare re-rendered: the result, whether it matches the log, and why not."""

    result: PreparedResult
    candidates: RebuiltCandidates
    content_sha256: str
    matches: bool
    problems: tuple[str, ...]


def _problems(log: PrepareLog, result: PreparedResult, digest: str, missing: tuple[Citation, ...]) -> list[str]:
    problems = [f"cited row not found: {citation.describe()}" for citation in missing]
    if digest != log.content_sha256:
        problems.append(f"content SHA-256 {digest or '(no content)'} differs from the logged {log.content_sha256}")
    if result.content_bytes != log.content_bytes:
        problems.append(f"content_bytes {result.content_bytes} differs from the logged {log.content_bytes}")
    if result.status != log.result_status:
        problems.append(f"status {result.status} differs from the logged {log.result_status}")
    return problems


def prepare_replay(*, log: PrepareLog) -> Replay | None:
    """Re-render a logged prepare from its record; None when it has no record (an error response)."""
    record = selectors.prepare_record_read(log=log)
    if record is None:
        return None
    query = log.query if selectors.prepare_log_query_kept(log=log) else None
    candidates = selectors.prepare_candidates_rebuild(record=record, query=query)
    options = options_from_record(record.options)
    max_bytes = log.max_bytes or 0
    if options is None:
        result = assemble_legacy(candidates.recalled, max_bytes=max_bytes)
    elif not options.sections:
        result = empty_result()
    else:
        result = assemble_markdown(candidates.recalled, options, max_bytes=max_bytes)
    digest = content_sha256(result.content)
    problems = _problems(log, result, digest, candidates.missing)
    return Replay(result, candidates, digest, matches=not problems, problems=tuple(problems))
