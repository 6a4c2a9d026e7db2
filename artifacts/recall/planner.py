"""The planner: per (family, scope) pair, which ranker ranks it; then every pair's documents read in one statement.

It is the top of the recall package, below only the sources (``sources``): rankers (``base``'s contract) never call
it or each other. Per pair, in this order of preference: the search engine for a large scope (``engine``, its
candidates rescored exactly inside the read, proven by ``engine.settled``, else ranked again by SQL); this process's
copy of a small pair's postings (``resident``); the exact SQL ranking (``ranking``), pruned for a large query, else
run inside the read. A prepare over small scopes is mostly plumbing: per family and scope a ranking, per family a
read of the ranked documents; here every pair is a "branch" of one statement. On PostgreSQL the branches ranked by
SQL are one relation of weights (``ranking.ranked_by_weights_sql``); on SQLite each is a part of its own that keeps
its first ``limit`` (``bm25.ranked_all_sql``, see ``_planned``). The kept documents are joined to their citation and
body. A pair ranked apart (pruned SQL, or from memory) joins the same statement with its ranked rows as a relation of
literals; a pair ranked by the search index joins it as the exact rescoring of the engine's candidates and of the
documents the index does not hold yet (``engine.rescoring_by_index``), kept to its first ``limit`` there
(``base.top_of_parts_sql``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from artifacts.recall import bm25, engine, ranking, resident, sql, tokenize
from artifacts.recall.base import Pair, Rescored, ranking_order, top_of_parts_sql
from artifacts.recall.documents import DocumentRow, RankedDocument
from artifacts.recall.tables import CORPUS_TABLE

if TYPE_CHECKING:
    from artifacts.recall.engine.query import Rescoring


_RANKED_APART_COLUMNS = (("document_id", "bigint"),)
_CONFIRMED_COLUMNS = (("scope_id", "bigint"),)


_READ = (
    # A memory entry is cited at its artifact's head; the version's liveness and the head are read in the
    # same statement, so a citation is consistent even while writers retire versions.
    "SELECT k.branch, k.document_id, k.score, a.artifact_id, "
    "CASE WHEN d.entry_version_id IS NULL THEN r.revision ELSE a.head_revision END, "
    "v.entry_id, v.version_id, COALESCE(v.body, r.body), r.title, r.summary, "
    # What the selection policy ranks by: when the cited entry version (else revision) was written, and its slot.
    "COALESCE(v.created_at, r.created_at), v.conflict_key, d.length "
    "FROM ({ranked}) AS k JOIN artifacts_recalldocument d ON d.id = k.document_id "
    "JOIN artifacts_artifact a ON a.id = d.artifact_id "
    "LEFT JOIN artifacts_memoryentryversion v ON v.id = d.entry_version_id "
    "LEFT JOIN artifacts_artifactrevision r ON r.id = d.revision_id "
    "WHERE d.entry_version_id IS NULL OR v.retired_in_revision IS NULL"
)


SQLITE_PARAMETERS_MAX = 30_000
"""Bound parameters per statement on SQLite (builds limit them to 32,766 or 250,000): a scope with hundreds of
references and a long query ranks in a few statements instead of failing. PostgreSQL binds one array per
column, so its one statement holds any number of branches."""
_FIXED_PARAMETERS = 3
"""Parameters of a statement whatever its branches: the score scale, the length constant, the ranked rows."""
SQLITE_RESCORED_PARTS_MAX = 400
"""Rescoring parts per statement on SQLite, which allows 500 terms in one compound SELECT."""


class _Statement(NamedTuple):
    weights: list[tuple]
    pruned: list[tuple]
    rescored: list[Rescored]


def _statements(weights: list[tuple], pruned: list[tuple], rescored: list[Rescored]) -> list[_Statement]:
    """The weight, ranked and rescoring rows in statements: one on PostgreSQL; on SQLite (no weight rows there) the
    rescoring parts split by branch, each statement within SQLite's budgets.

    Ranked rows are one parameter however many (``sql.literal_relation``): they all join the first statement.
    """
    if sql.postgresql() or not rescored:
        return [_Statement(weights, pruned, rescored)]
    per_branch: dict[int, list[Rescored]] = {}
    for part in rescored:
        per_branch.setdefault(part[0], []).append(part)
    statements: list[_Statement] = [_Statement([], pruned, [])]
    cost, parts = _FIXED_PARAMETERS, 0
    for branch in per_branch.values():
        branch_cost = sum(len(part_params) for _, _, (_, part_params) in branch)
        if cost + branch_cost > SQLITE_PARAMETERS_MAX or parts + len(branch) > SQLITE_RESCORED_PARTS_MAX:
            statements.append(_Statement([], [], []))
            cost, parts = _FIXED_PARAMETERS, 0
        statements[-1].rescored.extend(branch)
        cost += branch_cost
        parts += len(branch)
    return statements


def _fetch_ranked_and_read(statement: _Statement, *, confirming: Sequence[Pair] = ()) -> list[tuple]:
    """``(branch, document id, score, DocumentRow fields…)`` of the kept documents of these branches, in one
    statement; with ``confirming``, also a ``(CONFIRMING_BRANCH, scope, generation, family, documents, …)`` row per
    corpus row of their scopes, read in the same snapshot."""
    parts, params = [], []
    if statement.weights:
        ranked_sql, ranked_params = ranking.ranked_by_weights_sql(statement.weights)
        parts.append(ranked_sql)
        params += ranked_params
    # Rows ranked apart need only their documents read: their branch and score are known here (a document belongs
    # to one family and scope, so to one branch).
    ranked_apart = {document: (branch, score) for branch, document, score in statement.pruned}
    if ranked_apart:
        relation, relation_params = sql.literal_relation(
            "pruned", _RANKED_APART_COLUMNS, [(document,) for document in ranked_apart]
        )
        parts.append(
            f"SELECT CAST(NULL AS bigint) AS branch, document_id, CAST(NULL AS bigint) AS score FROM {relation}"
        )
        params += relation_params
    if statement.rescored:
        rescored_sql, rescored_params = top_of_parts_sql(statement.rescored)
        parts.append(rescored_sql)
        params += rescored_params
    statements = [_READ.format(ranked=" UNION ALL ".join(parts))] if parts else []
    if confirming:
        # Every family's row of these scopes (a few each): one parameter, estimated alike in PostgreSQL's generic and
        # custom plans (``sql.literal_relation``), so the statement is planned once.
        scopes, scope_params = sql.literal_relation(
            "confirmed", _CONFIRMED_COLUMNS, [(pk,) for pk in dict.fromkeys(pk for _, pk in confirming)]
        )
        if sql.postgresql():
            # Each scope's rows by the (scope, family) index whatever the planner guesses: alone in its statement (no
            # document left to read), a join of the scopes' relation scanned every corpus row, 1.3 ms among 10,000
            # tenants (benchmarks.md part 10).
            corpus = (
                f"{scopes} CROSS JOIN LATERAL (SELECT scope_id, generation, family, documents FROM "
                f"{CORPUS_TABLE} WHERE scope_id = confirmed.scope_id OFFSET 0) AS c"
            )
        else:
            corpus = f"{scopes} JOIN {CORPUS_TABLE} c ON c.scope_id = confirmed.scope_id"
        statements.append(
            f"SELECT {CONFIRMING_BRANCH}, c.scope_id, c.generation, c.family, c.documents, NULL, NULL, NULL, NULL, "
            f"NULL, NULL, NULL, NULL FROM {corpus}"
        )
        params += scope_params
    if not statements:
        return []
    rows = sql.fetch(" UNION ALL ".join(statements), params)
    return [row if row[0] is not None else _with_branch_and_score(row, *ranked_apart[row[1]]) for row in rows]


CONFIRMING_BRANCH = -1
"""The branch of a corpus row read to confirm a copy's generation (``_ranked_from_copies``)."""


