"""The engine's idf reproduced in its own single precision (``engine.query.engine_idf``): the proof that an engine
ranking is exact divides our term weights by the engine's, so they must be the engine's to the last unit.

No database: a tantivy index in a temporary directory, explained by tantivy itself.
"""

from __future__ import annotations

import json
import math

import pytest
import tantivy

from artifacts.recall import tokenize
from artifacts.recall.engine.query import ENGINE_SCORE_MARGIN, engine_idf

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
    from artifacts.recall.engine import query, store
    from artifacts.recall.ranking import Bm25Query

    bm25 = Bm25Query(
        weights={"common": 0.1},
        frequencies={"common": 1},
        length_constant=0.3,
        length_factor=0.1,
        average_length=9.0,
        documents=2**24,
    )
    proposal = store.Proposal([1, 2], 0.5, store.EngineScoring(documents=float(2**24), average_length=9.0))

    bound = query._proven_above(bm25, None, proposal)

    assert not query.settled(("memory", 1), query.Rescoring([], bound), [2**62] * 16, limit=16)
