"""Prepare orchestration (the RFC's ScopedContextApplication + PreparedContextBuilder).

Resolve the current scope and its direct references, authorize every scope this request will
read before reading any candidate, recall only the selected families, and hand typed candidates to
the pure assembly core. This is the one implementation behind the API and the admin inspector.
"""

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from django.utils.module_loading import import_string

from artifacts import selectors
from artifacts.models import Scope
from artifacts.recall.sources import RankedBy, RecallResult
from artifacts.recall.vectors.query import query_cache_owner
from assembly.conf import assembly_settings
from assembly.options import parse_assembly_options
from assembly.policy import Selection, SelectionPolicy
from assembly.selection import assemble_legacy, assemble_markdown, empty_result, pool_positions
from assembly.types import AssemblyOptions, Candidate, PreparedResult
from infrastructure import metrics
from vocabulary.errors import Conflict, Forbidden, ServiceUnavailable
from vocabulary.families import CURRENT_SCOPE_ONLY_FAMILIES, LEGACY_FAMILIES, POOL_CAP
from vocabulary.limits import MAX_SCOPE_REFERENCES

RecallSource = Callable[..., list[list[Candidate]]]
"""``source(scopes=[…], query=…)``: per scope (in the given order), its candidates in retrieval order."""


class RecallSourceFailed(ServiceUnavailable):
    """A configured recall source raised: the request fails (503), it is never an empty result."""

    log_with_traceback = True
    unavailable_cause = "recall_source"


class ReferencedScopeForbidden(Forbidden):
    """The key may read the current scope but not a referenced scope this request must read."""

    # Names no scope: which references exist is not the caller's to learn from an error.
    fixed_public_message = "the API key may not read a scope this request must read"


class ScopeReferencesOverLimit(Conflict):
    """A scope stored with more references than one prepare reads (written before the limit, or around the
    services): refused whole rather than prepared from some of them (409). Only when the request reads
    references; it comes before their authorization, which would need them all.
    """

    # The same for any such scope: how many references it has is not the caller's to learn from an error.
    fixed_public_message = (
        f"this scope references more than {MAX_SCOPE_REFERENCES} scopes, more than one prepare reads; "
        "an operator must remove some of its references"
    )


class ReadPrincipal(Protocol):
    """What the runtime needs of a caller: may it read this scope? (``artifacts.auth.ApiKeyPrincipal``, the
    inspector's principals)"""

    def can_read(self, scope: Scope) -> bool:  # pragma: no cover - protocol
        raise NotImplementedError


@dataclass(frozen=True)
class PrepareOutcome:
    """The core's result plus the scopes read and the candidates the core got (the prepare log, the inspector).

    ``selection``: the policy as applied (with the tiers read), when the request asked for one; the candidates
    then carry the scores the policy ranked them by.
    """

    result: PreparedResult
    scopes: tuple[str, ...]
    recalled: Mapping[str, Sequence[Sequence[Candidate]]] = field(default_factory=dict)
    selection: Selection | None = None
    recall: tuple[RankedBy, ...] = ()
    """What ranked the recall (``RecallResult.ranked_by``): each BM25 call's ``HybridRecall`` and its fused
    candidates' ranks by citation."""
    evidence: RecallResult = field(default_factory=RecallResult)
    """Everything recall returned, with each candidate's evidence (the inspector shows its scores)."""


def assembly_options_parse(raw: object) -> AssemblyOptions:
    """Validate raw assembly options with the runtime's total-entries policy (422 on failure)."""
    return parse_assembly_options(raw, max_total_entries=assembly_settings().max_entries)


def recall_source_for(family: str) -> RecallSource | None:
    """The configured recall callable of a family, or None when the family has no source."""
    path = assembly_settings().recall_sources.get(family)
    return _imported(path) if path else None


@functools.lru_cache(maxsize=64)
def _imported(path: str) -> Callable[..., Any]:
    """A configured dotted path, imported once per process (by its text: a changed setting names another)."""
    imported: Callable[..., Any] = import_string(path)
    return imported


def families_recall(families: Sequence[str], scopes: Sequence[Scope], query: str) -> RecallResult:
    """Every selected family's candidates per scope, with their evidence and what ranked them; families whose
    sources share a ``recall_batch`` together.

    A source may carry ``recall_batch(scopes_by_family=…, query=…)`` returning a ``RecallResult``: prepare then
    recalls all the families with the same batch in one call (the built-in BM25 sources share one, a few statements
    in all). Any other source returns its candidates per scope, their evidence in their own fields.
    """
    batches: dict[Callable[..., RecallResult], dict[str, Sequence[Scope]]] = {}
    singles: dict[str, tuple[RecallSource, Sequence[Scope]]] = {}
    for family in families:
        source = recall_source_for(family)
        if source is None:
            continue
        family_scopes = scopes[:1] if family in CURRENT_SCOPE_ONLY_FAMILIES else scopes
        if (batch := getattr(source, "recall_batch", None)) is not None:
            batches.setdefault(batch, {})[family] = family_scopes
        else:
            singles[family] = (source, family_scopes)
    recalled = RecallResult()
    for batch, scopes_by_family in batches.items():
        recalled = recalled.merged(
            _recall(tuple(scopes_by_family), batch, scopes_by_family=scopes_by_family, query=query)
        )
    for family, (source, family_scopes) in singles.items():
        hits = _recall((family,), source, scopes=family_scopes, query=query)
        recalled = recalled.merged(RecallResult.of_candidates(family, hits))
    if "memory" in recalled.candidates and (path := assembly_settings().memory_reranker):
        reranker = _imported(path)
        try:
            reranked = [list(reranker(query, hits)) for hits in recalled.candidates["memory"]]
        except Exception as exc:
            raise RecallSourceFailed("recall source for memory failed") from exc
        recalled = recalled.reordered("memory", reranked)
    return recalled