def _with_branch_and_score(row: tuple, branch: int, score: int) -> tuple:
    return (branch, row[1], score, *row[3:])


class Bm25Ranking(NamedTuple):
    """What ranking pairs by BM25 read: the documents, and what hybrid recall weighs them against."""

    documents: dict[str, dict[int, list[RankedDocument]]]
    """Per family and scope, its top documents by (score desc, document id); every pair asked for, maybe empty."""
    statistics: dict[Pair, bm25.Bm25Query]
    """Each ranked pair's BM25 query (the query's lexical bound, and the generation it was read at)."""
    generations: dict[Pair, int]
    """The generation of every pair with live documents, read in the same statements (a pair absent has none), unless
    the query has no term (nothing is read)."""


def bm25_ranked_documents(
    *,
    scope_pks_by_family: Mapping[str, Sequence[int]],
    query: str,
    limits: Mapping[str, int],
) -> Bm25Ranking:
    """Per family and scope, its top ``limits[family]`` live documents by (score desc, document id).

    Statistics take one statement for all families; rankings and reads one more (on SQLite one more per
    ``SQLITE_PARAMETERS_MAX`` bound values), plus the pruning statements of any large scope and, with the search
    index, one for the unindexed tails of the scopes it answers and one more when the engine's candidates do not
    prove a scope's ranking (it is then ranked by SQL). Every family and scope asked for has an entry, maybe
    empty.
    """
    result: dict[str, dict[int, list[RankedDocument]]] = {
        family: {scope_pk: [] for scope_pk in scope_pks} for family, scope_pks in scope_pks_by_family.items()
    }
    statistics: dict[Pair, bm25.Bm25Query] = {}
    generations: dict[Pair, int] = {}
    ranking = Bm25Ranking(result, statistics, generations)
    terms = tokenize.recall_terms(query)
    if not terms:
        return ranking
    pairs = [(family, scope_pk) for family, scope_pks in scope_pks_by_family.items() for scope_pk in scope_pks]
    if _ranked_from_copies(result, pairs, terms, limits, statistics, generations):
        return ranking
    queries = bm25.bm25_queries(
        scope_pks_by_family=scope_pks_by_family,
        terms=terms,
        held=resident.copies_held(scope_pks_by_family),
        stale_found=resident.copy_discard,
        empty_found=resident.empty_found,
        generations=generations,
    )
    statistics.update(queries)
    # Large scopes, when the search index is on: engine candidates, rescored exactly inside the read.
    by_index = engine.rescoring_by_index(queries, limits=limits)
    # Small scopes held in this process's memory at the generation just read: the same top k, ranked here.
    ranked_apart = resident.ranked_in_memory(queries, limits=limits, skip=by_index)
    _read_into(result, _planned([pair for pair in pairs if pair in queries], queries, limits, by_index, ranked_apart))
    # An engine ranking its candidates do not prove exact is ranked again by SQL, in one more statement.
    unproven = [
        pair
        for pair, rescoring in by_index.items()
        if not engine.settled(pair, rescoring, [d.score for d in result[pair[0]][pair[1]]], limit=limits[pair[0]])
    ]
    if unproven:
        for family, scope_pk in unproven:
            result[family][scope_pk] = []
        _read_into(result, _planned(unproven, queries, limits, {}, {}))
    return ranking


