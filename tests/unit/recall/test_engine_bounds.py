"""How far the engine's scores lie from ours (``engine.bounds``), checked against tantivy itself.

Its idf reproduced in its own single precision (``engine_idf``): the proof that an engine ranking is exact divides
our term weights by the engine's, so they must be the engine's to the last unit. Its one-byte document lengths
(``length_kept``): how far they are rounded decides which candidates are worth rescoring.

No database: a tantivy index in a temporary directory, explained by tantivy itself.
"""

from __future__ import annotations

import json
import math

import pytest
import tantivy

from artifacts.recall import tokenize
from artifacts.recall.engine.bounds import ENGINE_SCORE_MARGIN, LENGTH_KEPT_MIN, engine_idf, length_kept

DOCUMENTS = 100_000


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="whitespace", index_option="freq")
    schema = builder.build()
    index = tantivy.Index(schema, path=str(tmp_path_factory.mktemp("engine")))
    writer = index.writer()
    for number in range(DOCUMENTS):
        # "common" in every document, "rare" in one of a thousand, "half" in every other one.
        words = ["common"] + (["rare"] if number % 1000 == 0 else []) + (["half"] if number % 2 == 0 else [])
        writer.add_document(tantivy.Document(text=" ".join(words)))
    writer.commit()
    index.reload()
    return schema, index.searcher()


def _explained(schema, searcher, term: str) -> dict[str, float]:
    query = tantivy.Query.term_query(schema, "text", term, "freq")
    explanation = json.loads(query.explain(searcher, searcher.search(query, 1).hits[0][1]).to_json())
    found: dict[str, float] = {}

    def visit(node: dict) -> None:
        found.setdefault(str(node.get("description", "")).split(",")[0], node["value"])
        for child in node.get("details") or ():
            visit(child)

    visit(explanation)
    return found


@pytest.mark.parametrize("term", ["common", "half", "rare"])
def test_the_engine_idf_is_tantivys_own_to_the_last_unit(searcher, term):
    schema, engine = searcher
    explained = _explained(schema, engine, term)

    idf = engine_idf(explained["N"], engine.doc_freq("text", term))

    assert math.isclose(idf, explained["idf"], rel_tol=2.5e-7, abs_tol=0.0)


def test_double_precision_would_misstate_a_term_in_every_document_beyond_the_margin(searcher):
    schema, engine = searcher
    explained = _explained(schema, engine, "common")

    ours = tokenize.idf(int(explained["N"]), engine.doc_freq("text", "common"))

    assert abs(ours - explained["idf"]) / explained["idf"] > ENGINE_SCORE_MARGIN


def test_an_index_too_large_for_an_exact_document_count_proves_no_ranking():
    from artifacts.recall.bm25 import Bm25Query
    from artifacts.recall.engine import bounds, query, store

    bm25 = Bm25Query(
        weights={"common": 0.1},
        frequencies={"common": 1},
        length_constant=0.3,
        length_factor=0.1,
        average_length=9.0,
        documents=2**24,
    )
    proposal = store.Proposal([1, 2], 0.5, store.EngineScoring(documents=float(2**24), average_length=9.0))

    _, bound = bounds.worth_rescoring(bm25, None, proposal, kept=16)

    assert not query.settled(("memory", 1), query.Rescoring([], bound), [2**62] * 16, limit=16)


LENGTHS = [*range(1, 700), 1000, 1175, 2327, 3000]  # 1175 and 2327: the most rounded of their ranges


@pytest.fixture(scope="module")
def stored_lengths(tmp_path_factory) -> dict[int, float]:
    """Each document length (in terms) as the engine stores it: the length its explanation of a score uses."""
    from artifacts.recall.engine import store

    index = tantivy.Index(store.SCHEMA, path=str(tmp_path_factory.mktemp("lengths")))
    writer = index.writer()
    for length in LENGTHS:  # the document's id is its length
        writer.add_document(store.text_document(length, " ".join(["x"] + ["y"] * (length - 1))))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    query = tantivy.Query.term_query(store.SCHEMA, "text", "x", "freq")
    hits = searcher.search(query, len(LENGTHS)).hits
    lengths = searcher.fast_field_values("doc_id", [address for _, address in hits])
    stored = {}
    for length, (_, address) in zip(lengths, hits, strict=True):
        explained = json.loads(query.explain(searcher, address).to_json())
        (frequency_part,) = [part for part in explained["details"] if part["description"].startswith("freq /")]
        (dl,) = [part["value"] for part in frequency_part["details"] if part["description"].startswith("dl,")]
        stored[length] = dl
    return stored


def test_the_engine_never_stores_a_document_longer_than_it_is(stored_lengths):
    assert all(stored <= length for length, stored in stored_lengths.items())
    assert any(stored < length for length, stored in stored_lengths.items())


@pytest.mark.parametrize("longest", [1, 39, 40, 41, 56, 57, 88, 100, 300, 699, 1000, 3000])
def test_length_kept_is_the_least_stored_over_true_length_up_to_the_longest(stored_lengths, longest):
    least = min(stored / length for length, stored in stored_lengths.items() if length <= longest)

    assert length_kept(longest) == pytest.approx(least, rel=1e-12)


def test_an_unknown_longest_document_keeps_at_least_eight_ninths_of_any_length(stored_lengths):
    assert length_kept(None) == LENGTH_KEPT_MIN
    assert all(stored / length > LENGTH_KEPT_MIN for length, stored in stored_lengths.items())
    assert length_kept(10**9) > LENGTH_KEPT_MIN
