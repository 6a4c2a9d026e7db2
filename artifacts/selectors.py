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
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    ContextReference,
    Family,
    MemoryEntryVersion,
    ProfileCandidate,
    Scope,
)
from vocabulary.citation import Candidate, Citation
from vocabulary.errors import NotFound
from vocabulary.families import POOL_CAP, PROFILE_ARTIFACT_ID

TOPIC_MATCH_SNIPPET_CHARACTERS = 240


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
        MemoryEntryVersion.objects.filter(
            _live_at(revision), artifact=artifact, entry_id=entry_id, version_id=version_id
        )
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


# Ranking with pruning (exact): above PRUNE_MIN_POSTINGS postings for a query's terms, the documents holding
# one of the rarest terms are scored in full first; when the remaining, more common terms cannot lift any
# other document up to the k-th score found, that is the exact top k. Scoring a candidate reads all of its
# postings (about the average document length), so candidates are used only while that costs well under
# reading every posting of the query's terms.
PRUNE_MIN_POSTINGS = 20_000
ESSENTIAL_POSTINGS = 4_000
_POSTING = "artifacts_recallposting"


def _score_sql(term_count: int) -> str:
    # Double precision on both engines, evaluated in the same order: the same IEEE arithmetic everywhere
    # (PostgreSQL would otherwise read the float parameters as numeric, which is exact but many times slower).
    real = "%s::float8" if connection.vendor == "postgresql" else "%s"
    weights = " ".join(f"WHEN %s THEN {real}" for _ in range(term_count))
    contribution = f"(CASE term {weights} END) * term_frequency / (term_frequency + {real} + {real} * document_length)"
    # Whole micro-units: exact, order-independent sums, so ties break on the document id alone.
    if connection.vendor == "postgresql":
        return f"SUM(FLOOR({real} * {contribution}))"
    return f"SUM(CAST({real} * {contribution} AS INTEGER))"


def _marks(values: Sequence) -> str:
    return ", ".join(["%s"] * len(values))


def _fetch(sql: str, params: Sequence) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass(frozen=True)
class _Bm25Query:
    """One scope's query: BM25 weight and document frequency per present term, length normalization."""

    weights: dict[str, float]
    frequencies: dict[str, int]
    length_constant: float
    length_factor: float
    average_length: float

    def score_sql_and_params(self) -> tuple[str, list]:
        present = sorted(self.weights)
        params: list = [float(search.SCORE_SCALE)]
        for term in present:
            params += [term, self.weights[term]]
        return _score_sql(len(present)), [*params, self.length_constant, self.length_factor]

    def bound(self, term: str) -> int:
        """More than any document's contribution for the term (each is below SCALE × weight)."""
        return int(search.SCORE_SCALE * self.weights[term]) + 1


def _bm25_queries(*, scope_pks: Sequence[int], family: str, terms: list[str]) -> dict[int, _Bm25Query]:
    """Per scope with live documents of the family and at least one query term, its BM25 query."""
    corpus = {
        scope_pk: (documents, total_length)
        for scope_pk, documents, total_length in _fetch(
            "SELECT scope_id, documents, total_length FROM artifacts_recallcorpusstat "
            f"WHERE family = %s AND scope_id IN ({_marks(scope_pks)}) AND documents > 0",
            [family, *scope_pks],
        )
    }
    if not corpus:
        return {}
    frequencies: dict[int, dict[str, int]] = {}
    for scope_pk, term, documents in _fetch(
        "SELECT scope_id, term, documents FROM artifacts_recalltermstat "
        f"WHERE family = %s AND scope_id IN ({_marks(list(corpus))}) AND term IN ({_marks(terms)}) AND documents > 0",
        [family, *corpus, *terms],
    ):
        frequencies.setdefault(scope_pk, {})[term] = documents
    k1, b = search.BM25_K1, search.BM25_B
    queries = {}
    for scope_pk, present in frequencies.items():
        documents, total_length = corpus[scope_pk]
        average_length = total_length / documents or 1.0
        queries[scope_pk] = _Bm25Query(
            weights={term: search.idf(documents, df) * (k1 + 1) for term, df in present.items()},
            frequencies=present,
            length_constant=k1 * (1 - b),
            length_factor=k1 * b / average_length,
            average_length=average_length,
        )
    return queries