def _ranked_from_copies(
    result: dict[str, dict[int, list[RankedDocument]]],
    pairs: Sequence[Pair],
    terms: list[str],
    limits: Mapping[str, int],
    statistics: dict[Pair, bm25.Bm25Query],
    generations: dict[Pair, int],
) -> bool:
    """Every pair ranked from this process's copies and read into the ranking's ``result``, ``statistics`` and
    ``generations`` (``bm25_ranked_documents``'s own, still empty) in one statement, when each pair has a
    copy (that the engine would not rank) or was last found without live documents; False, with nothing used,
    otherwise.

    Each copy ranks from the statistics of the generation it was made at, and the statement that reads the ranked
    documents reads every pair's corpus row too, in the same snapshot: the answer stands only when each copy is at
    its pair's generation and each empty pair is still empty, so it is the answer the statistics statement would
    have led to, one statement sooner. Otherwise the copies found stale are dropped and the emptiness found wrong
    forgotten, and the caller reads the statistics.

    The statement reads only the documents whose rows their copy does not keep yet, and the rows it reads are kept
    with the copy: at the copy's generation they are what the database would return again (``documents``).
    """
    held = resident.known(pairs)
    if held is None or any(copy is not None and engine.may_answer(copy.documents) for copy in held.values()):
        return False
    first_seen = {term: position for position, term in enumerate(terms)}
    queries: dict[Pair, bm25.Bm25Query] = {}
    ranked_apart: dict[Pair, list[tuple[int, int]]] = {}
    ranking = {}  # the copies ranked apart, by pair
    for pair, copy in held.items():
        if copy is not None and copy.documents and (present := copy.frequencies(terms)):
            ranking[pair] = copy
            queries[pair] = bm25.bm25_query(
                documents=copy.documents,
                total_length=copy.total_length,
                generation=copy.generation,
                frequencies=present,
                first_seen=first_seen,
            )
            ranked_apart[pair] = resident.ranked(copy, queries[pair], limits[pair[0]])
    # Only the documents whose rows the copies do not keep yet are read.
    unread = {
        pair: [ranked for ranked in ranked_apart[pair] if ranked[0] not in ranking[pair].rows] for pair in ranked_apart
    }
    plan = _planned(list(ranked_apart), queries, limits, {}, unread)
    (statement,) = plan.statements  # every pair ranked apart: one statement whatever the engine
    rows = _fetch_ranked_and_read(statement, confirming=pairs)
    corpus = {(row[3], row[1]): (row[2], row[4]) for row in rows if row[0] == CONFIRMING_BRANCH}
    moved = False
    for pair, copy in held.items():
        generation, documents = corpus.get(pair, (None, 0))
        if copy is not None and generation != copy.generation:
            resident.copy_discard(pair)
            moved = True
        elif copy is None and documents:
            resident.empty_lost(pair)
            moved = True
    if moved:
        return False
    statistics.update(queries)
    generations.update((pair, generation) for pair, (generation, documents) in corpus.items() if documents)
    read: dict[Pair, dict[int, DocumentRow]] = {pair: {} for pair in ranked_apart}
    for branch, document, _, *fields in rows:
        if branch != CONFIRMING_BRANCH:
            read[plan.branches[branch]][document] = DocumentRow(*fields)
    for pair, ranked in ranked_apart.items():
        copy, fresh = ranking[pair], read[pair]
        if fresh:
            resident.rows_keep(pair, copy, fresh)
        documents = result[pair[0]][pair[1]]
        for document, score in ranked:  # already by (score desc, document id)
            row = copy.rows.get(document) or fresh.get(document)
            if row is not None:  # None: not live (the read's filter)
                documents.append(RankedDocument(document, score, row))
    return True


