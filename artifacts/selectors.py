"""All reads: scopes, grants, exact revisions, history and recall (lexical search over live heads).

Recall is BM25 over an inverted index kept by ``artifacts.services`` at write time (one row per
live document and term). Scores are computed by the database from per-term weights that Python
derives from the index statistics, summed as whole micro-units, and ordered by (score desc,
document id): the same arithmetic on SQLite and PostgreSQL, so both return the same ranking.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import F, Q

from artifacts import search
from artifacts.exceptions import NotFound
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    ContextReference,
    Family,
    MemoryEntryVersion,
    ProfileCandidate,
    RecallCorpusStat,
    RecallDocument,
    RecallTermStat,
    Scope,
)

MEMORY_POOL_PER_SCOPE = 16
EXPERIENCE_POOL_PER_SCOPE = 8
TOPIC_MEMORY_POOL = 8
TOPIC_MATCH_SNIPPET_CHARACTERS = 240


@dataclass(frozen=True)
class RecallHit:
    """One recalled item with its exact citation and the body prepare may show."""

    scope_id: str
    family: str
    artifact_id: str
    revision: int
    body: str | None
    entry_id: str | None = None
    entry_version: str | None = None


# --- scopes and keys --------------------------------------------------------------------------


def scope_get(*, scope_id: str) -> Scope:
    """The scope with this public id, or NotFound."""
    try:
        return Scope.objects.get(scope_id=scope_id)
    except Scope.DoesNotExist as exc:
        raise NotFound("scope not found") from exc


def scope_references_list(*, scope: Scope) -> list[Scope]:
    """The scope's direct references in their configured order (no transitive closure)."""
    references = ContextReference.objects.filter(scope=scope).select_related("target").order_by("position")
    return [reference.target for reference in references]


def api_key_get_active(*, key_sha256: str) -> ApiKey | None:
    """The unrevoked key with this hash, or None."""
    return ApiKey.objects.filter(key_sha256=key_sha256, revoked_at__isnull=True).first()


def api_key_grants_map(*, api_key_id: int) -> dict[int, tuple[bool, bool]]:
    """Scope primary key → (may read, may write) for one key."""
    return {
        scope_pk: (can_read, can_write)
        for scope_pk, can_read, can_write in ApiKeyGrant.objects.filter(api_key_id=api_key_id).values_list(
            "scope_id", "can_read", "can_write"
        )
    }


# --- exact reads ------------------------------------------------------------------------------


def artifact_get(*, scope: Scope, family: str, artifact_id: str) -> Artifact:
    """The artifact with this identity in the scope, or NotFound."""
    try:
        return Artifact.objects.select_related("scope").get(scope=scope, family=family, artifact_id=artifact_id)
    except Artifact.DoesNotExist as exc:
        raise NotFound("artifact not found") from exc


def artifact_revision_get(*, artifact: Artifact, revision: int) -> ArtifactRevision:
    """That exact revision, never the head instead, or NotFound."""
    try:
        return ArtifactRevision.objects.select_related("artifact__scope").get(artifact=artifact, revision=revision)
    except ArtifactRevision.DoesNotExist as exc:
        raise NotFound("revision not found") from exc


def _live_at(revision: int) -> Q:
    return Q(born_in_revision__lte=revision) & (
        Q(retired_in_revision__isnull=True) | Q(retired_in_revision__gt=revision)
    )


def memory_entries_live_at(*, artifact: Artifact, revision: int) -> list[MemoryEntryVersion]:
    """The entry versions live in that revision, ordered by entry id."""
    return list(
        MemoryEntryVersion.objects.filter(_live_at(revision), artifact=artifact).order_by("entry_id", "version_id")
    )


def memory_entry_version_get_at(
    *, artifact: Artifact, revision: int, entry_id: str, version_id: str
) -> MemoryEntryVersion:
    """That entry version if it was live in that revision, else NotFound."""
    version = (
        MemoryEntryVersion.objects.filter(_live_at(revision), artifact=artifact, entry_id=entry_id, version_id=version_id)
        .select_related("artifact__scope")
        .first()
    )
    if version is None:
        raise NotFound("entry version not live at that revision")
    return version


def memory_entry_versions_changed_in(*, artifact: Artifact, revision: int) -> tuple[list, list]:
    """(versions born in, versions retired in) that revision: what the revision changed."""
    added = list(MemoryEntryVersion.objects.filter(artifact=artifact, born_in_revision=revision).order_by("entry_id"))
    retired = list(
        MemoryEntryVersion.objects.filter(artifact=artifact, retired_in_revision=revision).order_by("entry_id")
    )
    return added, retired


# --- recall -----------------------------------------------------------------------------------


