"""Synthetic corpora for the latency and HTTP parts, and two ways to store them.

A dataset is one current scope with ``n`` memory entries and ``n/10`` experiences, referencing three
scopes of ``n/10`` memory entries each; ``tenants`` makes the other shape, many independent scopes of
memory entries alone. Text is drawn from a fixed synthetic vocabulary with a
Zipf-Mandelbrot word distribution (p(r) ∝ 1/(r + 2.7)), the shape of natural-language word frequencies;
queries are drawn from the same distribution (3-8 words), so most contain a few very common words.

``bulk_load`` writes the rows straight into the tables (ids allocated after the current maxima, index
rows built from ``artifacts.recall.tokenize``'s tokenizer, term and corpus statistics aggregated from the
postings) so that a million entries load in minutes; ``services_load`` writes the same dataset
through ``artifacts.services`` (one memory revision per 1,000 entries, one revision per experience,
exactly as the bulk load numbers them). ``compare_stores`` checks that both produce the same index and
the same recall results.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from bench.common import log

SEED = 20261129
VOCABULARY_SIZE = 50_000
ZIPF_Q = 2.7
ZIPF_S = 1.0
ENTRIES_PER_REVISION = 1000
BULK_AUTHOR = "bench"
BULK_TIME = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
"""When every bulk row was written (``_Writer.timestamp``, as the chain hashes cover it)."""
MEMORY_WORDS = (8, 32)
EXPERIENCE_WORDS = (30, 90)
QUERY_WORDS = (3, 8)
_ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "cr",
    "dr",
    "fl",
    "gr",
    "pl",
    "st",
    "tr",
    "sh",
    "ch",
    "th",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "l", "m", "nd", "st", "rk"]


@dataclass
class Vocabulary:
    words: list[str]
    cdf: np.ndarray

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return np.searchsorted(self.cdf, rng.random(count), side="right").astype(np.int32)


def vocabulary(size: int = VOCABULARY_SIZE, seed: int = SEED) -> Vocabulary:
    """``size`` distinct pronounceable words, each exactly one index term, with Zipf-Mandelbrot weights."""
    from artifacts.recall import tokenize as search

    rng = np.random.default_rng(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        batch = 4 * (size - len(words)) + 1000
        onsets = rng.integers(len(_ONSETS), size=(batch, 4)).tolist()
        vowels = rng.integers(len(_VOWELS), size=(batch, 4)).tolist()
        codas = rng.integers(len(_CODAS), size=batch).tolist()
        extra = rng.integers(0, 2, size=batch).tolist()
        for i in range(batch):
            rank = len(words)
            # Frequent words are short, rare ones longer, as in natural language.
            syllables = 1 + (rank >= 100) + (rank >= 3000) + extra[i]
            word = "".join(_ONSETS[onsets[i][j]] + _VOWELS[vowels[i][j]] for j in range(syllables)) + _CODAS[codas[i]]
            if word in seen:
                continue
            seen.add(word)
            if len(search.tokenize(word)) == 1:
                words.append(word)
                if len(words) == size:
                    break
    ranks = np.arange(1, size + 1, dtype=np.float64)
    weights = 1.0 / (ranks + ZIPF_Q) ** ZIPF_S
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    return Vocabulary(words, cdf)


@dataclass
class Corpus:
    """Texts of one family in one scope: word ids concatenated, with document offsets."""

    word_ids: np.ndarray
    offsets: np.ndarray  # len = documents + 1

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1

    def body(self, vocab: Vocabulary, index: int) -> str:
        words = [vocab.words[i] for i in self.word_ids[self.offsets[index] : self.offsets[index + 1]].tolist()]
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def bodies(self, vocab: Vocabulary) -> list[str]:
        return [self.body(vocab, i) for i in range(self.documents)]


def _corpus(rng: np.random.Generator, vocab: Vocabulary, documents: int, words: tuple[int, int]) -> Corpus:
    lengths = rng.integers(words[0], words[1] + 1, size=documents)
    offsets = np.zeros(documents + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return Corpus(vocab.sample(rng, int(offsets[-1])), offsets)


@dataclass
class ScopeData:
    suffix: str
    memory: Corpus
    experience: Corpus | None


@dataclass
class Dataset:
    n: int
    vocab: Vocabulary
    scopes: list[ScopeData]  # current first, then its references in order
    referencing: bool = True  # the first scope references the others; tenants reference nothing

    def scope_ids(self, prefix: str) -> list[str]:
        return [f"{prefix}:{scope.suffix}" for scope in self.scopes]


def dataset(n: int, *, seed: int = SEED, vocab: Vocabulary | None = None) -> Dataset:
    """The corpus of one size (deterministic for a seed)."""
    vocab = vocab or vocabulary()
    rng = np.random.default_rng(seed + n)
    tenth = max(1, n // 10)
    scopes = [ScopeData("current", _corpus(rng, vocab, n, MEMORY_WORDS), _corpus(rng, vocab, tenth, EXPERIENCE_WORDS))]
    scopes += [ScopeData(f"ref{i}", _corpus(rng, vocab, tenth, MEMORY_WORDS), None) for i in (1, 2, 3)]
    return Dataset(n, vocab, scopes)


def tenants(scopes: int, entries: int, *, seed: int = SEED, vocab: Vocabulary | None = None) -> Dataset:
    """``scopes`` independent scopes (suffixes ``t0000000`` ...) of ``entries`` memory entries each, no references."""
    vocab = vocab or vocabulary()
    rng = np.random.default_rng(seed + 7 * scopes + entries)
    specs = [ScopeData(f"t{i:07d}", _corpus(rng, vocab, entries, MEMORY_WORDS), None) for i in range(scopes)]
    return Dataset(entries, vocab, specs, referencing=False)


def queries(vocab: Vocabulary, count: int, *, seed: int = SEED) -> list[str]:
    """``count`` queries of 3-8 words from the same word distribution as the documents."""
    rng = np.random.default_rng(seed - 1)
    result = []
    for _ in range(count):
        ids = vocab.sample(rng, int(rng.integers(QUERY_WORDS[0], QUERY_WORDS[1] + 1))).tolist()
        words = [vocab.words[i] for i in ids]
        result.append(" ".join(words).capitalize() + "?")
    return result


def entry_id(index: int) -> str:
    return f"e{index:07d}"


def experience_id(index: int) -> str:
    return f"x{index:06d}"


# --- loading through the services --------------------------------------------------------------------


def services_load(data: Dataset, prefix: str) -> None:
    """Write the dataset through artifacts.services (slow: small sizes only)."""
    from artifacts import services

    scopes = [services.scope_create(scope_id=scope_id) for scope_id in data.scope_ids(prefix)]
    services.scope_references_set(scope=scopes[0], targets=scopes[1:])
    for scope, spec in zip(scopes, data.scopes, strict=True):
        bodies = spec.memory.bodies(data.vocab)
        for start in range(0, len(bodies), ENTRIES_PER_REVISION):
            services.memory_revision_create(
                scope=scope,
                artifact_id="memory",
                writes=[
                    services.EntryVersionWrite(entry_id(i), f"{entry_id(i)}-v1", bodies[i])
                    for i in range(start, min(len(bodies), start + ENTRIES_PER_REVISION))
                ],
                author="bench",
            )
        if spec.experience is not None:
            for i, body in enumerate(spec.experience.bodies(data.vocab)):
                services.experience_revision_create(
                    scope=scope, artifact_id=experience_id(i), body=body, author="bench"
                )


# --- bulk loading ------------------------------------------------------------------------------------

_TABLES = {
    "scope": "artifacts_scope",
    "reference": "artifacts_contextreference",
    "artifact": "artifacts_artifact",
    "revision": "artifacts_artifactrevision",
    "version": "artifacts_memoryentryversion",
    "document": "artifacts_recalldocument",
    "posting": "artifacts_recallposting",
    "term_stat": "artifacts_recalltermstat",
    "corpus_stat": "artifacts_recallcorpusstat",
}
_DOC_SHIFT = 28
_TERM_SHIFT = 8
_TERM_MASK = (1 << 20) - 1
_TF_MASK = (1 << 8) - 1


class _Writer:
    """Row insertion on the Django connection's raw DB-API connection: executemany or COPY."""

    def __init__(self, connection) -> None:
        connection.ensure_connection()
        self.vendor = connection.vendor
        self.raw = connection.connection
        self.timestamp = "2026-01-01 00:00:00" if self.vendor == "sqlite" else "2026-01-01 00:00:00+00"

    def execute(self, sql: str, params=()) -> list:
        sql = sql.replace("%s", "?") if self.vendor == "sqlite" else sql
        cursor = self.raw.cursor()
        cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description else []
        cursor.close()
        return rows

    def next_id(self, table: str) -> int:
        return int(self.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])

    def insert(self, table: str, columns: tuple[str, ...], rows) -> None:
        cursor = self.raw.cursor()
        if self.vendor == "sqlite":
            marks = ", ".join("?" for _ in columns)
            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
        else:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        cursor.close()

    def indexes(self, table: str) -> list[tuple[str, str]]:
        """(name, CREATE statement) of the table's secondary indexes."""
        if self.vendor == "sqlite":
            return self.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s AND sql IS NOT NULL",
                (table,),
            )
        return self.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = %s AND i.indexname NOT IN "
            "(SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)",
            (table, table),
        )

    def reset_sequences(self) -> None:
        if self.vendor != "postgresql":
            return  # SQLite's AUTOINCREMENT counter follows explicit ids by itself
        for table in _TABLES.values():
            self.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT COALESCE(MAX(id), 1) FROM {table}))"
            )