class _Plan(NamedTuple):
    branches: list[tuple[str, int]]
    """(family, scope pk) of each branch."""
    statements: list[_Statement]


def _planned(
    pairs: Sequence[tuple[str, int]],
    queries: Mapping[tuple[str, int], bm25.Bm25Query],
    limits: Mapping[str, int],
    by_index: Mapping[tuple[str, int], Rescoring],
    ranked_apart: Mapping[tuple[str, int], list[tuple[int, int]]],
) -> _Plan:
    """The statements that rank and read these pairs, each the way it is cheapest: rescored engine candidates,
    ranked in memory, pruned ranking, or its weights joined to the postings."""
    branches: list[tuple[str, int]] = []
    weights: list[tuple] = []
    pruned: list[tuple[int, int, int]] = []
    rescored: list[Rescored] = []
    for family, scope_pk in pairs:
        query = queries[(family, scope_pk)]
        branch, limit = len(branches), limits[family]
        branches.append((family, scope_pk))
        if (family, scope_pk) in by_index:
            rescored += [(branch, limit, part) for part in by_index[(family, scope_pk)].parts]
        elif (family, scope_pk) in ranked_apart:
            pruned += [(branch, document, score) for document, score in ranked_apart[(family, scope_pk)]]
        elif ranking.ranking_prunes(query):
            ranked = ranking.ranked(query, scope_pk=scope_pk, family=family, limit=limit)
            pruned += [(branch, document, score) for document, score in ranked]
        elif not sql.postgresql():
            # A part of its own: ORDER BY … LIMIT keeps a top-k sort, where one window function over every branch
            # sorted every scored document (at 10,000 entries a prepare's ranking and read took 2.3 against 5.8 ms).
            # PostgreSQL keeps the window statement: parts of their own ran faster there too (2.8 against 4.4-6.2 ms
            # for one pair), but each part's weights (an unnest of bound arrays) made its generic plan look dearer,
            # so the statement was planned again at every prepare.
            rescored.append((branch, limit, bm25.ranked_all_sql(query, scope_pk=scope_pk, family=family, limit=limit)))
        else:
            weights += ranking.weight_rows(query, branch=branch, scope_pk=scope_pk, family=family, limit=limit)
    return _Plan(branches, _statements(weights, pruned, rescored))


