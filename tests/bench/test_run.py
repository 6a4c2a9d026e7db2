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


# bench/run.py as a script, its default LoCoMo path (bench.common.LOCOMO_PATH) moved to argv[1]: a machine without
# ../shared/data/locomo, as CI is.
WITH_DEFAULT_AT = (
    "import runpy, sys; from pathlib import Path; from bench import common; "
    "common.LOCOMO_PATH = Path(sys.argv[1]); sys.argv = ['bench/run.py', *sys.argv[2:]]; "
    "runpy.run_path('bench/run.py', run_name='__main__')"
)


def _run(tmp_path: Path, *arguments: str, default: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "bench/run.py"]
    if default is not None:
        command = [sys.executable, "-c", WITH_DEFAULT_AT, str(default)]
    command += ["--engines", "sqlite", "--output", str(tmp_path / "report.md"), *arguments]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _run_without_locomo(tmp_path: Path, *parts: str) -> subprocess.CompletedProcess:
    return _run(
        tmp_path, "--parts", ",".join(parts), default=tmp_path / "shared" / "data" / "locomo" / "locomo-dev.json"
    )


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


def test_a_locomo_path_given_that_does_not_exist_is_an_error_saying_where_it_looked(tmp_path):
    report = tmp_path / "report.md"
    report.write_text(MEASURED_RECALL, encoding="utf-8")

    finished = _run(tmp_path, "--parts", "recall", "--locomo", str(tmp_path / "typo"))

    assert finished.returncode == 2
    assert f"--locomo: no LoCoMo file at {tmp_path / 'typo'} (give the directory holding locomo-dev.json" in (
        finished.stderr
    )
    assert "the default is ../shared/data/locomo relative to the project root" in finished.stderr
    assert report.read_text(encoding="utf-8") == MEASURED_RECALL


def test_a_locomo_directory_is_read_as_the_locomo_dev_json_inside_it(tmp_path):
    (tmp_path / "locomo").mkdir()

    finished = _run(tmp_path, "--parts", "fill", "--locomo", str(tmp_path / "locomo"))

    assert finished.returncode == 2
    assert f"no LoCoMo file at {tmp_path / 'locomo' / 'locomo-dev.json'} " in finished.stderr


def test_the_default_locomo_path_is_shared_data_locomo_beside_the_repository():
    finished = subprocess.run(
        [sys.executable, "bench/run.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )

    assert "default ../shared/data/locomo, relative to the project root" in " ".join(finished.stdout.split())
