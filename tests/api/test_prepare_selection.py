"""POST /v1/context/prepare with a selection policy (issue 35, seeds/003): the chapter's teaching fixture end to end.

A user default, a workspace override and this turn's instruction compete for one conflict slot; a low-confidence
entry, an exact duplicate and a candidate from a scope this prepare never read (injected by a faulty recall source)
are each rejected with their reason. Decisions are read back from the prepare log's exact replay.
"""

import dataclasses
import html
import json
from urllib.parse import parse_qs, urlparse

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts import selectors
from artifacts.models import PrepareLog, Scope
from artifacts.recall import sources
from artifacts.services import EntryVersionWrite, memory_revision_create
from assembly.replay import prepare_replay
from tests.api.factories import (
    add_profile,
    error_of,
    field_paths,
    make_key,
    make_scope,
    markdown_of,
    ok_json,
    prepare,
)
from tests.api.test_prepare_statements import PREPARE_STATEMENTS_MAX
from tests.api.test_verify_history import triggers_lifted
from vocabulary.authority import AUTHORITY_CURRENT_TURN, AUTHORITY_USER_DEFAULT, AUTHORITY_WORKSPACE_OVERRIDE
from vocabulary.tokens import estimate_context_tokens

pytestmark = pytest.mark.django_db

SLOT = "preference:automation-language"
QUERY = "which language for the automation script?"
ASSEMBLY = {"sections": [{"family": "memory", "limit": 5}]}


def write(scope, *entries):
    """Entries ``(entry_id, body, conflict_key)`` as one memory revision, through the write service."""
    memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[EntryVersionWrite(entry_id=e, version_id=None, body=b, conflict_key=k) for e, b, k in entries],
        author="test",
    )


def recall_with_a_foreign_candidate(*, scopes, query):
    """A faulty custom source: the built-in memory recall, plus a candidate of a scope nobody asked for."""
    recalled = sources.recall_memory(scopes=scopes, query=query)
    foreign = sources.recall_memory(scopes=[selectors.scope_get(scope_id="user:grace")], query=query)[0]
    recalled[0] = foreign + recalled[0]
    return recalled


def recall_with_confident_backups(*, scopes, query):
    """A custom source that scores some of its own candidates: the built-in recall, the backup entry sure of itself."""
    recalled = sources.recall_memory(scopes=scopes, query=query)
    return [
        [dataclasses.replace(hit, score=9.0) if hit.citation.entry_id == "backup" else hit for hit in hits]
        for hits in recalled
    ]


def copying_reranker(query, hits):
    """A reranker that returns copies of the candidates, in reverse order."""
    return [dataclasses.replace(hit) for hit in reversed(hits)]


@pytest.fixture
def teaching(settings):
    settings.POWERCONTEXT_RECALL_SOURCES = {
        **settings.POWERCONTEXT_RECALL_SOURCES,
        "memory": f"{__name__}.recall_with_a_foreign_candidate",
    }
    user, workspace, grace = make_scope("user:ada"), make_scope("workspace:etl"), make_scope("user:grace")
    turn = make_scope("turn:ada-etl", references=[workspace, user])
    Scope.objects.filter(pk=workspace.pk).update(authority=AUTHORITY_WORKSPACE_OVERRIDE)
    Scope.objects.filter(pk=turn.pk).update(authority=AUTHORITY_CURRENT_TURN)
    write(
        user,
        ("py", "For automation I usually prefer Python", SLOT),
        ("review", "Review every automation script before it runs", None),
    )
    write(
        workspace,
        ("ts", "Every automation script in this repo uses TypeScript", SLOT),
        ("review", "review every  automation script before it runs", None),
    )
    write(turn, ("go", "Use Go for the automation script", SLOT), ("backup", "Keep the nightly database backup", None))
    write(grace, ("rust", "Grace writes every automation script in Rust", SLOT))
    return make_key(read=[turn, workspace, user])


POLICY = {"policy": "authority-v1", "min_score": 0.3}


def _prepare(client, key, **fields):
    body = {"scope_id": "turn:ada-etl", "query": QUERY, "assembly": ASSEMBLY, "selection": POLICY, **fields}
    return prepare(client, key, body)


