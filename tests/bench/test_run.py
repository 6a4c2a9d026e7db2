"""The benchmark runner's report handling (bench/run.py), run as operators run it: as a script."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MEASURED_RECALL = """# Benchmarks

- Date: 2026-11-30 10:00 UTC
- Machine of this run: test machine

## 1. Recall quality on LoCoMo

Measured 2026-11-30 10:00 UTC on test machine.

R@10 63.4 %.

## 3. HTTP throughput

Measured 2026-11-30 10:05 UTC on test machine.

Prepare 90 % of the trivial read.
"""


def _run_without_locomo(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "bench/run.py", "--parts", ",".join(parts), "--engines", "sqlite"]
    command += ["--locomo", str(tmp_path / "missing.json"), "--output", str(tmp_path / "report.md")]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_partial_run_without_locomo_keeps_the_measured_recall_section(tmp_path):
    report = tmp_path / "report.md"
    report.write_text(MEASURED_RECALL, encoding="utf-8")

    finished = _run_without_locomo(tmp_path, "recall")

    assert finished.returncode == 0, finished.stderr
    assert "SKIPPED LoCoMo file not found" in finished.stdout
    assert "earlier recall section is kept" in finished.stdout
    assert report.read_text(encoding="utf-8") == MEASURED_RECALL


def test_run_without_locomo_and_without_an_earlier_section_says_not_measured(tmp_path):
    finished = _run_without_locomo(tmp_path, "recall")

    assert finished.returncode == 0, finished.stderr
    written = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## 1. Recall quality on LoCoMo" in written
    assert "Not measured: LoCoMo file not found" in written


def test_fill_alone_without_locomo_leaves_the_recall_section_alone(tmp_path):
    report = tmp_path / "report.md"
    report.write_text(MEASURED_RECALL, encoding="utf-8")

    finished = _run_without_locomo(tmp_path, "fill")

    assert finished.returncode == 0, finished.stderr
    assert "R@10 63.4 %" in report.read_text(encoding="utf-8")
    assert "Not measured" not in report.read_text(encoding="utf-8")
