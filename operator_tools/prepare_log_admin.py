"""The prepare log in the admin: find any past prepare, read the exact text the agent got, and why.

The list filters by key, scope, HTTP status, mode, result and time (the last hour, today, the last 7 or 30 days) and
searches by id, scope id, key name (for staff who may view keys) and content and query SHA-256 (the query's for staff
who may read queries: each of the two confirms a guess); no filter reads the log to list its choices
(``artifacts.admin.filters``), and the count stops at 10,000 rows (``artifacts.admin.paging``): a page costs the same
however long the log.
An entry's page re-renders the content from the immutable revisions it cites (``assembly.replay``), proves it
against the logged SHA-256 (a mismatch is an alarm at the top of the page), shows it escaped like a revision body,
lists every candidate with its decision, reason and links to the exact revision and entry version (under a selection
policy also its authority tier, conflict slot, score, the winner that beat it and a gate's note, as logged; under
hybrid recall each candidate's logged lexical rank, dense rank and fused score), and links the inspector with the
same request. Read-only.

Who sees what (``operator_tools.access``): the list and each entry's metadata (time, key, scope as sent, status,
sizes, hashes, what ranked recall: mode, model, outcome) need ``view_preparelog``; the query, the content, the
candidates and the replay also need ``view_prepare_log_content``, and the inspector link the inspector's permission
too. Another model's data needs that model's view permission as well (``artifacts.admin.related``): the key's name
(``view_apikey``; else the key is ``id 7``), the links to a scope's, a revision's and an entry version's pages.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from artifacts import selectors
from artifacts.admin.display import ReadOnlyAdmin, text_shown
from artifacts.admin.filters import BoundedRelatedFieldListFilter, RecentListFilter, vocabulary_filter
from artifacts.admin.paging import CappedCountAdmin
from artifacts.admin.related import hidden, may_view, viewer_display
from artifacts.models import ApiKey, ArtifactRevision, Erasure, MemoryEntryVersion, PrepareLog, Scope
from artifacts.recall.fusion import Fused
from artifacts.recall.hybrid import ABSTAINED, HybridRecall
from artifacts.recall.vectors.query import MODE_IS_LEXICAL
from assembly.api.views import PREPARE_ERROR_STATUSES
from assembly.replay import (
    MODE_LEGACY,
    MODES,
    RECORD_RECALL,
    Replay,
    assembly_request_json,
    prepare_replay,
    selection_request_json,
)
from assembly.types import RESULT_STATUSES, Citation
from operator_tools.access import INSPECTOR, VIEW_PREPARE_LOG_CONTENT
from operator_tools.links import entry_version_pk_admin_url
from operator_tools.views.inspect import NOTE_HELP, REASON_HELP, describe_recall, fused_text, winner_text
from vocabulary.escaping import json_literal, short_identity
from vocabulary.recall_modes import RECALL_MODE_LEXICAL

LOGGED_STATUSES = (200, *PREPARE_ERROR_STATUSES, 500)
"""The HTTP statuses the status filter offers: an answer, each error the endpoint declares, and an unexpected error
(``internal_error``). Another one logged (406 for a request accepting no JSON) is found with ``?http_status=406``."""

_DECISION_COLUMNS = (
    "#",
    "family",
    "outcome",
    "reason",
    "note",
    "rank",
    "bytes",
    "scope",
    "artifact",
    "revision",
    "entry",
    "authority",
    "slot",
    "score",
    "winner",
)


def _replayed(obj: PrepareLog) -> Replay | None:
    """The entry's replay, computed once per page (kept on the instance, beside its fields)."""
    memo = vars(obj)
    if "_powercontext_replay" not in memo:
        memo["_powercontext_replay"] = prepare_replay(log=obj)
    replay: Replay | None = memo["_powercontext_replay"]
    return replay


def _erased(erasure: Erasure) -> str:
    """Which erasure scrubbed an entry, as a sentence (``manage.py erase``, docs/erasure.md)."""
    return (
        f"was erased by erasure #{erasure.sequence} ({erasure.kind}) on {erasure.erased_at:%Y-%m-%d %H:%M:%S} UTC "
        f"by {json_literal(erasure.erased_by)}, reason {json_literal(erasure.reason)}"
    )


def _logged_recall(obj: PrepareLog) -> dict | None:
    """What ranked the logged prepare's recall (``assembly.replay.recall_record``), None when recall was lexical by
    configuration or nothing was recorded; read once per page."""
    memo = vars(obj)  # kept on the instance, as _replayed's
    if "_powercontext_recall" not in memo:
        record = selectors.prepare_record_read(log=obj) if obj.mode else None
        memo["_powercontext_recall"] = (record.options or {}).get(RECORD_RECALL) if record else None
    recall: dict | None = memo["_powercontext_recall"]
    return recall