def _logged_decisions():
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert replay.matches, replay.problems
    return {
        (d.citation.scope_id, d.citation.entry_id): (
            d.reason or d.outcome,
            d.authority,
            (d.winner.scope_id, d.winner.entry_id) if d.winner else None,
        )
        for d in replay.result.decisions
    }


TEACHING_DECISIONS = {
    ("turn:ada-etl", "go"): ("included", AUTHORITY_CURRENT_TURN, None),
    ("turn:ada-etl", "backup"): ("low_confidence", AUTHORITY_CURRENT_TURN, None),
    ("workspace:etl", "review"): ("included", AUTHORITY_WORKSPACE_OVERRIDE, None),
    ("workspace:etl", "ts"): ("authority_loser", AUTHORITY_WORKSPACE_OVERRIDE, ("turn:ada-etl", "go")),
    ("user:ada", "py"): ("authority_loser", AUTHORITY_USER_DEFAULT, ("turn:ada-etl", "go")),
    ("user:ada", "review"): ("duplicate_content", AUTHORITY_USER_DEFAULT, ("workspace:etl", "review")),
    ("user:grace", "rust"): ("scope_mismatch", None, None),
}


def test_the_teaching_fixture_selects_this_turns_instruction_and_rejects_every_other_candidate_with_its_reason(
    client, teaching
):
    document = markdown_of(_prepare(client, teaching))
    assert [(e.scope, e.entry_id, e.number) for e in document.entries] == [
        ("turn:ada-etl", "go", 1),
        ("workspace:etl", "review", 2),
    ]
    assert _logged_decisions() == TEACHING_DECISIONS


def test_the_prepare_log_records_the_policy_the_tiers_and_each_candidates_evidence(client, teaching):
    _prepare(client, teaching, selection={**POLICY, "max_tokens": 800})
    options = json.loads(PrepareLog.objects.order_by("-id").first().record)["options"]
    recorded = options["selection"]
    assert (recorded["policy"], recorded["min_score"], recorded["max_tokens"]) == ("authority-v1", 0.3, 800)
    assert recorded["tiers"] == [AUTHORITY_CURRENT_TURN, AUTHORITY_WORKSPACE_OVERRIDE, None]
    turn_evidence = recorded["evidence"]["memory"][0]
    assert [slot for _, _, slot in turn_evidence] == [SLOT, SLOT, None]  # grace's injected candidate first
    assert all(isinstance(score, float) for score, _, _ in turn_evidence)
    assert all(len(captured) == 27 and captured.endswith("Z") for _, captured, _ in turn_evidence)


def test_a_logged_policy_prepare_replays_exactly_after_an_operator_changes_a_tier(client, teaching):
    content = ok_json(_prepare(client, teaching))["content"]
    Scope.objects.filter(scope_id="turn:ada-etl").update(authority=None)
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert replay.matches, replay.problems
    assert replay.result.content == content
    # A new prepare sees the new tier: the workspace now wins the slot.
    document = markdown_of(_prepare(client, teaching))
    assert ("workspace:etl", "ts") in [(e.scope, e.entry_id) for e in document.entries]


def test_a_profile_section_reads_the_scopes_without_a_profile_too(client, teaching):
    # Only the user's scope has a profile: the turn and workspace scopes are read and simply add none.
    add_profile(selectors.scope_get(scope_id="user:ada"), "Ada automates the nightly ETL.")
    sections = {"sections": [{"family": "memory", "limit": 5}, {"family": "profile", "limit": 2}]}
    document = markdown_of(_prepare(client, teaching, assembly=sections, selection={"policy": "authority-v1"}))
    assert ("user:ada", None) in [(e.scope, e.entry_id) for e in document.entries]
    decisions = _logged_decisions()
    assert decisions[("user:ada", None)] == ("included", AUTHORITY_USER_DEFAULT, None)


PROFILE_SECTIONS = {"sections": [{"family": "memory", "limit": 5}, {"family": "profile", "limit": 1}]}


def _logged_notes():
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert replay.matches, replay.problems
    return {
        (d.citation.family, d.citation.scope_id, d.citation.entry_id): (d.reason or d.outcome, d.note)
        for d in replay.result.decisions
    }


