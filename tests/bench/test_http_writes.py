"""bench/http_writes.py (issue 52's write figures over HTTP, lexical, inline and deferred hybrid) runs as operators
run it: ``--quick``, on SQLite."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.engine_independent
@pytest.mark.ci_once
def test_the_quick_run_prints_its_tables_with_lexical_inline_and_deferred_hybrid_side_by_side():
    finished = subprocess.run(
        [sys.executable, "bench/http_writes.py", "--quick", "--engines", "sqlite"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert finished.returncode == 0, finished.stderr
    printed = finished.stdout
    assert "(a) Write latency over HTTP, lexical against hybrid recall" in printed
    assert "(b) Another tenant beside 4 clients writing 65,536-character CJK entries" in printed
    assert "(c) Writes per second over HTTP and (d) the long write's cost" in printed
    assert "(e) Deferred vectors: the backlog after each phase and the seconds until it is 0" in printed
    rows = [line.split() for line in printed.splitlines() if line.startswith("SQLite ")]
    assert [row[1] for row in rows if row[1] in ("deferred", "hybrid", "lexical")] == ["deferred", "hybrid", "lexical"]
    drains = [row for row in rows if row[1] in ("warm-up", "(a)", "(b)", "(c)")]
    assert drains and all(row[-1] == "0" for row in drains)  # every backlog drained, none left at the timeout
    assert sum(1 for row in rows if row[1] in ("1", "4,096", "65,536")) == 3  # the three bodies of (a)
    assert "Not 2xx in the warm-up and (a): SQLite 0." in printed