def _revision_sha_chain(
    identity: tuple[str, str, str], versions_by_revision: list[list[SimpleNamespace]]
) -> list[tuple[str, str, str]]:
    """(content_sha256, chain_sha256, texts_sha256) of each memory revision adding ``versions_by_revision`` (nothing
    retired; every version written at ``BULK_TIME``)."""
    from vocabulary import history

    scope_id, family, artifact_id = identity
    texts = history.revision_texts_sha256(title=None, summary=None, body=None)
    hashes, content, chain = [], "", ""
    for number, added in enumerate(versions_by_revision, 1):
        content = history.memory_revision_sha256(content, added, [])
        chain = history.revision_chain_sha256(
            previous_chain=chain,
            scope_id=scope_id,
            family=family,
            artifact_id=artifact_id,
            revision=number,
            content_sha256=content,
            texts_sha256=texts,
            author=BULK_AUTHOR,
            created_at=BULK_TIME,
            born=added,
        )
        hashes.append((content, chain, texts))
    return hashes


_REVISION_COLUMNS = (
    "id",
    "artifact_id",
    "revision",
    "body",
    "title",
    "summary",
    "content_sha256",
    "chain_sha256",
    "author",
    "created_at",
    "entries_born",
    "entries_retired",
    "texts_sha256",
)