def test_a_profile_skips_an_active_confidence_gate_and_its_decision_says_the_gate_did_not_apply(client, teaching):
    # A profile snapshot is requested by its section and has no recall score: min_score 0.3 does not leave it out.
    add_profile(selectors.scope_get(scope_id="turn:ada-etl"), "Ada is choosing a language for the ETL script.")
    add_profile(selectors.scope_get(scope_id="user:ada"), "Ada automates the nightly ETL.")
    document = markdown_of(_prepare(client, teaching, assembly=PROFILE_SECTIONS))
    assert [(e.family, e.scope) for e in document.entries] == [
        ("memory", "turn:ada-etl"),
        ("memory", "workspace:etl"),
        ("profile", "turn:ada-etl"),
    ]
    notes = _logged_notes()
    # Both profiles pass the gate untested and say so; the section's limit (the top-k, by tier) decides between them.
    assert notes[("profile", "turn:ada-etl", None)] == ("included", "gate_not_applicable")
    assert notes[("profile", "user:ada", None)] == ("family_limit_reached", "gate_not_applicable")
    # A memory below min_score still fails it, and no other decision carries a note.
    assert notes[("memory", "turn:ada-etl", "backup")] == ("low_confidence", None)
    assert {note for (family, _, _), (_, note) in notes.items() if family == "memory"} == {None}


def test_the_inspector_and_the_prepare_log_page_show_a_profiles_gate_not_applicable_and_explain_it(
    client, staff_client, teaching
):
    add_profile(selectors.scope_get(scope_id="user:ada"), "Ada automates the nightly ETL.")
    content = ok_json(_prepare(client, teaching, assembly=PROFILE_SECTIONS))["content"]
    params = {
        "scope": "turn:ada-etl",
        "query": QUERY,
        "max_bytes": "8000",
        "assembly": json.dumps(PROFILE_SECTIONS),
        "selection": json.dumps(POLICY),
    }
    response = staff_client.get(INSPECT_URL, params)
    assert response.context["result"].content == content
    (row,) = [r for r in response.context["rows"] if r.decision.citation.family == "profile"]
    assert (row.decision.outcome, row.decision.note) == ("included", "gate_not_applicable")
    assert "has no recall score" in row.note_help
    page = response.content.decode()
    assert 'data-reason="" data-note="gate_not_applicable"' in page
    assert "<code>gate_not_applicable</code> — " in page  # the legend
    log = PrepareLog.objects.order_by("-id").first()
    page = staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()
    assert "equals the logged one" in page
    assert page.count("gate_not_applicable</abbr>") == 1


def test_an_unknown_stored_tier_fails_closed(client, teaching):
    # The database refuses such a tier (migration 0015); a superuser lifting the guards could still store one.
    with triggers_lifted():
        Scope.objects.filter(scope_id="workspace:etl").update(authority="system_override")
    document = markdown_of(_prepare(client, teaching))
    assert [(e.scope, e.entry_id) for e in document.entries] == [("turn:ada-etl", "go"), ("user:ada", "review")]
    decisions = _logged_decisions()
    assert decisions[("workspace:etl", "ts")] == ("unknown_authority", "system_override", None)
    assert decisions[("workspace:etl", "review")] == ("unknown_authority", "system_override", None)


def test_a_token_budget_leaves_out_what_does_not_fit_and_its_loser_stays_out(client, teaching):
    full = ok_json(_prepare(client, teaching))["content"]
    document = markdown_of(
        _prepare(client, teaching, selection={**POLICY, "max_tokens": estimate_context_tokens(full) - 1})
    )
    assert [(e.scope, e.entry_id) for e in document.entries] == [("turn:ada-etl", "go")]
    decisions = _logged_decisions()
    assert decisions[("workspace:etl", "review")][0] == "token_budget_exceeded"
    assert decisions[("user:ada", "review")][0] == "duplicate_content"


def test_a_reranker_that_returns_copies_keeps_the_evidence_of_its_candidates(client, teaching, settings):
    settings.POWERCONTEXT_MEMORY_RERANKER = f"{__name__}.copying_reranker"
    document = markdown_of(_prepare(client, teaching))
    assert [(e.scope, e.entry_id) for e in document.entries] == [("turn:ada-etl", "go"), ("workspace:etl", "review")]
    assert _logged_decisions() == TEACHING_DECISIONS