def _logged_fused(obj: PrepareLog, replay: Replay) -> dict[Citation, Fused] | None:
    """Each fused candidate's logged lexical rank, dense rank and fused score by citation (the record lists them in
    recalled order, as the replay rebuilds the candidates); None when no candidate was fused."""
    ranks = (_logged_recall(obj) or {}).get("ranks")
    if not ranks:
        return None
    fused = {}
    for family, per_scope in ranks.items():
        for logged, hits in zip(per_scope, replay.candidates.recalled.get(family, []), strict=False):
            for entry, candidate in zip(logged, hits, strict=False):
                if entry is not None:
                    # Records written before the learned ranker hold the first three only.
                    lexical_rank, dense_rank, score, cosine, learned = (*entry, None, False)[:5]
                    fused[candidate.citation] = Fused(
                        None, lexical_rank, dense_rank, score, protected=False, cosine=cosine, learned=bool(learned)
                    )
    return fused


def inspector_url(log: PrepareLog, user) -> str | None:
    """The inspector, as the logged key, with the logged request (None for a refused request). The key by its name
    for ``user`` when they may view keys, else by its id (the inspector takes either)."""
    record = selectors.prepare_record_read(log=log)
    # log.scope: None without a query when scope_id is None, else the row the page selected with the log.
    if record is None or (scope := log.scope) is None or not selectors.prepare_log_query_kept(log=log):
        return None
    # The scope id and the key's name as JSON literals: the inspector's text inputs would drop a line break they hold.
    params = {
        "scope": json_literal(scope.scope_id),
        "literals": "on",
        "query": log.query,
        "max_bytes": log.max_bytes,
    }
    if log.api_key_id is not None:
        api_key = log.api_key if may_view(user, ApiKey) else None
        params["api_key"] = str(log.api_key_id) if api_key is None else json_literal(api_key.name)
    if log.mode == MODE_LEGACY:
        params["legacy"] = "on"
    else:
        params["assembly"] = assembly_request_json(record.options)
        if (selection := selection_request_json(record.options)) is not None:
            params["selection"] = selection
    return f"{reverse('admin-prepare-inspect')}?{urlencode(params)}"


def duration_shown(duration_ms: float | None) -> str | None:
    """A logged duration as an operator reads it: ``38.3 ms`` (the row keeps the full float)."""
    return None if duration_ms is None else f"{duration_ms:,.1f} ms"


def _short_column(path: str, description: str):
    """A list column showing the field as is, under a short heading (the headings set the columns' widths)."""

    @admin.display(description=description, ordering=path)
    def column(*args):
        return getattr(args[-1], path)

    return column


def _link(url: str | None, label: str):
    return format_html('<a href="{}">{}</a>', url, label) if url else label


