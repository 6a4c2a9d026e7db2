"""Operator admin tool: the prepare inspector (``run_prepare_inspector``; wired in ``powercontext/urls.py``).

Staff type a scope id (and optionally a key to run as), a query, a byte budget, an assembly configuration (or
legacy mode) and optionally a selection policy, and see what ``POST /v1/context/prepare`` would return for that
request: the exact content with its byte count, and every candidate the runtime considered with its decision (under
a policy: its authority tier, conflict slot, score, the winner that beat it and a gate's note, such as a profile's
``gate_not_applicable``). The request is validated by the API's own request serializer and prepared by
``assembly.runtime.context_prepare`` (one implementation), with a principal that may read every scope. The page only
reads: it is a GET form, and it costs the same whatever the number of scopes and keys (each typed one is one exact
lookup).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib import admin
from django.template.response import TemplateResponse
from rest_framework import serializers

from artifacts import selectors
from artifacts.admin.related import hidden, may_view
from artifacts.auth import ApiKeyPrincipal
from artifacts.models import ApiKey, ArtifactRevision, MemoryEntryVersion, Scope
from artifacts.recall.fusion import Fused
from artifacts.recall.hybrid import (
    ABSTAINED,
    fused_by_citation,
    recall_abstained,
    recall_answered,
    recall_ranker,
)
from artifacts.recall.sources import RankedBy
from artifacts.selectors import CitationNotFound, ResolvedCitation
from assembly.api.serializers import PrepareContextRequestSerializer
from assembly.budget import MIN_TRUNCATED_BODY_BYTES
from assembly.policy import SelectionPolicy
from assembly.runtime import (
    PrepareOutcome,
    ReadPrincipal,
    RecallSourceFailed,
    ReferencedScopeForbidden,
    context_prepare,
)
from assembly.types import (
    NOTE_GATE_NOT_APPLICABLE,
    OUTCOME_INCLUDED,
    OUTCOME_INCLUDED_TRUNCATED,
    OUTCOME_SKIPPED,
    AssemblyOptions,
    Decision,
    Origin,
)
from infrastructure.errors import flatten_errors
from operator_tools.forms import InspectForm, scope_label
from operator_tools.links import entry_version_admin_url, revision_admin_url
from vocabulary.citation import Citation
from vocabulary.errors import InvalidInput, NotFound
from vocabulary.escaping import encodable, escape_invisible, json_literal, visible_json
from vocabulary.families import LEGACY_LIMITS, POOL_CAP, SECTION_TITLES
from vocabulary.recall_modes import RECALL_MODE_HYBRID

REASON_HELP = {
    "pool_cap": "beyond the family's merged candidate pool ("
    + ", ".join(f"{cap} {SECTION_TITLES[family].lower()}" for family, cap in POOL_CAP.items() if cap is not None)
    + ")",
    "no_body": "the candidate has no body",
    "duplicate": "same exact identity as an earlier candidate",
    "family_limit_reached": "the section already holds its limit of entries",
    "budget": "not even a minimal truncated entry fits the remaining bytes",
    "truncation_below_minimum": f"the longest fitting prefix is below the {MIN_TRUNCATED_BODY_BYTES}-byte minimum",
    "family_not_selected": "the family is recalled but not among the selected sections",
    # The selection policy's (seeds/003), in the order its gates run.
    "scope_mismatch": "from a scope this prepare did not read for the family (a recall source answered outside it)",
    "low_confidence": "its score is below the policy's min_score (no score counts as below when min_score > 0)",
    "unknown_authority": "its scope's stored authority tier is not a known tier: refused, never guessed",
    "duplicate_content": "the same normalized text in the same conflict slot as the winner named, which ranks first",
    "authority_loser": "another text in its conflict slot from a higher authority tier won the slot (the winner named)",
    "conflict_loser": "another text in its conflict slot from the same tier ranked first and won (the winner named)",
    "token_budget_exceeded": "the estimated tokens of the content with it would exceed the policy's max_tokens",
}
"""Every reason code, explained: the inspector's and the prepare log's legend. ``family_limit_reached`` is the
chapter's ``top_k_reached`` under a policy (the section's limit is its top-k)."""

NOTE_HELP = {
    NOTE_GATE_NOT_APPLICABLE: "the confidence gate (min_score > 0) did not apply: a profile snapshot is requested by "
    "its section and has no recall score, so the other gates and the limits decided it",
}
"""Every note a decision can carry, explained: the legend's second part (a note sits beside the outcome and
reason)."""


class AllScopesPrincipal(ReadPrincipal):
    """Staff who may run the inspector (``operator_tools.access``) may read every scope."""

    def can_read(self, scope: Scope) -> bool:
        return True


@dataclass(frozen=True)
class CandidateRow:
    """One row of the decision table."""

    decision: Decision
    position: int
    scope_literal: str
    artifact_literal: str
    entry_literal: str | None
    version_literal: str | None
    revision_url: str | None
    entry_version_url: str | None
    not_found: str | None
    placed_as: str | None
    reason_help: str | None
    note_help: str | None = None
    score: float | None = None
    scope_rank: int | None = None
    winner_literal: str | None = None
    fused: Fused | None = None
    """Under hybrid recall: its lexical rank, dense rank and fused score in its scope."""

    @property
    def fused_shown(self) -> str:
        return fused_text(self.fused)

    @property
    def slot_literal(self) -> str | None:
        slot = self.decision.conflict_slot
        return None if slot is None else json_literal(slot)

    @property
    def authority_literal(self) -> str | None:
        authority = self.decision.authority
        return None if authority is None else json_literal(authority)

    @property
    def included(self) -> bool:
        return self.decision.outcome in (OUTCOME_INCLUDED, OUTCOME_INCLUDED_TRUNCATED)


def _validate(body: dict) -> tuple[dict | None, list[dict]]:
    """The API's own request validation: validated data, or its field errors with their paths."""
    serializer = PrepareContextRequestSerializer(data=body)
    try:
        serializer.is_valid(raise_exception=True)
    except InvalidInput as exc:
        return None, list(exc.fields) or [{"path": "", "message": str(exc)}]
    except serializers.ValidationError as exc:
        return None, flatten_errors(exc.detail)
    return serializer.validated_data, []


