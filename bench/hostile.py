"""What a hostile but authorized host can make one request cost (issue "no request can stall the service").

Measured in one worker per engine, both sides of each ratio in the same run on the same data:

- prepare: an 8192-character CJK query against a scope of long CJK memory entries, against a normal
  6-word query on the same scope, both through Django's HTTP stack in process (median of repetitions);
  and three of the long queries at once, from three threads (wall time, and that all answered 200);
- writes: a 65,536-character CJK body (about 65k distinct bigrams) against a 1 KB body, through the
  write service (median of repetitions).
"""

from __future__ import annotations

import random
import statistics
import threading
import time

CJK = (
    "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自可去之过家学对她里后小"
    "么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"
)
SCOPE = "bench:hostile"
KEY = "pc_bench_hostile_" + "0123456789abcdef" * 2


def cjk_text(seed: int, length: int) -> str:
    generator = random.Random(seed)
    return "".join(generator.choice(CJK) for _ in range(length))


def _median_seconds(action, repetitions: int) -> float:
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def worker(config: dict) -> dict:
    from django.db import connection
    from django.test import Client

    from artifacts import services
    from artifacts.services import EntryVersionWrite

    scope = services.scope_create(scope_id=SCOPE)
    services.api_key_create(name="hostile", key=KEY, read_scopes=[scope], write_scopes=[scope])
    started = time.perf_counter()
    for i in range(config["entries"]):
        services.memory_revision_create(
            scope=scope,
            artifact_id="memory",
            writes=[EntryVersionWrite(f"zh-{i}", None, cjk_text(i, config["entry_characters"]))],
            author="bench",
        )
    load_seconds = time.perf_counter() - started

    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {KEY}", "HTTP_HOST": "127.0.0.1"}

    def prepare(query: str) -> int:
        body = {"scope_id": SCOPE, "query": query, "assembly": {}}
        return client.post("/v1/context/prepare", body, content_type="application/json", **headers).status_code

    normal_query = " ".join(cjk_text(1000 + i, 2) for i in range(6))
    long_query = cjk_text(2000, 8192)
    assert prepare(normal_query) == 200 and prepare(long_query) == 200
    normal = _median_seconds(lambda: prepare(normal_query), config["repetitions"])
    long = _median_seconds(lambda: prepare(long_query), config["repetitions"])

    statuses: list[int] = []

    def concurrent_request() -> None:
        try:
            statuses.append(
                Client()
                .post(
                    "/v1/context/prepare",
                    {"scope_id": SCOPE, "query": long_query, "assembly": {}},
                    content_type="application/json",
                    **headers,
                )
                .status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=concurrent_request) for _ in range(3)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    three_at_once = time.perf_counter() - started

    counter = iter(range(10**6))

    def write(body: str) -> None:
        services.experience_revision_create(scope=scope, artifact_id=f"write-{next(counter)}", body=body, author="b")

    small_body = ("deploy release rollback budget " * 40)[:1024]
    large_body = cjk_text(3000, 65_536)
    small_write = _median_seconds(lambda: write(small_body), config["write_repetitions"])
    large_write = _median_seconds(lambda: write(large_body), config["write_repetitions"])
    return {
        "entries": config["entries"],
        "entry_characters": config["entry_characters"],
        "load_seconds": load_seconds,
        "normal_prepare": normal,
        "long_prepare": long,
        "three_long_at_once": three_at_once,
        "three_statuses": sorted(statuses),
        "small_write": small_write,
        "large_write": large_write,
    }
