"""Micro-benchmark of the pure assembly core, side by side with one json.dumps of the same candidates.

40 candidates (memory 16, experience 8, topic_memory 8, profile 8) with ~2 KB mixed-script bodies are
assembled into max_bytes 32768 as Markdown (sections memory 16, experience 8, topic_memory 8, profile 8)
and as the legacy envelope. The baseline serializes the same candidates (citation fields and body) with
json.dumps once: the cheapest thing a server could do with them. All timings come from one run.

    .venv/bin/python bench/assembly_micro.py            # full run
    .venv/bin/python bench/assembly_micro.py --smoke    # a few repetitions, for CI
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from assembly.selection import assemble_legacy, assemble_markdown  # noqa: E402
from assembly.types import AssemblyOptions, Candidate, Citation, SectionSpec  # noqa: E402

MAX_BYTES = 32768
COUNTS = {"memory": 16, "experience": 8, "topic_memory": 8, "profile": 8}
OPTIONS = AssemblyOptions(
    "markdown",
    tuple(SectionSpec(family, limit) for family, limit in COUNTS.items()),
    frozenset({"confidence", "recall_rank"}),
)
PARAGRAPH = (
    "After changing the HTTP API contract, regenerate the client with make api-generate and run "
    "make contract-test.\r\n修改 OpenAPI 后，需要重新生成客户端并运行契约测试。\tTabs\u2028and separators. "
)


def body(index: int) -> str:
    """A ~2 KB body: mostly ASCII, some CJK, line breaks, a tab and a U+2028 to normalize."""
    text = f"Item {index}. " + PARAGRAPH * 12
    return text[: 2000 - index]


def candidates() -> dict[str, list[list[Candidate]]]:
    recalled: dict[str, list[list[Candidate]]] = {}
    index = 0
    for family, count in COUNTS.items():
        scopes: list[list[Candidate]] = [[], []]
        for position in range(count):
            index += 1
            scope = "project:demo" if position % 2 == 0 else "team:platform"
            if family == "memory":
                citation = Citation(scope, family, "memory", 7, f"entry-{index}", f"entry-{index}-v2")
            else:
                citation = Citation(scope, family, f"{family}-{index}", 1 + position)
            scopes[position % 2].append(Candidate(citation, body(index)))
        recalled[family] = scopes
    return recalled


def as_json(recalled: dict[str, list[list[Candidate]]]) -> str:
    items = [
        {
            "family": c.citation.family,
            "scope": c.citation.scope_id,
            "artifact": {"id": c.citation.artifact_id, "revision": c.citation.revision},
            "entry": {"id": c.citation.entry_id, "version": c.citation.entry_version},
            "body": c.body,
        }
        for per_scope in recalled.values()
        for hits in per_scope
        for c in hits
    ]
    return json.dumps({"items": items}, ensure_ascii=False)


def measure(function, number: int, repeat: int) -> float:
    """Best per-call time in seconds over `repeat` runs of `number` calls."""
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="run a few repetitions only")
    args = parser.parse_args(argv)
    number, repeat = (3, 2) if args.smoke else (200, 7)

    recalled = candidates()
    markdown = assemble_markdown(recalled, OPTIONS, max_bytes=MAX_BYTES)
    legacy = assemble_legacy(recalled, max_bytes=MAX_BYTES)
    baseline = as_json(recalled)
    truncated = sum(origin.truncated for origin in markdown.origins)

    rows = [
        ("json.dumps (baseline)", measure(lambda: as_json(recalled), number, repeat), len(baseline.encode())),
        (
            "assemble_markdown",
            measure(lambda: assemble_markdown(recalled, OPTIONS, max_bytes=MAX_BYTES), number, repeat),
            markdown.content_bytes,
        ),
        (
            "assemble_legacy",
            measure(lambda: assemble_legacy(recalled, max_bytes=MAX_BYTES), number, repeat),
            legacy.content_bytes,
        ),
    ]
    base = rows[0][1]
    print(f"40 candidates, ~2 KB bodies, max_bytes {MAX_BYTES}; best of {repeat} x {number} calls")
    print(
        f"markdown: {len(markdown.origins)} entries included ({truncated} truncated); "
        f"legacy: {len(legacy.origins)} entries"
    )
    print(f"{'operation':<24}{'per call':>12}{'vs json.dumps':>16}{'output bytes':>15}")
    for name, seconds, size in rows:
        print(f"{name:<24}{seconds * 1e6:>9.1f} us{seconds / base:>15.1f}x{size:>15}")


if __name__ == "__main__":
    main()
