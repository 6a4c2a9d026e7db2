"""bench/http_writes.py (issue 52's write figures over HTTP) runs as operators run it: ``--quick``, on SQLite."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.engine_independent
def test_the_quick_run_prints_its_three_tables_with_lexical_and_hybrid_side_by_side():
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
    rows = [line.split() for line in printed.splitlines() if line.startswith("SQLite ")]
    assert [row[1] for row in rows if row[1] in ("hybrid", "lexical")] == ["hybrid", "lexical"]
    assert sum(1 for row in rows if row[1] in ("1", "4,096", "65,536")) == 3  # the three bodies of (a)
    assert "Not 2xx in the warm-up and (a): SQLite 0." in printed