def test_a_custom_sources_own_score_is_what_the_policy_ranks_by(client, teaching, settings):
    settings.POWERCONTEXT_RECALL_SOURCES = {
        **settings.POWERCONTEXT_RECALL_SOURCES,
        "memory": f"{__name__}.recall_with_confident_backups",
    }
    document = markdown_of(_prepare(client, teaching))
    # Its own 9.0 clears min_score (BM25 gave it less) and ranks it first of its tier; the others keep theirs.
    assert [(e.scope, e.entry_id) for e in document.entries] == [
        ("turn:ada-etl", "backup"),
        ("turn:ada-etl", "go"),
        ("workspace:etl", "review"),
    ]
    logged = PrepareLog.objects.order_by("-id").first()
    scores = {(d.citation.scope_id, d.citation.entry_id): d.score for d in prepare_replay(log=logged).result.decisions}
    assert scores[("turn:ada-etl", "backup")] == 9.0
    assert 0.3 <= scores[("turn:ada-etl", "go")] < 9.0


def test_a_policy_prepare_of_no_sections_logs_its_policy_and_reads_nothing(client, teaching):
    response = _prepare(client, teaching, assembly={"sections": []})
    assert ok_json(response)["status"] == "empty"
    options = json.loads(PrepareLog.objects.order_by("-id").first().record)["options"]
    assert options["selection"]["policy"] == "authority-v1" and options["selection"]["evidence"] == {}


def test_without_selection_the_same_request_selects_as_before(client, teaching):
    body = {"scope_id": "turn:ada-etl", "query": QUERY, "assembly": ASSEMBLY}
    document = markdown_of(prepare(client, teaching, body))
    # The RFC's round robin over the scopes, the faulty source's foreign candidate included, no policy fields logged.
    assert [(e.scope, e.entry_id) for e in document.entries][:3] == [
        ("user:grace", "rust"),
        ("workspace:etl", "review"),
        ("user:ada", "py"),
    ]
    assert "selection" not in json.loads(PrepareLog.objects.order_by("-id").first().record)["options"]
    replay = prepare_replay(log=PrepareLog.objects.order_by("-id").first())
    assert all(d.authority is None and d.score is None for d in replay.result.decisions)


def test_a_policy_prepare_takes_no_more_statements_than_any_other(client, settings):
    settings.POWERCONTEXT_PREPARE_LOG = False
    user, workspace = make_scope("user:ada"), make_scope("workspace:etl")
    turn = make_scope("turn:ada-etl", references=[workspace, user])
    for scope in (turn, workspace, user):
        write(scope, ("lang", f"automation script language of {scope.scope_id}", SLOT))
    key = make_key(read=[turn, workspace, user])
    with CaptureQueriesContext(connection) as queries:
        document = markdown_of(_prepare(client, key, selection={**POLICY, "max_tokens": 2000}))
    assert len(document.entries) == 1  # nobody configured a tier: one slot, one winner (by score)
    assert len(queries.captured_queries) <= PREPARE_STATEMENTS_MAX


# --- operator views ------------------------------------------------------------------------------

INSPECT_URL = "/admin/powercontext/inspect/"


def _inspect(staff_client, selection):
    params = {
        "scope": "turn:ada-etl",
        "query": QUERY,
        "max_bytes": "8000",
        "assembly": json.dumps(ASSEMBLY),
        "selection": json.dumps(selection),
    }
    return staff_client.get(INSPECT_URL, params)


def test_the_inspector_shows_authority_slot_winner_score_and_reason_of_every_candidate(client, staff_client, teaching):
    api_content = ok_json(_prepare(client, teaching))["content"]
    response = _inspect(staff_client, POLICY)
    assert response.context["result"].content == api_content
    rows = {(r.decision.citation.scope_id, r.decision.citation.entry_id): r for r in response.context["rows"]}
    assert {
        key: (
            row.decision.reason or row.decision.outcome,
            row.decision.authority,
            (row.decision.winner.scope_id, row.decision.winner.entry_id) if row.decision.winner else None,
        )
        for key, row in rows.items()
    } == TEACHING_DECISIONS
    assert all(row.score is not None for row in rows.values())
    page = response.content.decode()
    assert 'data-reason="authority_loser"' in page
    assert '<code class="identity">&quot;preference:automation-language&quot;</code>' in page
    assert "&quot;turn:ada-etl&quot; &quot;memory&quot;@1 entry &quot;go&quot;" in page
    assert "authority-v1: scope gate, min_score 0.3" in page
    for code in (
        "scope_mismatch",
        "low_confidence",
        "unknown_authority",
        "duplicate_content",
        "authority_loser",
        "conflict_loser",
        "token_budget_exceeded",
    ):
        assert f"<code>{code}</code> — " in page