def _placement(origin: Origin, *, legacy: bool) -> str:
    if legacy:
        return f"item {origin.number}"
    return f"{SECTION_TITLES.get(origin.section_family, origin.section_family)} {origin.number}"


def _scope_ranks(outcome: PrepareOutcome) -> dict[Citation, int]:
    """Each candidate's position in its scope's retrieval order (1 = first), as recall returned it."""
    ranks: dict[Citation, int] = {}
    for per_scope in outcome.recalled.values():
        for hits in per_scope:
            for rank, candidate in enumerate(hits, start=1):
                ranks.setdefault(candidate.citation, rank)
    return ranks


def _rows(outcome: PrepareOutcome, *, legacy: bool, scores: dict[Citation, float], user) -> list[CandidateRow]:
    # A citation links its revision's and entry version's pages for staff who may view them (artifacts.admin.related).
    may_open_revisions, may_open_versions = may_view(user, ArtifactRevision), may_view(user, MemoryEntryVersion)
    placed = {origin.citation: _placement(origin, legacy=legacy) for origin in outcome.result.origins}
    fused = fused_by_citation(outcome.recall)
    scope_ranks = _scope_ranks(outcome)
    resolved: dict[Citation, ResolvedCitation | str] = {}
    rows = []
    for position, decision in enumerate(outcome.result.decisions, start=1):
        citation = decision.citation
        if citation not in resolved:
            try:
                resolved[citation] = selectors.citation_resolve(citation=citation)
            except CitationNotFound as exc:
                resolved[citation] = str(exc)
        target = resolved[citation]
        found = target if isinstance(target, ResolvedCitation) else None
        rows.append(
            CandidateRow(
                decision=decision,
                position=position,
                scope_literal=json_literal(citation.scope_id),
                artifact_literal=json_literal(citation.artifact_id),
                entry_literal=json_literal(citation.entry_id) if citation.entry_id is not None else None,
                version_literal=json_literal(citation.entry_version) if citation.entry_version is not None else None,
                revision_url=revision_admin_url(found.revision) if found and may_open_revisions else None,
                entry_version_url=(
                    entry_version_admin_url(found.entry_version, cited_revision=citation.revision)
                    if found and may_open_versions
                    else None
                ),
                not_found=None if found else str(target),
                placed_as=placed.get(citation) if decision.outcome != OUTCOME_SKIPPED else None,
                reason_help=REASON_HELP.get(decision.reason or ""),
                note_help=NOTE_HELP.get(decision.note or ""),
                score=decision.score if decision.score is not None else scores.get(citation),
                scope_rank=scope_ranks.get(citation),
                winner_literal=winner_text(decision.winner) if decision.winner is not None else None,
                fused=fused.get(citation),
            )
        )
    return rows


