"""One benchmark part against one engine: ``worker.py PART CONFIG_JSON RESULT_JSON``.

Run by ``bench/run.py`` with DATABASE_URL set to a throwaway database; migrates it first.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its modules must not shadow the standard library
os.chdir(ROOT)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "powercontext.settings")


def main() -> None:
    part, config_path, result_path = sys.argv[1:4]
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)

    if part == "recall":
        from bench.recall_quality import worker
    elif part == "latency":
        from bench.latency import worker
    elif part == "http_setup":
        from bench.http_load import setup_worker as worker
    elif part == "http_count":
        from bench.http_load import count_worker as worker
    elif part == "http_profile":
        from bench.http_profile import worker
    elif part == "fill_format":
        from bench.fill_format import worker
    elif part == "hostile":
        from bench.hostile import worker
    elif part == "hostile_references":
        from bench.hostile_references import worker
    elif part == "prepare_log":
        from bench.prepare_log import worker
    elif part == "selection":
        from bench.selection import worker
    elif part == "hybrid_prepare":
        from bench.hybrid_prepare import worker
    elif part == "engine":
        from bench.search_engine import worker
    elif part == "tenants":
        from bench.tenants import worker
    elif part == "http_writes_setup":
        from bench.http_writes import setup_worker as worker
    elif part == "existence":
        from bench.existence_timing import worker
    else:
        raise SystemExit(f"unknown part {part!r}")
    result = worker(config)
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