def _ranked_all(query: _Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[tuple[int, int]]:
    score, params = query.score_sql_and_params()
    terms = sorted(query.weights)
    return _fetch(
        f"SELECT document_id, {score} AS score FROM {_POSTING} "
        f"WHERE scope_id = %s AND family = %s AND term IN ({_marks(terms)}) "
        "GROUP BY document_id ORDER BY score DESC, document_id ASC LIMIT %s",
        [*params, scope_pk, family, *terms, limit],
    )


def _ranked_candidates(
    query: _Bm25Query, essential: list[str], *, scope_pk: int, family: str, limit: int
) -> list[tuple[int, int]]:
    """The top documents among those holding an essential term, scored over every query term."""
    score, params = query.score_sql_and_params()
    terms = sorted(query.weights)
    return _fetch(
        f"SELECT document_id, {score} AS score FROM {_POSTING} "
        f"WHERE document_id IN (SELECT document_id FROM {_POSTING} WHERE scope_id = %s AND family = %s "
        f"AND term IN ({_marks(essential)})) AND term IN ({_marks(terms)}) "
        "GROUP BY document_id ORDER BY score DESC, document_id ASC LIMIT %s",
        [*params, scope_pk, family, *essential, *terms, limit],
    )


def _ranked(query: _Bm25Query, *, scope_pk: int, family: str, limit: int) -> list[int]:
    """Document ids by (score desc, id): exactly the full BM25 ranking's first ``limit``."""
    ordered = sorted(query.frequencies, key=lambda term: (query.frequencies[term], term))
    total = sum(query.frequencies.values())
    # Candidates cost about their postings times the average document length; a full ranking costs ``total``.
    affordable = min(ESSENTIAL_POSTINGS, total / (4 * max(1.0, query.average_length)))
    essential_count, volume = 0, 0
    for term in ordered:
        if volume + query.frequencies[term] > affordable:
            break
        essential_count += 1
        volume += query.frequencies[term]
    if total > PRUNE_MIN_POSTINGS and 0 < essential_count < len(ordered):
        for _ in range(2):
            rows = _ranked_candidates(query, ordered[:essential_count], scope_pk=scope_pk, family=family, limit=limit)
            if len(rows) < limit:
                break  # too few candidates to prove anything: rank everything
            # A document without an essential term scores at most the sum of the other terms' bounds; the
            # most common terms whose bounds stay below the k-th candidate's score need not be essential.
            threshold, outside, needed = rows[-1][1], 0, len(ordered)
            while needed > essential_count and outside + query.bound(ordered[needed - 1]) < threshold:
                outside += query.bound(ordered[needed - 1])
                needed -= 1
            if needed == essential_count:
                return [document for document, _ in rows]
            if sum(query.frequencies[term] for term in ordered[:needed]) > 2 * affordable:
                break  # the candidates would cost about as much as ranking everything
            essential_count = needed
    return [document for document, _ in _ranked_all(query, scope_pk=scope_pk, family=family, limit=limit)]


def _bm25_top_documents_by_scope(
    *, scope_pks: Sequence[int], family: str, query: str, limit: int
) -> dict[int, list[int]]:
    """Per scope, the ids of its top ``limit`` live documents of the family for the query (maybe none)."""
    terms = search.query_terms(query)
    queries = _bm25_queries(scope_pks=scope_pks, family=family, terms=terms) if terms and scope_pks else {}
    return {
        scope_pk: _ranked(queries[scope_pk], scope_pk=scope_pk, family=family, limit=limit)
        if scope_pk in queries
        else []
        for scope_pk in scope_pks
    }


def _bm25_top_documents(*, scope_pk: int, family: str, query: str, limit: int) -> list[int]:
    return _bm25_top_documents_by_scope(scope_pks=[scope_pk], family=family, query=query, limit=limit)[scope_pk]


def _memory_rows(document_ids: list[int]) -> dict[int, tuple]:
    if not document_ids:
        return {}
    # One statement reads version, liveness and head together: a consistent citation even while
    # writers retire versions between the search and this read.
    rows = _fetch(
        "SELECT d.id, a.artifact_id, a.head_revision, v.entry_id, v.version_id, v.body "
        "FROM artifacts_recalldocument d JOIN artifacts_artifact a ON a.id = d.artifact_id "
        "JOIN artifacts_memoryentryversion v ON v.id = d.entry_version_id "
        f"WHERE d.id IN ({_marks(document_ids)}) AND v.retired_in_revision IS NULL",
        document_ids,
    )
    return {row[0]: row for row in rows}


def _memory_hits(scope: Scope, document_ids: list[int], rows: dict[int, tuple] | None = None) -> list[Candidate]:
    rows = _memory_rows(document_ids) if rows is None else rows
    return [
        Candidate(
            Citation(scope.scope_id, Family.MEMORY, row[1], row[2], entry_id=row[3], entry_version=row[4]), row[5]
        )
        for row in (rows.get(i) for i in document_ids)
        if row is not None
    ]


def recall_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 16 live memory entries ranked by BM25."""
    ids = _bm25_top_documents_by_scope(
        scope_pks=[scope.pk for scope in scopes], family=Family.MEMORY, query=query, limit=POOL_CAP[Family.MEMORY]
    )
    rows = _memory_rows([document for documents in ids.values() for document in documents])
    return [_memory_hits(scope, ids[scope.pk], rows) for scope in scopes]


def _revision_documents(document_ids: list[int]) -> list[tuple]:
    if not document_ids:
        return []
    rows = _fetch(
        "SELECT d.id, a.artifact_id, r.revision, r.body, r.title, r.summary "
        "FROM artifacts_recalldocument d JOIN artifacts_artifact a ON a.id = d.artifact_id "
        f"JOIN artifacts_artifactrevision r ON r.id = d.revision_id WHERE d.id IN ({_marks(document_ids)})",
        document_ids,
    )
    by_id = {row[0]: row for row in rows}
    return [by_id[i] for i in document_ids if i in by_id]


def recall_experience(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), up to 8 experience heads ranked by BM25."""
    ids = _bm25_top_documents_by_scope(
        scope_pks=[scope.pk for scope in scopes],
        family=Family.EXPERIENCE,
        query=query,
        limit=POOL_CAP[Family.EXPERIENCE],
    )
    rows = {row[0]: row for row in _revision_documents([d for documents in ids.values() for d in documents])}
    return [
        [
            Candidate(Citation(scope.scope_id, Family.EXPERIENCE, a, r), body)
            for _, a, r, body, _, _ in (rows[i] for i in ids[scope.pk] if i in rows)
        ]
        for scope in scopes
    ]


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


def recall_topic_memory(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Up to 8 topic memories of the current scope (the first given) ranked by BM25."""
    scope = scopes[0]
    ids = _bm25_top_documents(
        scope_pk=scope.pk, family=Family.TOPIC_MEMORY, query=query, limit=POOL_CAP[Family.TOPIC_MEMORY]
    )
    return [
        [
            Candidate(
                Citation(scope.scope_id, Family.TOPIC_MEMORY, a, r),
                topic_memory_projection(title=title or "", summary=summary or "", detail=body, query=query),
            )
            for _, a, r, body, title, summary in _revision_documents(ids)
        ]
    ]


def recall_profile(*, scopes: Sequence[Scope], query: str) -> list[list[Candidate]]:
    """Per scope (in the given order), the latest committed ``profile/profile`` snapshot, if any.

    Independent of the query; pending and rejected candidates are not revisions, so they never
    appear, and a pending replacement leaves the committed head in place.
    """
    heads = ArtifactRevision.objects.filter(
        artifact__scope__in=scopes,
        artifact__family=Family.PROFILE,
        artifact__artifact_id=PROFILE_ARTIFACT_ID,
        revision=F("artifact__head_revision"),
    ).values_list("artifact__scope_id", "revision", "body")
    by_scope = {scope_pk: (revision, body) for scope_pk, revision, body in heads}
    return [
        [
            Candidate(
                Citation(scope.scope_id, Family.PROFILE, PROFILE_ARTIFACT_ID, by_scope[scope.pk][0]),
                by_scope[scope.pk][1],
            )
        ]
        if scope.pk in by_scope
        else []
        for scope in scopes
    ]


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


# --- operator admin tools: citation resolver and prepare inspector --------------------------------


def scope_list_all() -> list[Scope]:
    """Every scope, in scope-id order (the prepare inspector's scope choices)."""
    return list(Scope.objects.order_by("scope_id"))


def memory_entry_version_find(*, artifact: Artifact, version_id: str) -> MemoryEntryVersion | None:
    """The entry version with this id in a memory artifact, live or retired, or None.

    Only for explaining why a citation does not resolve; an exact read uses
    ``memory_entry_version_get_at``.
    """
    return MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).first()