def fused_text(fused: Fused | None) -> str:
    """A candidate's lexical rank / dense rank / cosine / score as the operator pages show it (— for what a ranking
    did not return or a cosine recall did not know, or for a candidate no fusion weighed); a learned ranker's score
    (its estimate of relevance) is marked ``learned``, a fused one ``fused``."""
    if fused is None:
        return "—"
    lexical, dense = ("—" if rank is None else str(rank) for rank in (fused.lexical_rank, fused.dense_rank))
    cosine = "—" if fused.cosine is None else f"{fused.cosine:.3f}"
    return f"{lexical} / {dense} / {cosine} / {fused.score:.5f} {'learned' if fused.learned else 'fused'}"


def winner_text(citation: Citation) -> str:
    """A winner as the decision tables name it: scope, artifact and (memory) entry, each a JSON literal."""
    text = f"{json_literal(citation.scope_id)} {json_literal(citation.artifact_id)}@{citation.revision}"
    if citation.entry_id is not None:  # has_entry
        text += f" entry {json_literal(citation.entry_id)}"
    return text


def describe_recall(recall: Sequence[RankedBy]) -> str:
    """What ranked a prepare's recall, as the operator pages state it."""
    if (hybrid := recall_answered(recall)) is None:
        return "lexical (BM25; POWERCONTEXT_RECALL_MODE is lexical)" if recall else "no family ranked by BM25"
    if hybrid.mode == RECALL_MODE_HYBRID:
        ranker = (
            "ranked by its learned ranker where the words suffice"
            if recall_ranker(recall) == "learned"
            else ("fused by hand")
        )
        text = f"hybrid: BM25 and the dense ranking of {hybrid.model_id}, {ranker} (memory and experience)"
        if abstained := recall_abstained(recall):
            scopes = "; ".join(f"{family}: {', '.join(ids)}" for family, ids in abstained.items())
            text += f"; {ABSTAINED} (nothing above the model's floor, no candidate) in {scopes}"
        return text
    return f"lexical: the query could not be embedded ({hybrid.outcome}), BM25 alone answered"


def describe_selection(selection: SelectionPolicy | None) -> str:
    """The selection policy as the operator pages state it."""
    if selection is None:
        return "none (each family in retrieval order, the RFC's selection)"
    tokens = "no token budget" if selection.max_tokens is None else f"max_tokens {selection.max_tokens}"
    gate = "confidence gate off" if selection.min_score == 0 else f"min_score {selection.min_score:g}"
    return (
        f"{selection.policy}: scope gate, {gate}, authority tiers set by operators per scope, exact dedupe, conflict "
        f"slots, then the section limit (top-k), the byte budget and {tokens}"
    )


def _describe_options(options: AssemblyOptions | None) -> str:
    if options is None:
        limits = " / ".join(str(limit) for limit in LEGACY_LIMITS.values())
        families = ", ".join(SECTION_TITLES[family].lower() for family in LEGACY_LIMITS)
        return f"legacy envelope (assembly omitted): {families} interleaved, limits {limits}"
    if not options.sections:
        return "Markdown V1 with no sections (an empty result that reads no candidates)"
    sections = ", then ".join(f"{section.family} ≤ {section.limit}" for section in options.sections)
    show = ", ".join(sorted(options.show)) or "no optional metadata"
    return f"Markdown V1: {sections}; show: {show}"


