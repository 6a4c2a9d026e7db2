"""Does a 404 tell an unreadable scope from an unknown one by its time? Side by side, both engines.

    python bench/existence_timing.py [--requests 3000] [--engines sqlite,postgresql]

Per engine, in a throwaway database: a scope with three references and a memory entry, and an API key that may read
and write another scope only. Through Django's WSGI handler in process, each endpoint that takes a scope id is asked
alternately for that unreadable scope and for a scope id that does not exist (a new one each time, so no cache
answers it), the order swapped every request; every answer must be the same 404. Prints the p50 of each and their
difference. Printed, not asserted: the machine is shared; the test suite holds the database work equal
(``tests/api/test_existence_leaks.py``), this shows what remains in time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.common import ENGINE_LABELS, worker_on_engines, wsgi_post

REQUESTS = 3000
HIDDEN = "bench:hidden"
ENDPOINTS = {
    "prepare": ("/v1/context/prepare", {"query": "which language for the script?", "assembly": {}}),
    "write": ("/v1/experiences/revisions", {"artifact_id": "lesson", "body": "a lesson"}),
}


def worker(config: dict) -> dict:
    import logging

    from artifacts import services
    from artifacts.services import EntryVersionWrite

    references = [services.scope_create(scope_id=f"bench:reference-{i}") for i in range(3)]
    hidden = services.scope_create(scope_id=HIDDEN)
    services.scope_references_set(scope=hidden, targets=references)
    services.memory_revision_create(
        scope=hidden, artifact_id="memory", writes=[EntryVersionWrite("e", None, "a hidden note")], author="bench"
    )
    mine = services.scope_create(scope_id="bench:mine")
    logging.getLogger("django.request").setLevel(logging.ERROR)  # not a line per 404
    _, key = services.api_key_create(name="existence", read_scopes=[mine], write_scopes=[mine])
    result = {}
    for name, (path, fields) in ENDPOINTS.items():
        post = wsgi_post(key, path, "404 Not Found")
        times: dict[str, list[float]] = {"unreadable": [], "unknown": []}
        for i in range(200 + config["requests"]):
            asks = [("unreadable", HIDDEN), ("unknown", f"bench:nowhere-{i}")]
            for label, scope_id in asks if i % 2 else asks[::-1]:
                elapsed = post({"scope_id": scope_id, **fields})[0]
                if i >= 200:  # the first 200 warm the handler and the pages
                    times[label].append(elapsed)
        result[name] = {label: statistics.median(values) for label, values in times.items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--engines", default="sqlite,postgresql")
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", "powercontext-bench-only-" + "k" * 40)
    print("| engine | endpoint | unreadable p50 µs | unknown p50 µs | difference |")
    print("|---|---|---|---|---|")
    describe = f"{args.requests} requests each, unreadable and unknown alternating"
    for engine, result in worker_on_engines(args.engines, "existence", {"requests": args.requests}, describe=describe):
        for name, p50 in result.items():
            hidden, unknown = p50["unreadable"] * 1e6, p50["unknown"] * 1e6
            print(
                f"| {ENGINE_LABELS[engine]} | {name} | {hidden:.1f} | {unknown:.1f} | "
                f"{hidden - unknown:+.1f} µs ({hidden / unknown - 1:+.1%}) |"
            )


if __name__ == "__main__":
    main()
