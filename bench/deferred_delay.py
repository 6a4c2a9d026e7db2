"""How long a deferred write's text waits for its vector on an idle server (issue 52; docs/benchmarks.md, "Deferred
vectors beside inline and lexical over HTTP").

gunicorn with the production defaults (hybrid recall, the packaged model, deferred vectors), 2 workers, on a new
migrated SQLite database; 20 memory entries of about 1 KB written one at a time through the API, each followed by
``/metrics`` polled until ``powercontext_recall_vector_lag`` is 0 again: printed, the seconds from each write's
answer to the first scrape that counts its vector (a scrape's own time included), p50, p90 and the longest.

    .venv/bin/python bench/deferred_delay.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.conftest import (  # noqa: E402
    gunicorn,
    manage,
    migrated_sqlite_environment,
    packaged_vector_lag,
)

TOKEN = "bench-metrics-token"
WRITES = 20
KEY_SCRIPT = (
    "from artifacts import services; scope = services.scope_create(scope_id='project:delay'); "
    "print(services.api_key_create(name='bench', read_scopes=[scope], write_scopes=[scope])[1])"
)


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="powercontext_bench_delay_"))
    env = migrated_sqlite_environment(scratch) | {"POWERCONTEXT_METRICS_TOKEN": TOKEN}
    key = manage(env, "shell", "-c", KEY_SCRIPT).stdout.strip().splitlines()[-1]

    def lag(base: str) -> float:
        return packaged_vector_lag(base, TOKEN)

    def write(base: str, number: int) -> None:
        body = {"scope_id": "project:delay", "entry_id": f"e{number}", "body": f"note {number} on the garden. " * 40}
        request = urllib.request.Request(
            base + "/v1/memory/entries",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 201

    with gunicorn(scratch / "gunicorn.log", env, workers=2) as base:
        write(base, -1)  # the drainers' model loaded, their first passes done
        while lag(base) > 0:
            time.sleep(0.05)
        delays = []
        for number in range(WRITES):
            write(base, number)
            answered = time.perf_counter()
            while lag(base) > 0:
                time.sleep(0.005)
            delays.append(time.perf_counter() - answered)
            time.sleep(0.5)
    delays.sort()
    print(
        f"{WRITES} writes of about 1 KB, one at a time: seconds from the answer to the vector p50 "
        f"{statistics.median(delays):.3f}, p90 {delays[int(0.9 * WRITES) - 1]:.3f}, longest {delays[-1]:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
