"""Part 5, write cost: ``bench/writes.py`` run as a script, its output quoted in the report."""

from __future__ import annotations

import subprocess
import sys

from bench import common
from bench.common import ROOT, log
from bench.report import Report


def part_writes(report: Report, smoke: bool) -> None:
    script = ROOT / "bench" / "writes.py"
    if not script.exists():
        log("writes: bench/writes.py not present, skipped")
        report.add("5. Write cost", "bench/writes.py is not present yet: not measured.", [], [])
        return
    command = [common.PYTHON, str(script), *(["--smoke"] if smoke else [])]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    sys.stderr.write(completed.stderr)
    print(completed.stdout, flush=True)
    if completed.returncode != 0:
        raise RuntimeError(f"bench/writes.py failed with exit code {completed.returncode}")
    body = f"Output of `bench/writes.py{' --smoke' if smoke else ''}`:\n\n```text\n{completed.stdout.rstrip()}\n```"
    report.add("5. Write cost", body, [], [])