def _shown(text: str) -> str:
    """Echoed request text as operator pages show text: every invisible character and lone surrogate escaped."""
    return escape_invisible(encodable(text))


class _Refused(Exception):
    """The chosen key would be refused before prepare runs."""


def _scope_shown(scope: Scope, user) -> str:
    """The scope prepared: its id (the request's), with its title (the scope's) for staff who may view scopes."""
    return scope_label(scope) if may_view(user, Scope) else json_literal(scope.scope_id)


def _key_shown(principal: ApiKeyPrincipal, user):
    """The key run as: its name for staff who may view keys, else its id (the inspector takes either)."""
    if may_view(user, ApiKey):
        return json_literal(principal.name)
    return hidden(f"id {principal.api_key_id}", ApiKey, explained=True)


def _principal(api_key: ApiKey | None) -> tuple[ReadPrincipal, str | None]:
    """The operator, or the chosen key's grants; with a refusal message when the API would refuse the key."""
    if api_key is None:
        return AllScopesPrincipal(), None
    active = selectors.api_key_get_active_by_id(api_key_id=api_key.pk)
    if active is None:
        return AllScopesPrincipal(), "The API would answer 401 unauthenticated: this key is revoked."
    return ApiKeyPrincipal(api_key_id=active.api_key_id, name=active.name, grants=active.grants), None


def prepare_inspect_view(request):
    """The inspector page; a submitted form (GET) runs one prepare and shows content and decisions."""
    submitted = "scope" in request.GET
    form = InspectForm(request.GET if submitted else None)
    context = {
        **admin.site.each_context(request),
        "title": "Prepare inspector",
        "form": form,
        "reason_help": REASON_HELP,
        "note_help": NOTE_HELP,
    }
    if submitted and form.is_valid():
        body, errors = form.request_body()
        validated, api_errors = _validate(body)
        errors += api_errors
        context["request_json"] = visible_json(body, indent=2)
        if errors:
            # Paths echo the JSON keys sent, which may hold lone surrogates no page can encode, or a bidi control
            # that would make a shared inspector link's error read as something else: both are shown escaped.
            context["errors"] = [{"path": _shown(e["path"]), "message": _shown(e["message"])} for e in errors]
        else:
            principal, refusal = _principal(form.cleaned_data["api_key"])
            try:
                if refusal:
                    raise _Refused(refusal)
                outcome = context_prepare(principal=principal, **validated)
            except _Refused as exc:
                context["failure"] = str(exc)
            except NotFound:
                if isinstance(principal, AllScopesPrincipal):
                    context["errors"] = [{"path": "scope_id", "message": "scope not found"}]
                else:
                    context["failure"] = (
                        "The API would answer 404 not_found: the scope does not exist or this key may not read it "
                        "(the two answer alike)."
                    )
            except ReferencedScopeForbidden as exc:
                context["failure"] = f"The API would answer 403 forbidden: {exc.public_message}."
            except RecallSourceFailed as exc:
                # The API answers 503 here; the inspector says which source failed.
                context["failure"] = f"{exc} ({exc.__cause__!r}); the API would answer 503 service_unavailable"
            else:
                result = outcome.result
                context.update(
                    result=result,
                    scope_text=_scope_shown(form.cleaned_data["scope"], request.user),
                    scopes_read=[json_literal(scope_id) for scope_id in outcome.scopes],
                    options_text=_describe_options(validated["options"]),
                    selection_text=describe_selection(validated.get("selection")),
                    recall_text=describe_recall(outcome.recall),
                    hybrid=any(hybrid.mode == RECALL_MODE_HYBRID for hybrid, _ in outcome.recall),
                    max_bytes=validated["max_bytes"],
                    rows=_rows(
                        outcome,
                        legacy=validated["options"] is None,
                        scores=outcome.evidence.lexical_scores(),
                        user=request.user,
                    ),
                    run_as=_key_shown(principal, request.user) if isinstance(principal, ApiKeyPrincipal) else None,
                    included_count=len(result.origins),
                )
    return TemplateResponse(request, "admin/operator_tools/inspect.html", context)