def test_the_inspector_refuses_a_bad_selection_like_the_api(staff_client, teaching):
    response = _inspect(staff_client, {"policy": "authority-v1", "min_score": -1})
    assert [e["path"] for e in response.context["errors"]] == ["selection.min_score"]


def test_the_prepare_log_page_shows_the_policys_decisions_and_reopens_the_inspector_with_it(
    client, staff_client, teaching
):
    content = ok_json(_prepare(client, teaching))["content"]
    log = PrepareLog.objects.order_by("-id").first()
    page = staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()
    assert "equals the logged one" in page and "ALARM" not in page
    assert "selection: {&quot;policy&quot;: &quot;authority-v1&quot;, &quot;min_score&quot;: 0.3}" in page
    assert page.count("authority_loser</abbr>") == 2
    assert "<td>&quot;current_turn&quot;</td>" in page
    assert "&quot;workspace:etl&quot; &quot;memory&quot;@1 entry &quot;review&quot;" in page
    start = page.index(INSPECT_URL)
    url = html.unescape(page[start : page.index('"', start)])
    assert parse_qs(urlparse(url).query)["selection"] == ['{"policy": "authority-v1", "min_score": 0.3}']
    assert staff_client.get(url).context["result"].content == content


# --- refusals ------------------------------------------------------------------------------------


@pytest.fixture
def key(db):
    return make_key(read=[make_scope("project:demo")])


INVALID_SELECTIONS = {
    "null": (None, ["selection"]),
    "a string": ("authority-v1", ["selection"]),
    "no policy": ({}, ["selection.policy"]),
    "unknown policy": ({"policy": "authority-v0"}, ["selection.policy"]),
    "unknown key": ({"policy": "authority-v1", "authority": "current_turn"}, ["selection.authority"]),
    "negative min_score": ({"policy": "authority-v1", "min_score": -0.5}, ["selection.min_score"]),
    "boolean min_score": ({"policy": "authority-v1", "min_score": True}, ["selection.min_score"]),
    "text min_score": ({"policy": "authority-v1", "min_score": "0.3"}, ["selection.min_score"]),
    "null min_score": ({"policy": "authority-v1", "min_score": None}, ["selection.min_score"]),
    "zero max_tokens": ({"policy": "authority-v1", "max_tokens": 0}, ["selection.max_tokens"]),
    "huge max_tokens": ({"policy": "authority-v1", "max_tokens": 32769}, ["selection.max_tokens"]),
    "fractional max_tokens": ({"policy": "authority-v1", "max_tokens": 10.5}, ["selection.max_tokens"]),
    "boolean max_tokens": ({"policy": "authority-v1", "max_tokens": False}, ["selection.max_tokens"]),
    "everything wrong": (
        {"policy": 1, "min_score": -1, "max_tokens": "x", "extra": 1},
        ["selection.extra", "selection.policy", "selection.min_score", "selection.max_tokens"],
    ),
}


@pytest.mark.parametrize("case", INVALID_SELECTIONS)
def test_every_bad_selection_is_a_422_naming_its_field(client, key, case):
    selection, paths = INVALID_SELECTIONS[case]
    response = prepare(client, key, {"assembly": {}, "selection": selection})
    assert field_paths(response) == paths


def test_a_selection_without_assembly_is_refused(client, key):
    response = prepare(client, key, {"selection": {"policy": "authority-v1"}})
    error = error_of(response, 422, "invalid_request")
    assert error["fields"] == [
        {"path": "selection", "message": "needs assembly (Markdown V1); the legacy envelope has no selection policy"}
    ]


def test_assembly_and_selection_errors_are_listed_together(client, key):
    response = prepare(client, key, {"assembly": {"format": "html"}, "selection": {"policy": "x"}})
    assert field_paths(response) == ["assembly.format", "selection.policy"]


def test_the_boundaries_of_a_selection_are_accepted(client, key):
    for selection in (
        {"policy": "authority-v1", "min_score": 0, "max_tokens": 1},
        {"policy": "authority-v1", "min_score": 1e9, "max_tokens": 32768},
    ):
        assert prepare(client, key, {"assembly": {}, "selection": selection}).status_code == 200