def _single_revision_hashes(identity: tuple[str, str, str], body: str) -> tuple[str, str, str]:
    """(content_sha256, chain_sha256, texts_sha256) of revision 1 of an artifact whose content is ``body``."""
    from vocabulary import history

    content = hashlib.sha256(body.encode("utf-8")).hexdigest()
    texts = history.revision_texts_sha256(title=None, summary=None, body=body)
    scope_id, family, artifact_id = identity
    chain = history.revision_chain_sha256(
        previous_chain="",
        scope_id=scope_id,
        family=family,
        artifact_id=artifact_id,
        revision=1,
        content_sha256=content,
        texts_sha256=texts,
        author=BULK_AUTHOR,
        created_at=BULK_TIME,
    )
    return content, chain, texts


def _term_table(vocab: Vocabulary) -> tuple[list[str], np.ndarray]:
    """Distinct index terms and, per vocabulary word, its term id (1-based), via artifacts.recall.tokenize."""
    from artifacts.recall import tokenize as search

    terms: dict[str, int] = {}
    word_term = np.empty(len(vocab.words), dtype=np.int64)
    for i, word in enumerate(vocab.words):
        (term,) = search.tokenize(word)
        word_term[i] = terms.setdefault(term, len(terms) + 1)
    return list(terms), word_term