def _score_sql(term_count: int) -> str:
    weights = " ".join("WHEN %s THEN %s" for _ in range(term_count))
    contribution = (
        f"(CASE term {weights} END) * term_frequency / (term_frequency + %s + %s * document_length)"
    )
    # Whole micro-units: exact, order-independent sums, so ties break on the document id alone.
    if connection.vendor == "postgresql":
        return f"SUM(FLOOR(%s * {contribution}))"
    return f"SUM(CAST(%s * {contribution} AS INTEGER))"


def _bm25_top_documents(*, scope_pk: int, family: str, query: str, limit: int) -> list[int]:
    terms = search.query_terms(query)
    if not terms:
        return []
    corpus = RecallCorpusStat.objects.filter(scope_id=scope_pk, family=family).first()
    if corpus is None or corpus.documents == 0:
        return []
    frequencies = dict(
        RecallTermStat.objects.filter(scope_id=scope_pk, family=family, term__in=terms, documents__gt=0).values_list(
            "term", "documents"
        )
    )
    present = sorted(frequencies)
    if not present:
        return []
    average_length = corpus.total_length / corpus.documents or 1.0
    k1, b = search.BM25_K1, search.BM25_B
    weight_params: list = []
    for term in present:
        weight_params += [term, search.idf(corpus.documents, frequencies[term]) * (k1 + 1)]
    placeholders = ", ".join(["%s"] * len(present))
    sql = (
        f"SELECT document_id, {_score_sql(len(present))} AS score FROM artifacts_recallposting "
        f"WHERE scope_id = %s AND family = %s AND term IN ({placeholders}) "
        "GROUP BY document_id ORDER BY score DESC, document_id ASC LIMIT %s"
    )
    params = [
        float(search.SCORE_SCALE),
        *weight_params,
        k1 * (1 - b),
        k1 * b / average_length,
        scope_pk,
        family,
        *present,
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def _memory_hits(scope: Scope, document_ids: list[int]) -> list[RecallHit]:
    # One statement reads version, liveness and head together: a consistent citation even while
    # writers retire versions between the search and this read.
    rows = RecallDocument.objects.filter(
        pk__in=document_ids, entry_version__retired_in_revision__isnull=True
    ).values_list(
        "pk",
        "artifact__artifact_id",
        "artifact__head_revision",
        "entry_version__entry_id",
        "entry_version__version_id",
        "entry_version__body",
    )
    by_id = {row[0]: row for row in rows}
    return [
        RecallHit(
            scope_id=scope.scope_id,
            family=Family.MEMORY,
            artifact_id=row[1],
            revision=row[2],
            entry_id=row[3],
            entry_version=row[4],
            body=row[5],
        )
        for row in (by_id.get(i) for i in document_ids)
        if row is not None
    ]


def recall_memory(*, scopes: Sequence[Scope], query: str) -> list[list[RecallHit]]:
    """Per scope (in the given order), up to 16 live memory entries ranked by BM25."""
    return [
        _memory_hits(
            scope,
            _bm25_top_documents(scope_pk=scope.pk, family=Family.MEMORY, query=query, limit=MEMORY_POOL_PER_SCOPE),
        )
        for scope in scopes
    ]


def _revision_documents(document_ids: list[int]) -> list[tuple]:
    rows = RecallDocument.objects.filter(pk__in=document_ids, revision__isnull=False).values_list(
        "pk",
        "artifact__artifact_id",
        "revision__revision",
        "revision__body",
        "revision__title",
        "revision__summary",
    )
    by_id = {row[0]: row for row in rows}
    return [by_id[i] for i in document_ids if i in by_id]


def recall_experience(*, scopes: Sequence[Scope], query: str) -> list[list[RecallHit]]:
    """Per scope (in the given order), up to 8 experience heads ranked by BM25."""
    result = []
    for scope in scopes:
        ids = _bm25_top_documents(
            scope_pk=scope.pk, family=Family.EXPERIENCE, query=query, limit=EXPERIENCE_POOL_PER_SCOPE
        )
        result.append(
            [
                RecallHit(scope_id=scope.scope_id, family=Family.EXPERIENCE, artifact_id=a, revision=r, body=body)
                for _, a, r, body, _, _ in _revision_documents(ids)
            ]
        )
    return result


def topic_match_snippet(*, detail: str | None, query: str) -> str | None:
    """The first line of the detail body that shares a term with the query, or None."""
    if not detail:
        return None
    wanted = set(search.query_terms(query))
    for line in detail.splitlines():
        if wanted.intersection(search.tokenize(line)):
            line = line.strip()
            if len(line) > TOPIC_MATCH_SNIPPET_CHARACTERS:
                line = line[: TOPIC_MATCH_SNIPPET_CHARACTERS - 1] + "…"
            return line
    return None


def topic_memory_projection(*, title: str, summary: str, detail: str | None, query: str) -> str:
    """The body prepare shows for a topic memory: Title, Summary and an optional Match line."""
    body = f"Title: {title}\nSummary: {summary}"
    snippet = topic_match_snippet(detail=detail, query=query)
    return body if snippet is None else f"{body}\nMatch: {snippet}"


def recall_topic_memory(*, scopes: Sequence[Scope], query: str) -> list[list[RecallHit]]:
    """Up to 8 topic memories of the current scope (the first given) ranked by BM25."""
    scope = scopes[0]
    ids = _bm25_top_documents(scope_pk=scope.pk, family=Family.TOPIC_MEMORY, query=query, limit=TOPIC_MEMORY_POOL)
    return [
        [
            RecallHit(
                scope_id=scope.scope_id,
                family=Family.TOPIC_MEMORY,
                artifact_id=a,
                revision=r,
                body=topic_memory_projection(title=title or "", summary=summary or "", detail=body, query=query),
            )
            for _, a, r, body, title, summary in _revision_documents(ids)
        ]
    ]


def recall_profile(*, scopes: Sequence[Scope], query: str) -> list[list[RecallHit]]:
    """Per scope, the latest committed profile snapshot(s), independent of the query."""
    heads = (
        ArtifactRevision.objects.filter(
            artifact__scope__in=scopes, artifact__family=Family.PROFILE, revision=F("artifact__head_revision")
        )
        .order_by("artifact__artifact_id")
        .values_list("artifact__scope_id", "artifact__artifact_id", "revision", "body")
    )
    by_scope: dict[int, list[RecallHit]] = {}
    scope_ids = {scope.pk: scope.scope_id for scope in scopes}
    for scope_pk, artifact_id, revision, body in heads:
        by_scope.setdefault(scope_pk, []).append(
            RecallHit(
                scope_id=scope_ids[scope_pk], family=Family.PROFILE, artifact_id=artifact_id, revision=revision, body=body
            )
        )
    return [by_scope.get(scope.pk, []) for scope in scopes]


# --- fixtures and commands: reads of stored state to compare against ----------------------------


def scope_get_many(*, scope_ids) -> dict[str, Scope]:
    """The stored scopes among ``scope_ids``, keyed by public id (absent ids are simply missing)."""
    return {scope.scope_id: scope for scope in Scope.objects.filter(scope_id__in=list(scope_ids))}


def api_key_find_by_name(*, name: str) -> ApiKey | None:
    """The key with this name, revoked or not, or None."""
    return ApiKey.objects.filter(name=name).first()


def api_key_find_by_sha256(*, key_sha256: str) -> ApiKey | None:
    """The key with this hash, revoked or not, or None."""
    return ApiKey.objects.filter(key_sha256=key_sha256).first()


def api_key_grant_list(*, api_key: ApiKey) -> list[ApiKeyGrant]:
    """Every grant of one key, with its scope, in scope-id order."""
    return list(ApiKeyGrant.objects.filter(api_key=api_key).select_related("scope").order_by("scope__scope_id"))


def artifact_revision_list_all(*, artifact: Artifact) -> list[ArtifactRevision]:
    """Every stored revision of an artifact, oldest first (revision 1, 2, …)."""
    return list(ArtifactRevision.objects.filter(artifact=artifact).order_by("revision"))


def memory_entry_version_list_all(*, artifact: Artifact) -> list[MemoryEntryVersion]:
    """Every entry version a memory artifact ever had, live or retired, in order of birth."""
    return list(MemoryEntryVersion.objects.filter(artifact=artifact).order_by("born_in_revision", "entry_id", "id"))


def profile_candidate_list_all(*, artifact: Artifact) -> list:
    """Every candidate proposed for a profile artifact (any status), oldest first."""
    return list(artifact.candidates.order_by("created_at", "id"))


def profile_candidate_get(*, candidate_id: int) -> ProfileCandidate:
    """One profile candidate with its artifact and scope, or NotFound."""
    try:
        return ProfileCandidate.objects.select_related("artifact__scope").get(pk=candidate_id)
    except ProfileCandidate.DoesNotExist as exc:
        raise NotFound("candidate not found") from exc


def artifact_history_page(
    *, artifact: Artifact, before: int | None, limit: int
) -> tuple[list[ArtifactRevision], int | None]:
    """Up to ``limit`` revisions older than ``before`` (all when None), newest first, and the next cursor."""
    revisions = ArtifactRevision.objects.filter(artifact=artifact).select_related("artifact__scope")
    if before is not None:
        revisions = revisions.filter(revision__lt=before)
    page = list(revisions.order_by("-revision")[: limit + 1])
    next_before = page[limit - 1].revision if len(page) > limit else None
    return page[:limit], next_before
