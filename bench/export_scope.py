"""How long ``manage.py export_scope`` and loading its file take on a long history, and how much memory they need.

    python bench/export_scope.py --engine sqlite [--to postgresql] [--revisions 10000]

Writes ``--revisions`` revisions into one scope through the write services (half in one memory artifact whose
every revision adds or replaces one of 500 entries, half in 100 experiences), then, each in a fresh process: the
export (to a file), the load of that file into a second, empty database (of the ``--to`` engine, the same by
default), and the export of the loaded scope, which must be the same bytes. Prints seconds, the file's size and
each process's peak resident memory (``ru_maxrss``) beside that of a process that only set Django up.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PYTHON, ROOT, django_env, log, throwaway_database  # noqa: E402

SCOPE = "project:export-bench"
ENTRIES = 500
EXPERIENCES = 100

_BUILD = """
import sys, django
django.setup()
from artifacts import services
scope_id, revisions, entries, experiences = sys.argv[1], *map(int, sys.argv[2:])
scope = services.scope_create(scope_id=scope_id, title="Export benchmark")
for i in range(revisions // 2):
    entry = f"e{i % entries}"
    services.memory_revision_create(scope=scope, artifact_id="memory", author="api-key:bench",
        writes=[services.EntryVersionWrite(entry_id=entry, version_id=None,
                                           body=f"Fact {i} about {entry}: the release train leaves on Tuesdays.")])
for i in range(revisions - revisions // 2):
    services.experience_revision_create(scope=scope, artifact_id=f"exp-{i % experiences}", author="api-key:bench",
        body=f"Lesson {i}: run the contract tests before every release, and read the changelog.")
"""

_MEASURED = """
import resource, sys, time, django
django.setup()
from django.core.management import call_command
start = time.perf_counter()
if sys.argv[1] != "baseline":
    call_command(*sys.argv[1:], verbosity=0)
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _run(env: dict, *args: str) -> tuple[float, int]:
    done = subprocess.run(
        [PYTHON, "-c", _MEASURED, *args], env=env, cwd=ROOT, check=True, capture_output=True, text=True
    )
    seconds, kib = done.stdout.split()
    return float(seconds), int(kib)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--to", choices=("sqlite", "postgresql"), help="the engine loaded into (default: --engine)")
    parser.add_argument("--revisions", type=int, default=10_000)
    options = parser.parse_args()
    with ExitStack() as stack:
        source = django_env(stack.enter_context(throwaway_database(options.engine, "export_from")))
        target = django_env(stack.enter_context(throwaway_database(options.to or options.engine, "export_to")))
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="powercontext_bench_export_")))
        for env in (source, target):
            subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], env=env, cwd=ROOT, check=True)
        log(f"writing {options.revisions} revisions through the services")
        start = time.perf_counter()
        build = [PYTHON, "-c", _BUILD, SCOPE, str(options.revisions), str(ENTRIES), str(EXPERIENCES)]
        subprocess.run(build, env=source, cwd=ROOT, check=True)
        log(f"written in {time.perf_counter() - start:.1f} s")
        first, second = work / "first.json", work / "second.json"
        results = {"revisions": options.revisions, "engine": options.engine, "to": options.to or options.engine}
        results["baseline_rss_mib"] = _run(source, "baseline")[1] / 1024
        seconds, kib = _run(source, "export_scope", SCOPE, "--output", str(first))
        results |= {"export_s": seconds, "export_rss_mib": kib / 1024, "file_mib": first.stat().st_size / 2**20}
        seconds, kib = _run(target, "load_context_fixtures", str(first))
        results |= {"load_s": seconds, "load_rss_mib": kib / 1024}
        seconds, kib = _run(target, "export_scope", SCOPE, "--output", str(second))
        results |= {"export_again_s": seconds, "same_bytes": first.read_bytes() == second.read_bytes()}
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