def _packed_postings(corpus: Corpus, word_term: np.ndarray, first_document_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Per posting doc_id << 28 | term_id << 8 | tf (sorted by document, term), and document lengths.

    Each word is one term, so a document's indexed prefix (``tokenize.term_frequencies``) is its first
    RECALL_MAX_DOCUMENT_TOKENS words: postings and lengths are counted over them.
    """
    from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS

    words = np.diff(corpus.offsets)
    position = np.arange(len(corpus.word_ids), dtype=np.int64) - np.repeat(corpus.offsets[:-1], words)
    indexed = position < RECALL_MAX_DOCUMENT_TOKENS
    lengths = np.minimum(words, RECALL_MAX_DOCUMENT_TOKENS)
    documents = np.repeat(np.arange(first_document_id, first_document_id + corpus.documents, dtype=np.int64), lengths)
    keys = (documents << _DOC_SHIFT) | (word_term[corpus.word_ids[indexed]] << _TERM_SHIFT)
    unique, counts = np.unique(keys, return_counts=True)
    if counts.max(initial=0) > _TF_MASK or len(word_term) > _TERM_MASK:
        raise ValueError("term frequency or vocabulary too large for the packed posting format")
    return unique | counts, lengths


def check_term_frequencies(data: Dataset, samples: int = 200) -> None:
    """The bulk postings of sampled documents equal artifacts.recall.tokenize.term_frequencies of their bodies."""
    from artifacts.recall import tokenize as search

    terms, word_term = _term_table(data.vocab)
    rng = np.random.default_rng(1)
    for spec in data.scopes:
        for corpus in filter(None, (spec.memory, spec.experience)):
            packed, lengths = _packed_postings(corpus, word_term, 0)
            documents = packed >> _DOC_SHIFT
            for index in rng.choice(corpus.documents, size=min(samples, corpus.documents), replace=False).tolist():
                mine = packed[documents == index]
                expected = Counter(
                    {terms[int((p >> _TERM_SHIFT) & _TERM_MASK) - 1]: int(p & _TF_MASK) for p in mine.tolist()}
                )
                if search.term_frequencies(corpus.body(data.vocab, index)) != (expected, int(lengths[index])):
                    raise AssertionError(f"bulk term frequencies differ from the tokenizer for document {index}")


def bulk_load(data: Dataset, prefix: str) -> dict:
    """Insert the dataset directly into the tables; returns row counts and seconds."""
    from django.db import connection, transaction

    from artifacts.immutability import install_triggers, uninstall_triggers

    started = time.perf_counter()
    writer = _Writer(connection)
    terms, word_term = _term_table(data.vocab)
    counts: Counter[str] = Counter()
    ts = writer.timestamp
    with transaction.atomic():
        if writer.vendor == "postgresql":
            writer.execute("SET LOCAL session_replication_role = replica")  # no FK/trigger work per row
            writer.execute("SET LOCAL maintenance_work_mem = '1GB'")
        else:
            # A bulk import writes whole histories at once, heads first: the history guards are lifted for the
            # load alone, in its transaction (as flush does), and put back before it commits.
            uninstall_triggers(connection)
        scope_id = writer.next_id(_TABLES["scope"])
        scope_ids = list(range(scope_id, scope_id + len(data.scopes)))
        writer.insert(
            _TABLES["scope"],
            ("id", "scope_id", "title", "created_at"),
            [(pk, sid, "", ts) for pk, sid in zip(scope_ids, data.scope_ids(prefix), strict=True)],
        )
        if data.referencing:
            reference_id = writer.next_id(_TABLES["reference"])
            writer.insert(
                _TABLES["reference"],
                ("id", "scope_id", "target_id", "position"),
                [(reference_id + i, scope_ids[0], target, i + 1) for i, target in enumerate(scope_ids[1:])],
            )
        artifact_id = writer.next_id(_TABLES["artifact"])
        revision_id = writer.next_id(_TABLES["revision"])
        version_id = writer.next_id(_TABLES["version"])
        document_id = writer.next_id(_TABLES["document"])
        document_rows: list[tuple] = []
        posting_chunks: list[np.ndarray] = []
        scope_sids = data.scope_ids(prefix)
        for position, (scope_pk, scope_sid, spec) in enumerate(zip(scope_ids, scope_sids, data.scopes, strict=True)):
            if position and position % 1000 == 0:
                log(f"bulk {prefix}: {position:,} of {len(scope_ids):,} scopes in {time.perf_counter() - started:.1f}s")
            # The memory artifact: one revision per 1,000 entries, entries born in their batch's revision.
            bodies = spec.memory.bodies(data.vocab)
            shas = [hashlib.sha256(body.encode("utf-8")).hexdigest() for body in bodies]
            batches = [
                range(start, min(len(bodies), start + ENTRIES_PER_REVISION))
                for start in range(0, len(bodies), ENTRIES_PER_REVISION)
            ]
            memory_pk = artifact_id
            artifact_id += 1
            writer.insert(
                _TABLES["artifact"],
                ("id", "scope_id", "family", "artifact_id", "head_revision", "created_at"),
                [(memory_pk, scope_pk, "memory", "memory", len(batches), ts)],
            )
            chain = _revision_sha_chain(
                (scope_sid, "memory", "memory"),
                [
                    [
                        SimpleNamespace(
                            entry_id=entry_id(i),
                            version_id=f"{entry_id(i)}-v1",
                            content_sha256=shas[i],
                            created_at=BULK_TIME,
                        )
                        for i in b
                    ]
                    for b in batches
                ],
            )
            writer.insert(
                _TABLES["revision"],
                _REVISION_COLUMNS,
                [
                    (revision_id + r, memory_pk, r + 1, None, None, None, *chain[r][:2], BULK_AUTHOR, ts, len(b), 0)
                    + chain[r][2:]
                    for r, b in enumerate(batches)
                ],
            )
            revision_id += len(batches)
            writer.insert(
                _TABLES["version"],
                (
                    "id",
                    "artifact_id",
                    "entry_id",
                    "version_id",
                    "body",
                    "content_sha256",
                    "born_in_revision",
                    "retired_in_revision",
                    "created_at",
                    "born_ordinal",
                ),
                (
                    (
                        version_id + i,
                        memory_pk,
                        entry_id(i),
                        f"{entry_id(i)}-v1",
                        bodies[i],
                        shas[i],
                        i // ENTRIES_PER_REVISION + 1,
                        None,
                        ts,
                        i % ENTRIES_PER_REVISION + 1,
                    )
                    for i in range(len(bodies))
                ),
            )
            packed, lengths = _packed_postings(spec.memory, word_term, document_id)
            posting_chunks.append(packed)
            document_rows += [
                (document_id + i, scope_pk, "memory", memory_pk, version_id + i, None, int(lengths[i]))
                for i in range(len(bodies))
            ]
            document_id += len(bodies)
            version_id += len(bodies)
            counts["memory entries"] += len(bodies)
            del bodies, shas
            if spec.experience is not None:
                bodies = spec.experience.bodies(data.vocab)
                count = len(bodies)
                writer.insert(
                    _TABLES["artifact"],
                    ("id", "scope_id", "family", "artifact_id", "head_revision", "created_at"),
                    [(artifact_id + i, scope_pk, "experience", experience_id(i), 1, ts) for i in range(count)],
                )
                writer.insert(
                    _TABLES["revision"],
                    _REVISION_COLUMNS,
                    (
                        (revision_id + i, artifact_id + i, 1, body, None, None, *hashes[:2], BULK_AUTHOR, ts, 0, 0)
                        + hashes[2:]
                        for i, body in enumerate(bodies)
                        for hashes in [_single_revision_hashes((scope_sid, "experience", experience_id(i)), body)]
                    ),
                )
                packed, lengths = _packed_postings(spec.experience, word_term, document_id)
                posting_chunks.append(packed)
                document_rows += [
                    (document_id + i, scope_pk, "experience", artifact_id + i, None, revision_id + i, int(lengths[i]))
                    for i in range(count)
                ]
                artifact_id += count
                revision_id += count
                document_id += count
                counts["experiences"] += count
                del bodies
        writer.insert(
            _TABLES["document"],
            ("id", "scope_id", "family", "artifact_id", "entry_version_id", "revision_id", "length"),
            document_rows,
        )
        counts["recall documents"] = len(document_rows)
        del document_rows
        log(f"bulk {prefix}: entities written in {time.perf_counter() - started:.1f}s; postings next")
        postings = np.concatenate(posting_chunks)
        del posting_chunks
        counts["postings"] = len(postings)
        _insert_postings(writer, terms, postings)
        log(f"bulk {prefix}: postings written in {time.perf_counter() - started:.1f}s")
        scopes = f"scope_id BETWEEN {scope_ids[0]} AND {scope_ids[-1]}"  # the new scopes' ids are consecutive
        writer.execute(
            f"INSERT INTO {_TABLES['term_stat']} (scope_id, family, term, documents) "
            f"SELECT scope_id, family, term, COUNT(*) FROM {_TABLES['posting']} WHERE {scopes} "
            "GROUP BY scope_id, family, term"
        )
        if writer.vendor == "postgresql":  # triggers on again: the database gives each corpus row its generation
            writer.execute("SET LOCAL session_replication_role = origin")
        writer.execute(
            f"INSERT INTO {_TABLES['corpus_stat']} (scope_id, family, documents, total_length) "
            f"SELECT scope_id, family, COUNT(*), SUM(length) FROM {_TABLES['document']} WHERE {scopes} "
            "GROUP BY scope_id, family"
        )
        writer.reset_sequences()
        if writer.vendor == "sqlite":
            install_triggers(connection)
    if writer.vendor == "sqlite":
        writer.execute("PRAGMA analysis_limit = 1000")
    else:  # what autovacuum does to settled data: the visibility map that lets index-only scans skip the heap
        writer.execute(f"VACUUM {_TABLES['posting']}")
    writer.execute("ANALYZE")
    return {"counts": dict(counts), "seconds": time.perf_counter() - started}


def _insert_postings(writer: _Writer, terms: list[str], postings: np.ndarray) -> None:
    table = _TABLES["posting"]
    rebuild = len(postings) > 500_000
    dropped = writer.indexes(table) if rebuild else []
    for name, _ in dropped:
        writer.execute(f'DROP INDEX "{name}"')
    temp = "bench_terms"
    writer.execute(f"CREATE TEMP TABLE {temp} (id integer PRIMARY KEY, term varchar(64) NOT NULL)")
    writer.insert(temp, ("id", "term"), [(i + 1, term) for i, term in enumerate(terms)])
    select = (
        "SELECT d.id, d.scope_id, d.family, t.term, {tf}, d.length FROM {source} "
        f"JOIN {_TABLES['document']} d ON d.id = ({{value}} >> {_DOC_SHIFT}) "
        f"JOIN {temp} t ON t.id = (({{value}} >> {_TERM_SHIFT}) & {_TERM_MASK})"
    )
    columns = "(document_id, scope_id, family, term, term_frequency, document_length)"
    chunk = 2_000_000
    if writer.vendor == "sqlite":
        sql = f"INSERT INTO {table} {columns} " + select.format(
            source="json_each(?) p", tf=f"(p.value & {_TF_MASK})", value="p.value"
        )
        for start in range(0, len(postings), chunk):
            writer.execute(sql, (json.dumps(postings[start : start + chunk].tolist()),))
    else:
        writer.execute("CREATE TEMP TABLE bench_packed (value bigint NOT NULL)")
        cursor = writer.raw.cursor()
        with cursor.copy("COPY bench_packed (value) FROM STDIN") as copy:
            for start in range(0, len(postings), chunk):
                copy.write("\n".join(map(str, postings[start : start + chunk].tolist())) + "\n")
        cursor.close()
        writer.execute(
            f"INSERT INTO {table} {columns} "
            + select.format(source="bench_packed p", tf=f"(p.value & {_TF_MASK})", value="p.value")
            + " ORDER BY p.value"
        )
        writer.execute("DROP TABLE bench_packed")
    writer.execute(f"DROP TABLE {temp}")
    for _, statement in dropped:
        writer.execute(statement)


# --- equivalence of the two stores -------------------------------------------------------------------


def _index_snapshot(scope_ids: list[str]) -> dict:
    from artifacts.models import RecallCorpusStat, RecallDocument, RecallPosting, RecallTermStat, Scope

    scopes = {s.pk: i for i, s in enumerate(Scope.objects.filter(scope_id__in=scope_ids))}
    order = {sid: i for i, sid in enumerate(scope_ids)}
    position = {pk: order[s] for pk, s in Scope.objects.filter(scope_id__in=scope_ids).values_list("pk", "scope_id")}
    del scopes
    keys = {}
    for pk, scope, family, entry, artifact_id, revision in RecallDocument.objects.filter(
        scope_id__in=position
    ).values_list("pk", "scope_id", "family", "entry_version__entry_id", "artifact__artifact_id", "revision__revision"):
        keys[pk] = (position[scope], family, entry or artifact_id, revision)
    postings = sorted(
        (keys[doc], term, tf, length)
        for doc, term, tf, length in RecallPosting.objects.filter(scope_id__in=position).values_list(
            "document_id", "term", "term_frequency", "document_length"
        )
    )
    term_stats = sorted(
        (position[s], f, t, d)
        for s, f, t, d in RecallTermStat.objects.filter(scope_id__in=position, documents__gt=0).values_list(
            "scope_id", "family", "term", "documents"
        )
    )
    corpus_stats = sorted(
        (position[s], f, d, n)
        for s, f, d, n in RecallCorpusStat.objects.filter(scope_id__in=position).values_list(
            "scope_id", "family", "documents", "total_length"
        )
    )
    return {"documents": sorted(keys.values()), "postings": postings, "terms": term_stats, "corpus": corpus_stats}


def compare_stores(data: Dataset, prefix_a: str, prefix_b: str, query_texts: list[str]) -> dict:
    """Index rows, statistics and recall results of two stored copies of one dataset, compared."""
    from artifacts.models import Scope
    from artifacts.recall import sources

    snapshot_a = _index_snapshot(data.scope_ids(prefix_a))
    snapshot_b = _index_snapshot(data.scope_ids(prefix_b))
    same_index = {key: snapshot_a[key] == snapshot_b[key] for key in snapshot_a}

    def scopes(prefix: str) -> list:
        by_id = {s.scope_id: s for s in Scope.objects.filter(scope_id__in=data.scope_ids(prefix))}
        return [by_id[sid] for sid in data.scope_ids(prefix)]

    def strip(hits_per_scope) -> list:
        # The two copies differ only in their scope ids' prefix: compare citations without it.
        return [
            [(replace(h.citation, scope_id=h.citation.scope_id.split(":", 1)[1]), h.body) for h in hits]
            for hits in hits_per_scope
        ]

    a, b = scopes(prefix_a), scopes(prefix_b)
    differing = 0
    for query in query_texts:
        if strip(sources.recall_memory(scopes=a, query=query)) != strip(
            sources.recall_memory(scopes=b, query=query)
        ) or strip(sources.recall_experience(scopes=a, query=query)) != strip(
            sources.recall_experience(scopes=b, query=query)
        ):
            differing += 1
    return {
        "same_index": same_index,
        "queries": len(query_texts),
        "queries_with_different_results": differing,
        "equivalent": all(same_index.values()) and differing == 0,
    }
