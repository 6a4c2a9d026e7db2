"""What a long query costs on a scope with the most references (issue 34, point 5).

One scope with ``MAX_SCOPE_REFERENCES`` (64) references, each holding ``entries`` memory entries of CJK text that
shares its characters with the query, so that most of the query's thousands of distinct bigrams are present in
every scope. Through Django's HTTP stack in process, median of repetitions, alternating which query goes first:
a normal 6-word query against an 8,192-character CJK query, on the same scope, in the same run. Twice: with the
process's resident copies off (every prepare reads the statistics in SQL) and on (after every scope's copy is
loaded, the prepares rank from memory).
"""

from __future__ import annotations

import statistics
import time

from bench.hostile import CJK, cjk_text

SCOPE = "bench:references"
KEY = "pc_bench_references_" + "0123456789abcdef" * 2


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def worker(config: dict) -> dict:
    from django.conf import settings
    from django.test import Client

    from artifacts import services
    from artifacts.recall import resident
    from artifacts.services import EntryVersionWrite
    from infrastructure.conf import setting_set
    from vocabulary.limits import MAX_SCOPE_REFERENCES

    references = []
    for i in range(MAX_SCOPE_REFERENCES):
        reference = services.scope_create(scope_id=f"bench:reference-{i:02d}")
        services.memory_revision_create(
            scope=reference,
            artifact_id="memory",
            writes=[
                EntryVersionWrite(f"zh-{j}", None, cjk_text(i * 1000 + j, config["entry_characters"]))
                for j in range(config["entries"])
            ],
            author="bench",
        )
        references.append(reference)
    scope = services.scope_create(scope_id=SCOPE)
    services.scope_references_set(scope=scope, targets=references)
    services.api_key_create(name="references", key=KEY, read_scopes=[scope, *references], write_scopes=[])

    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {KEY}", "HTTP_HOST": "127.0.0.1"}

    def prepare(query: str) -> None:
        body = {"scope_id": SCOPE, "query": query, "assembly": {}}
        response = client.post("/v1/context/prepare", body, content_type="application/json", **headers)
        assert response.status_code == 200, response.content[:300]

    normal_query = " ".join(cjk_text(1000 + i, 2) for i in range(6))
    long_query = cjk_text(2000, 8192)
    result = {
        "references": MAX_SCOPE_REFERENCES,
        "entries": config["entries"],
        "entry_characters": config["entry_characters"],
        "distinct_query_terms": len({long_query[i : i + 2] for i in range(len(long_query) - 1)}),
        "alphabet": len(CJK),
    }
    for label, memory_mb in (("sql", 0), ("resident", settings.POWERCONTEXT_RESIDENT_MEMORY_MB or 32)):
        setting_set("POWERCONTEXT_RESIDENT_MEMORY_MB", memory_mb)
        resident.COPIES.clear()
        for _ in range(MAX_SCOPE_REFERENCES + 3 if memory_mb else 2):  # one copy loads per prepare
            prepare(normal_query)
        prepare(long_query)
        normal, long = [], []
        for repetition in range(config["repetitions"]):
            order = ((normal, normal_query), (long, long_query))
            for times, query in order if repetition % 2 == 0 else reversed(order):
                times.append(_timed(lambda q=query: prepare(q)))
        result[label] = {"normal_prepare": statistics.median(normal), "long_prepare": statistics.median(long)}
    return result
