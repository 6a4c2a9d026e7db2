"""The recall statistics stay exactly the postings' counts through large writes (artifacts/recall/index.py).

A 65,536-character CJK body (the largest accepted) tokenizes into about 65,000 distinct bigrams; the index holds
its first RECALL_MAX_DOCUMENT_TOKENS of them, one posting and one term-statistics row each. After every write,
through the HTTP API, the term statistics and the corpus statistics must equal a recount from the postings and the
documents, and a prepare must still find what is live: the write path's statement shapes changed for speed
(issue 34), never its numbers. A document longer than the limit is found by the terms of its prefix only, and is
stored, read and shown whole.
"""

from __future__ import annotations

import json
import random

import pytest
from django.db import connection

from tests.api.factories import add_memory, auth, make_key, make_scope, ok_json, parse_legacy, prepare, read_revision
from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS

SCOPE = "project:large"
pytestmark = pytest.mark.django_db


def cjk(seed: int, characters: int = 65_536) -> str:
    """Random ideographs of the whole basic block: nearly every bigram distinct."""
    generator = random.Random(seed)
    return "".join(chr(0x4E00 + generator.randrange(0x9FFF - 0x4E00)) for _ in range(characters))


def post(client, key: str, path: str, **payload):
    body = json.dumps({"scope_id": SCOPE, **payload}, ensure_ascii=False)
    return client.post(f"/v1/memory/entries{path}", body, content_type="application/json", **auth(key))


def rows(sql: str) -> set[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return set(cursor.fetchall())


def assert_statistics_are_the_postings_counts() -> None:
    stored_terms = rows("SELECT scope_id, family, term, documents FROM artifacts_recalltermstat WHERE documents > 0")
    recounted_terms = rows(
        "SELECT scope_id, family, term, COUNT(DISTINCT document_id) FROM artifacts_recallposting "
        "GROUP BY scope_id, family, term"
    )
    stored_corpus = rows(
        "SELECT scope_id, family, documents, total_length FROM artifacts_recallcorpusstat WHERE documents > 0"
    )
    recounted_corpus = rows(
        "SELECT scope_id, family, COUNT(*), SUM(length) FROM artifacts_recalldocument GROUP BY scope_id, family"
    )
    negative = rows("SELECT term FROM artifacts_recalltermstat WHERE documents < 0")

    assert len(stored_terms) == len(recounted_terms)
    assert stored_terms == recounted_terms
    assert stored_corpus == recounted_corpus
    assert negative == set()


def cited(client, key: str, query: str, entry_id: str) -> bool:
    """Whether a prepare for ``query`` answers the entry (none found: status ``empty``, no items)."""
    answer = ok_json(prepare(client, key, scope_id=SCOPE, query=query))
    items = parse_legacy(answer["content"]) if answer["status"] == "ready" else []
    return entry_id in {item["entry"]["id"] for item in items}


def test_statistics_stay_exact_through_creating_updating_and_removing_a_64k_character_cjk_entry(client):
    scope = make_scope(SCOPE)
    key = make_key(read=[scope], write=[scope])
    first, second = cjk(1), cjk(2)
    # Small entries sharing bigrams with the large bodies: their statistics must survive the large changes.
    add_memory(scope, {"small-1": first[:40] + " deploys freeze", "small-2": second[100:140] + " " + first[:20]})
    assert_statistics_are_the_postings_counts()

    created = post(client, key, "", entry_id="large", body=first)
    assert created.status_code == 201
    assert_statistics_are_the_postings_counts()
    assert cited(client, key, first[3_000:3_012], "large")

    updated = post(client, key, "/update", entry_id="large", body=second)
    assert updated.status_code == 201, updated.content
    assert_statistics_are_the_postings_counts()
    assert cited(client, key, second[3_500:3_512], "large")
    assert not cited(client, key, first[3_000:3_012], "large")

    removed = post(client, key, "/remove", entry_id="large")
    assert removed.status_code == 201, removed.content
    assert_statistics_are_the_postings_counts()
    assert not cited(client, key, second[3_500:3_512], "large")
    assert cited(client, key, first[:12], "small-1")


def test_one_revision_retiring_several_entries_that_share_terms_counts_each_term_once_per_entry(client):
    scope = make_scope(SCOPE)
    key = make_key(read=[scope], write=[scope])
    shared = cjk(3, 2_000)
    add_memory(scope, {"a": shared + cjk(4, 500), "b": shared + cjk(5, 500), "c": shared[:700] + " kept"})
    assert_statistics_are_the_postings_counts()

    # One revision replaces two entries and removes none: both documents leave in one removal.
    add_memory(scope, {"a": "alpha rewritten", "b": "beta rewritten"})
    assert_statistics_are_the_postings_counts()
    add_memory(scope, {"d": "delta"}, removals=["c"])

    assert_statistics_are_the_postings_counts()
    assert cited(client, key, "beta rewritten", "b")
    assert not cited(client, key, shared[:12], "c")


def indexed_lengths(entry_id: str) -> list[int]:
    """The BM25 length of each recall document of the live versions of ``entry_id``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.length FROM artifacts_recalldocument AS d "
            "JOIN artifacts_memoryentryversion AS v ON v.id = d.entry_version_id WHERE v.entry_id = %s",
            [entry_id],
        )
        return [length for (length,) in cursor.fetchall()]


def test_a_document_longer_than_the_limit_is_found_by_its_first_terms_only_and_read_whole(client):
    scope = make_scope(SCOPE)
    key = make_key(read=[scope], write=[scope])
    # Every word one term: "flamingo" is the first, "lighthouse" the last the index holds, "zeppelin" the next.
    body = " ".join(["flamingo", *["padding"] * (RECALL_MAX_DOCUMENT_TOKENS - 2), "lighthouse", "zeppelin"])
    add_memory(scope, {"short": "a zeppelin overhead"})

    created = post(client, key, "", entry_id="long", body=body)

    assert created.status_code == 201, created.content
    assert_statistics_are_the_postings_counts()
    assert indexed_lengths("long") == [RECALL_MAX_DOCUMENT_TOKENS]
    assert cited(client, key, "flamingo", "long")
    assert cited(client, key, "lighthouse", "long")
    assert not cited(client, key, "zeppelin", "long")
    assert cited(client, key, "zeppelin", "short")
    read = read_revision(client, key, **created.json()["citation"])
    assert read.status_code == 200, read.content
    assert read.json()["entry"]["body"] == body


def test_a_cjk_document_is_found_by_bigrams_up_to_the_limit_and_not_after(client):
    scope = make_scope(SCOPE)
    key = make_key(read=[scope], write=[scope])
    body = cjk(6, 3 * RECALL_MAX_DOCUMENT_TOKENS)
    # A run of n characters is n - 1 bigrams: the last indexed one ends at character RECALL_MAX_DOCUMENT_TOKENS.
    last_indexed = body[RECALL_MAX_DOCUMENT_TOKENS - 1 : RECALL_MAX_DOCUMENT_TOKENS + 1]
    first_left_out = body[RECALL_MAX_DOCUMENT_TOKENS : RECALL_MAX_DOCUMENT_TOKENS + 2]

    assert post(client, key, "", entry_id="long", body=body).status_code == 201

    assert_statistics_are_the_postings_counts()
    assert indexed_lengths("long") == [RECALL_MAX_DOCUMENT_TOKENS]
    assert cited(client, key, last_indexed, "long")
    assert not cited(client, key, first_left_out, "long")
    assert not cited(client, key, body[2 * RECALL_MAX_DOCUMENT_TOKENS : 2 * RECALL_MAX_DOCUMENT_TOKENS + 12], "long")