@admin.register(PrepareLog)
class PrepareLogAdmin(CappedCountAdmin, ReadOnlyAdmin):
    change_form_template = "admin/powercontext/immutable_change_form.html"
    # Narrow columns, so that all of them fit beside the admin's sidebar and filters at 1400 px: the entry by its
    # number, the HTTP status with its error code, the duration rounded (the detail page has the rest).
    list_display = [
        "entry_column",
        "time_column",
        "api_key_column",
        "scope_sent_column",
        "status_column",
        "mode",
        _short_column("result_status", "result"),
        _short_column("content_bytes", "bytes"),
        "duration_column",
    ]
    list_display_links = ["entry_column"]
    # Sorted only by what is indexed (the entry number, the time): the log holds up to
    # POWERCONTEXT_PREPARE_LOG_MAX_MB of rows, and sorting all of them by another column is a scan and a sort per view.
    sortable_by = ["entry_column", "time_column"]
    # Choices from the code's vocabulary, bounded reads of the key and scope tables and the clock
    # (artifacts.admin.filters): Django's own filters, and its date hierarchy, would run a SELECT DISTINCT over the
    # whole log on every view.
    list_filter = [
        ("http_status", vocabulary_filter(LOGGED_STATUSES)),
        ("mode", vocabulary_filter(MODES)),
        ("result_status", vocabulary_filter(RESULT_STATUSES)),
        ("api_key", BoundedRelatedFieldListFilter),
        ("scope", BoundedRelatedFieldListFilter),
        RecentListFilter,
    ]
    list_select_related = ["api_key", "scope"]
    # Metadata only: searching the query would tell staff without the content permission what tenants asked.
    search_fields = ["=id", "scope_sent", "=content_sha256"]
    # What any staff user who may view the log reads: who asked, when, how it was answered, sizes and hashes.
    metadata_fields = [
        "created_at",
        "api_key_shown",
        "scope_shown",
        "http_status",
        "error_code",
        "duration_column",
        "mode",
        "max_bytes",
        "recall_shown",
        "result_status",
        "content_bytes",
        "content_sha256",
    ]
    # What the tenant asked and was given (the query, the re-rendered content, the candidates and their citations):
    # only with the content permission; none of it is re-rendered for anyone else.
    content_fields = ["request_shown", "replay_verdict", "content_shown", "candidates_shown"]
    readonly_fields = [*metadata_fields, *content_fields, "inspector_link"]

    def get_search_fields(self, request):
        fields = list(self.search_fields)
        # A key's name finds its entries, which confirms a guessed name: only for staff who may view keys.
        if may_view(request.user, ApiKey):
            fields.append("api_key__name")
        # The query's SHA-256 finds an entry whose query was kept only as a hash, but it also confirms a guessed
        # query: only for staff who may read queries anyway.
        if request.user.has_perm(VIEW_PREPARE_LOG_CONTENT):
            fields.append("=query_sha256")
        return fields

    def get_fields(self, request, obj=None):
        fields = list(self.metadata_fields)
        if request.user.has_perm(VIEW_PREPARE_LOG_CONTENT):
            fields += self.content_fields
            if INSPECTOR.allowed(request.user):  # its link carries the query
                fields.append("inspector_link")
        return fields

    def page_subtitle(self, obj) -> str:
        return str(obj)

    @admin.display(description="entry", ordering="id")
    def entry_column(self, obj):
        return f"#{obj.pk}"

    @admin.display(description="time", ordering="created_at")
    def time_column(self, obj):
        # Date and time on two lines where the column is narrow (Django keeps a date field's column on one line).
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M:%S")

    @admin.display(description="status", ordering="http_status")
    def status_column(self, obj):
        return f"{obj.http_status} {obj.error_code}" if obj.error_code else str(obj.http_status)

    @admin.display(description="duration", ordering="duration_ms")
    def duration_column(self, obj):
        return duration_shown(obj.duration_ms)

    @admin.display(description="scope", ordering="scope_sent")
    def scope_sent_column(self, obj):
        # Blank when the body was not read (the admin's empty value, as for a missing key), not an empty literal.
        return short_identity(obj.scope_sent) if obj.scope_sent else None

    # The key is the log's own column; its name is the key's (view_apikey), else the key shows as its id.
    @viewer_display(description="API key")
    def api_key_column(self, obj, user):
        if obj.api_key_id is None:
            return None  # the admin's empty value: a prepare logged without a valid key
        if not may_view(user, ApiKey):
            return hidden(f"id {obj.api_key_id}", ApiKey)
        return short_identity(obj.api_key.name)

    @viewer_display(description="API key")
    def api_key_shown(self, obj, user):
        if obj.api_key_id is None:
            return "— (no valid key)"
        if not may_view(user, ApiKey):
            return hidden(f"id {obj.api_key_id}", ApiKey, explained=True)
        url = reverse("admin:artifacts_apikey_change", args=[obj.api_key_id])
        return _link(url, short_identity(obj.api_key.name))

    @viewer_display(description="Scope (as sent)")
    def scope_shown(self, obj, user):
        if not obj.scope_sent:
            return "— (the body was not read)"
        linked = obj.scope_id is not None and may_view(user, Scope)
        url = reverse("admin:artifacts_scope_change", args=[obj.scope_id]) if linked else None
        return _link(url, json_literal(obj.scope_sent))

    @admin.display(description="Request")
    def request_shown(self, obj):
        if not obj.mode:
            return "— (refused before a request was accepted; bodies of refusals are not logged)"
        record = selectors.prepare_record_read(log=obj)
        scopes = ", ".join(json_literal(s) for s in record.scopes) if record else ""
        options = (
            "legacy envelope (assembly omitted)"
            if obj.mode == MODE_LEGACY
            else assembly_request_json(record.options if record else None)
        )
        erasure = obj.erasure  # None without a query when erasure_id is None
        query = (
            format_html(
                "<p>erased ({} bytes, SHA-256 {} kept): {}</p>", obj.query_bytes, obj.query_sha256, _erased(erasure)
            )
            if erasure is not None
            else text_shown(obj.query)
            if selectors.prepare_log_query_kept(log=obj)
            else format_html(
                "<p>not kept ({} bytes, SHA-256 {}): over POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES</p>",
                obj.query_bytes,
                obj.query_sha256,
            )
        )
        selection = selection_request_json(record.options if record else None)
        return format_html(
            "<div>query:</div>{}<div>max_bytes: {}</div><div>assembly: {}</div><div>selection: {}</div>"
            "<div>scopes read: {}</div>",
            query,
            obj.max_bytes,
            options,
            selection or "none",
            scopes or "none",
        )

    @admin.display(description="Recall")
    def recall_shown(self, obj):
        if not obj.mode:
            return "—"
        # No recall record: recall was lexical by configuration.
        logged = _logged_recall(obj) or {"mode": RECALL_MODE_LEXICAL, "outcome": MODE_IS_LEXICAL}
        hybrid = HybridRecall(
            logged["mode"],
            logged["outcome"],
            logged.get("model"),
            abstained_scopes=logged.get(ABSTAINED) or {},
            learned=logged.get("ranker") == "learned",
        )
        return describe_recall([(hybrid, {})])

    @admin.display(description="Replay")
    def replay_verdict(self, obj):
        if (erasure := obj.erasure) is not None:
            return format_html(
                '<p class="powercontext-replay-erased">Erased: this prepare showed content that {}; it is not '
                "re-rendered (the logged SHA-256 {} stays).</p>",
                _erased(erasure),
                obj.content_sha256 or "(no content)",
            )
        replay = _replayed(obj)
        if replay is None:
            return "— (nothing to replay: the request was refused)"
        if replay.matches:
            return format_html(
                '<p class="powercontext-replay-ok">Exact: re-rendered from the cited revisions, {} bytes, '
                "SHA-256 {} equals the logged one.</p>",
                replay.result.content_bytes,
                replay.content_sha256 or "(no content)",
            )
        return format_html(
            '<p class="powercontext-replay-alarm errornote"><strong>ALARM: the replay differs from what was '
            "logged.</strong></p><ul>{}</ul>",
            format_html_join("", "<li>{}</li>", ((problem,) for problem in replay.problems)),
        )

    @admin.display(description="Content (as the agent got it)")
    def content_shown(self, obj):
        if obj.erasure_id is not None:
            return "— (erased)"
        replay = _replayed(obj)
        if replay is None:
            return "—"
        if replay.result.content is None:
            return 'none (status "empty", content null)'
        return text_shown(replay.result.content)

    @viewer_display(description="Candidates and decisions")
    def candidates_shown(self, obj, user):
        if obj.erasure_id is not None:
            return "— (erased)"
        replay = _replayed(obj)
        if replay is None or not replay.result.decisions:
            return "—"
        fused = _logged_fused(obj, replay)
        # The citations are the content's; the pages they link are the revisions' and the entry versions'.
        may_open_revisions, may_open_versions = may_view(user, ArtifactRevision), may_view(user, MemoryEntryVersion)
        columns = _DECISION_COLUMNS if fused is None else (*_DECISION_COLUMNS, "lexical / dense / cosine / score")
        rows = []
        for position, decision in enumerate(replay.result.decisions, start=1):
            citation = decision.citation
            revision_pk = replay.candidates.revision_pks.get(citation) if may_open_revisions else None
            version_pk = replay.candidates.entry_version_pks.get(citation) if may_open_versions else None
            revision_url = (
                reverse("admin:artifacts_artifactrevision_change", args=[revision_pk]) if revision_pk else None
            )
            version_url = (
                entry_version_pk_admin_url(version_pk, cited_revision=citation.revision) if version_pk else None
            )
            entry = (
                f"{json_literal(citation.entry_id)} @ {json_literal(citation.entry_version)}"
                if citation.has_entry
                else "—"
            )
            rows.append(
                (
                    position,
                    citation.family,
                    decision.outcome,
                    format_html('<abbr title="{}">{}</abbr>', REASON_HELP.get(decision.reason, ""), decision.reason)
                    if decision.reason
                    else "—",
                    format_html('<abbr title="{}">{}</abbr>', NOTE_HELP.get(decision.note, ""), decision.note)
                    if decision.note
                    else "—",
                    decision.recall_rank or "—",
                    decision.bytes if decision.bytes is not None else "—",
                    json_literal(citation.scope_id),
                    json_literal(citation.artifact_id),
                    _link(revision_url, f"revision {citation.revision}"),
                    _link(version_url, entry) if citation.has_entry else entry,
                    json_literal(decision.authority) if decision.authority is not None else "—",
                    json_literal(decision.conflict_slot) if decision.conflict_slot is not None else "—",
                    f"{decision.score:.4f}" if decision.score is not None else "—",
                    winner_text(decision.winner) if decision.winner is not None else "—",
                    *(() if fused is None else (fused_text(fused.get(citation)),)),
                )
            )
        body = format_html_join("", "<tr>" + "<td>{}</td>" * len(columns) + "</tr>", rows)
        head = mark_safe("".join(f"<th>{name}</th>" for name in columns))  # fixed column names
        return format_html(
            '<table class="powercontext-decisions"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
            head,
            body,
        )

    @viewer_display(description="Inspector")
    def inspector_link(self, obj, user):
        url = inspector_url(obj, user)
        return _link(url, "Open in the prepare inspector with this request") if url else "—"