def documents_read(
    documents: Mapping[Pair, Sequence[int]], *, generations: Mapping[Pair, int] | None = None
) -> dict[Pair, dict[int, DocumentRow]]:
    """The rows of these live documents of each pair, in one statement (a document not live is absent).

    With ``generations`` (each pair's generation as this prepare read it), a pair this process holds a copy of at
    that generation gives the rows kept with the copy (read at that generation, so what the database would return
    again: ``_ranked_from_copies``) and keeps those read here: no statement when every row is kept."""
    copies = resident.copies_at(generations) if generations else {}
    read: dict[Pair, dict[int, DocumentRow]] = {pair: {} for pair in documents}
    unread: dict[Pair, list[int]] = {}
    for pair, wanted in documents.items():
        kept = copies[pair].rows if pair in copies else {}
        for document in wanted:
            if (row := kept.get(document)) is not None:
                read[pair][document] = row
            else:
                unread.setdefault(pair, []).append(document)
    branches = list(unread)
    pruned = [(branch, document, 0) for branch, pair in enumerate(branches) for document in unread[pair]]
    if pruned:
        fresh: dict[Pair, dict[int, DocumentRow]] = {pair: {} for pair in branches}
        for branch, document, _, *fields in _fetch_ranked_and_read(_Statement([], pruned, [])):
            fresh[branches[branch]][document] = DocumentRow(*fields)
        for pair, rows in fresh.items():
            read[pair].update(rows)
            if rows and pair in copies:
                resident.rows_keep(pair, copies[pair], rows)
    return read


def _read_into(result: dict[str, dict[int, list[RankedDocument]]], plan: _Plan) -> None:
    """Run the plan's statements; each pair's documents into ``result``, by (score desc, document id)."""
    _documents_into(
        result, plan.branches, [row for statement in plan.statements for row in _fetch_ranked_and_read(statement)]
    )


def _documents_into(
    result: dict[str, dict[int, list[RankedDocument]]], branches: Sequence[Pair], rows: Sequence[tuple]
) -> None:
    """Each ``(branch, document id, score, DocumentRow fields…)`` row's document into its pair's list in ``result``;
    each list of these branches then by (score desc, document id)."""
    for branch, document, score, *fields in rows:
        family, scope_pk = branches[branch]
        result[family][scope_pk].append(RankedDocument(document, score, DocumentRow(*fields)))
    for family, scope_pk in branches:
        result[family][scope_pk].sort(key=ranking_order)
