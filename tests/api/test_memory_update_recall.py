"""An update of a memory entry retires the replaced version and its recall document with it, on every ranking
path: SQL, the copies of small scopes in process memory, and the search index of large scopes.

A retired version's document left indexed is never cited (the read keeps live versions only), but it still counts
in the scope's statistics and takes a place among each ranking's first 16: observed here through the inspector's
scores (equal to those of a scope holding the same live entries, written at once) and through a live entry that
sixteen such documents would crowd out of the pool.
"""

import html
import io
import json
import re

import pytest
from django.core.management import call_command

from artifacts.recall import resident
from infrastructure import metrics
from tests.api.factories import add_memory, make_key, make_scope, markdown_of, ok_json, prepare, update_memory

pytestmark = pytest.mark.django_db
INSPECT_URL = "/admin/powercontext/inspect/"
MEMORY_ONLY = {"sections": [{"family": "memory", "limit": 16}]}
FILLER = {f"f{i}": f"lunch menu {i} soup bread" for i in range(6)}
"""Enough entries for the search index to take the scope (POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS below)."""


@pytest.fixture(params=["sql", "resident copies", "search index"])
def ranking_path(request, settings, tmp_path):
    """Which path ranks the scopes; ``ready`` readies it once the entries are written."""
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = 32 if request.param == "resident copies" else 0
    if request.param == "search index":
        settings.POWERCONTEXT_SEARCH_INDEX_DIR = str(tmp_path / "search")
        settings.POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = 5
    return request.param


def _ready(path: str, client, key: str, scope_ids: list[str]) -> None:
    """The path's state after the writes: each scope's copy loaded (at its second prepare), or the index built."""
    if path == "resident copies":
        for scope_id in scope_ids:
            for _ in range(2):
                ok_json(prepare(client, key, {"scope_id": scope_id, "query": "lunch", "assembly": MEMORY_ONLY}))
        assert len(resident.COPIES.copies) == len(scope_ids)
    elif path == "search index":
        call_command("recall_index_build", "--settle", "0", stdout=io.StringIO(), stderr=io.StringIO())


def _memory_prepare(client, key: str, scope_id: str, query: str) -> dict:
    return ok_json(prepare(client, key, {"scope_id": scope_id, "query": query, "assembly": MEMORY_ONLY}))


def _inspected_scores(client, scope, query: str) -> list[tuple[str, str]]:
    """(entry id, score) of each memory candidate the inspector shows, in rank order."""
    params = {"scope": scope.scope_id, "query": query, "max_bytes": "8000", "assembly": json.dumps(MEMORY_ONLY)}
    page = client.get(INSPECT_URL, params).content.decode()
    rows = re.findall(
        r'data-family="memory".*?entry <code class="identity">(.*?)</code>.*?<td class="score">(.*?)</td>', page, re.S
    )
    assert rows, "the inspector shows no memory candidate"
    return [(html.unescape(entry), score) for entry, score in rows]


def _index_answers() -> float:
    return metrics.RECALL_INDEX_ANSWERS._value.get()


def test_a_replaced_version_is_not_cited_and_counts_nowhere_in_the_scope_statistics(client, staff_client, ranking_path):
    updated, twin = make_scope("project:updated"), make_scope("project:twin")
    add_memory(updated, {"e1": "zebra crossing by the old station", "e2": "zebra stripes in the zoo", **FILLER})
    update_memory(updated, "e1", "a bicycle lane by the new station")
    # The same live entries, written at once: the statistics the updated scope must have.
    add_memory(twin, {"e1": "a bicycle lane by the new station", "e2": "zebra stripes in the zoo", **FILLER})
    key = make_key(read=[updated, twin])
    _ready(ranking_path, client, key, ["project:updated", "project:twin"])
    answers = _index_answers()

    cited = markdown_of(prepare(client, key, scope_id="project:updated", query="zebra", assembly=MEMORY_ONLY))
    assert [(entry.entry_id, entry.version) for entry in cited.entries] == [("e2", cited.entries[0].version)]
    assert "zebra crossing" not in _memory_prepare(client, key, "project:updated", "zebra crossing")["content"]
    # Scores read the scope's document count, each term's document frequency and the average length.
    for query in ("zebra", "station", "zebra crossing station"):
        assert _inspected_scores(staff_client, updated, query) == _inspected_scores(staff_client, twin, query)
    if ranking_path == "search index":
        assert _index_answers() > answers


def test_sixteen_replaced_versions_do_not_crowd_a_live_entry_out_of_the_ranking(client, ranking_path):
    scope = make_scope("project:updated")
    add_memory(scope, {"e1": "zebra 0", "e2": "a long note that also names a zebra " + "among many words " * 8})
    add_memory(scope, FILLER)
    for version in range(1, 17):  # each retires a short "zebra" version, which would outrank e2
        update_memory(scope, "e1", f"zebra {version}")
    update_memory(scope, "e1", "a bicycle lane")
    key = make_key(read=[scope])
    _ready(ranking_path, client, key, ["project:updated"])
    answers = _index_answers()

    cited = markdown_of(prepare(client, key, scope_id="project:updated", query="zebra", assembly=MEMORY_ONLY))

    assert cited.entry_ids == ["e2"]
    if ranking_path == "search index":
        assert _index_answers() > answers
