"""The JSON nesting check on hostile bodies, before and after the linear scan (issue 34, point 2).

Before is the check as it was: a regular expression replaced every string by ``""`` and the brackets left
were counted. On an unterminated string of ``\\"`` pairs that expression, tried at each quote, read to the
end of the text and failed, then was tried again at the next quote: quadratic. It is kept here, and only
here, to show the difference. After is ``vocabulary.json_input.json_depth``. Each figure is the median of
repetitions (one repetition for the old check above 20 KB: it takes seconds), with a parse of the same body
by the standard decoder for scale. Pure Python: no database, the same on both engines.

    .venv/bin/python bench/json_depth.py            # 20, 80 and 120 KB attack bodies, and other shapes
    .venv/bin/python bench/json_depth.py --smoke    # small bodies only, for CI
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.conf import global_settings  # noqa: E402

from vocabulary.json_input import json_depth  # noqa: E402

_OLD_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OLD_BRACKETS = re.compile(r"[\[\]{}]")


def old_json_depth(text: str) -> int:
    """The check before issue 34 (quadratic on unterminated strings); for comparison only."""
    depth = deepest = 0
    for match in _OLD_BRACKETS.finditer(_OLD_STRINGS.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def attack(size: int) -> str:
    """A prepare body whose query is an unterminated string of escaped quotes, ``size`` characters long."""
    prefix = '{"scope_id": "project:demo", "query": "'
    return prefix + '\\"' * ((size - len(prefix)) // 2)


def other_shapes(size: int) -> dict[str, str]:
    """Hostile and ordinary bodies of about ``size`` characters, for the new check only."""
    return {
        "unterminated backslash run": '{"query": "' + "\\" * size,
        "brackets inside strings": json.dumps(["[[[[{{{{" * 8] * (size // 80)),
        "deep brackets": "[" * size,
        "many short strings": "[" + '"",' * (size // 3) + '""]',
        "normal prepare body": json.dumps({"scope_id": "project:demo", "query": "q " * (size // 4), "assembly": {}}),
    }


def seconds(function, text: str, repetitions: int) -> float:
    times = []
    for _ in range(repetitions):
        started = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def parse_seconds(text: str, repetitions: int) -> float:
    def parse(body: str) -> None:
        with contextlib.suppress(ValueError, RecursionError):  # hostile bodies are refused: time the refusal
            json.loads(body)

    return seconds(parse, text, repetitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small bodies only")
    args = parser.parse_args()
    sizes = [2_000, 8_000] if args.smoke else [20_000, 80_000, 120_000]
    print('attack: unterminated string of \\" pairs')
    print(f"{'size':>10} {'before':>12} {'after':>12} {'parse':>12}")
    for size in sizes:
        text = attack(size)
        before = seconds(old_json_depth, text, 3 if size <= 20_000 else 1)
        after = seconds(json_depth, text, 20)
        parse = parse_seconds(text, 20)
        print(f"{len(text):>10} {before * 1000:>10.1f}ms {after * 1000:>10.3f}ms {parse * 1000:>10.3f}ms")
    # Django refuses larger bodies before any parser runs (powercontext/settings.py keeps its default).
    size = 8_000 if args.smoke else global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    print(f"\nafter only, other shapes of {size} characters (Django's body cap in a full run)")
    print(f"{'shape':<28} {'after':>12} {'parse':>12}")
    for name, text in other_shapes(size).items():
        after = seconds(json_depth, text, 3)
        print(f"{name:<28} {after * 1000:>10.1f}ms {parse_seconds(text, 3) * 1000:>10.1f}ms")


if __name__ == "__main__":
    main()