_Recalled = TypeVar("_Recalled")


def _recall(families: tuple[str, ...], recall: Callable[..., _Recalled], **arguments: object) -> _Recalled:
    """One call of a source or batch: a failure is the request's (503); its duration is each family's."""
    started = time.perf_counter()
    try:
        return recall(**arguments)
    except Exception as exc:
        raise RecallSourceFailed(f"recall source for {', '.join(families)} failed") from exc
    finally:
        elapsed = time.perf_counter() - started
        for family in families:
            metrics.RECALL_DURATION.labels(family).observe(elapsed)


def scopes_authorized(*, principal: ReadPrincipal, scope_id: str, families: Sequence[str]) -> list[Scope]:
    """The scopes a request recalling ``families`` reads: the current one, then its direct references unless every
    family is the current scope's only; each authorized before any candidate is read (no partial answer on
    failure). Raises NotFound (unknown or unreadable current scope, the same), ScopeReferencesOverLimit and
    ReferencedScopeForbidden."""
    scope, references = selectors.scope_get_readable_with_references(principal=principal, scope_id=scope_id)
    scopes = [scope]
    if any(family not in CURRENT_SCOPE_ONLY_FAMILIES for family in families):
        if len(references) > MAX_SCOPE_REFERENCES:
            raise ScopeReferencesOverLimit(f"scope {scope_id} has more than {MAX_SCOPE_REFERENCES} references")
        scopes += references
    if not all(principal.can_read(s) for s in scopes[1:]):
        raise ReferencedScopeForbidden("the API key may not read a scope this request references")
    return scopes


def context_prepare(
    *,
    principal: ReadPrincipal,
    scope_id: str,
    query: str,
    max_bytes: int,
    options: AssemblyOptions | None,
    selection: SelectionPolicy | None = None,
) -> PrepareOutcome:
    """Prepare the context string: Markdown V1 with ``options``, the legacy envelope without.

    ``selection`` (Markdown V1 only) applies the selection policy with the operator's tier of each scope read.
    Raises NotFound (unknown or unreadable current scope, the same), ScopeReferencesOverLimit,
    ReferencedScopeForbidden, RecallSourceFailed. Reads nothing from artifacts when ``options`` selects no family.
    """
    if selection is not None and options is None:
        raise ValueError("a selection policy needs assembly options (the legacy envelope has none)")
    if options is not None and not options.sections:
        selectors.scope_get_readable_with_references(principal=principal, scope_id=scope_id)
        applied = Selection(selection, ()) if selection is not None else None
        return PrepareOutcome(result=empty_result(), scopes=(), selection=applied)

    families = LEGACY_FAMILIES if options is None else tuple(s.family for s in options.sections)
    scopes = scopes_authorized(principal=principal, scope_id=scope_id, families=families)

    scope_ids = tuple(s.scope_id for s in scopes)
    # The query vector is cached for this key alone: a hit is faster, and no key may time another's queries.
    with query_cache_owner(getattr(principal, "api_key_id", None)):
        evidence = families_recall(families, scopes, query)
    recalled = {family: evidence.candidates.get(family, []) for family in families}
    applied = None
    if selection is not None:
        applied = Selection(selection, scope_ids, {s.scope_id: s.authority for s in scopes})
        recalled = {family: _with_pool_evidence(evidence, family) for family in families}
    if options is None:
        result = assemble_legacy(recalled, max_bytes=max_bytes)
    else:
        result = assemble_markdown(recalled, options, max_bytes=max_bytes, selection=applied)
    return PrepareOutcome(
        result=result,
        scopes=scope_ids,
        recalled=recalled,
        selection=applied,
        recall=evidence.ranked_by,
        evidence=evidence,
    )


def _with_pool_evidence(evidence: RecallResult, family: str) -> list[list[Candidate]]:
    """The family's candidates, those that can enter its pool carrying the evidence the policy ranks by (the others
    are dropped before it reads any)."""
    per_scope = evidence.candidates.get(family, [])
    return evidence.with_evidence(family, pool_positions([len(hits) for hits in per_scope], POOL_CAP.get(family)))
