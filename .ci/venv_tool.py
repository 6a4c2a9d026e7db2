#!/usr/bin/env python3
"""Run a tool from the project's venv, refusing when the venv holds another version than the one asked for.

    .ci/venv_tool.py ruff==0.17.6 check --force-exclude FILE...   # runs `<venv>/bin/python -m ruff check ...`

The pre-commit hooks (.pre-commit-config.yaml) run the tools that `python3 dev.py test` or `make venv` installed
from requirements-dev.txt, so that a commit needs no network; the version each hook names is checked against the
venv, so that a hook never passes on a tool other than the one `make check` and CI run. The venv is the one
POWERCONTEXT_VENV names (relative to the repository), else the first of dev.py's venvs (the test venv, if dev.py
keeps one apart, then .venv) that holds the tool at that version. The tool runs as `python -m NAME`, so NAME is
both the distribution and its module (ruff, mypy). Standard library only.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def candidate_venvs() -> list[Path]:
    """The venvs a hook may run its tool from, in the order they are tried."""
    if "POWERCONTEXT_VENV" in os.environ:
        return [ROOT / os.environ["POWERCONTEXT_VENV"]]
    sys.path.insert(0, str(ROOT))
    import dev  # the one home of the venvs' names (standard library only)

    names = [getattr(dev, "TEST_VENV", None), ".venv"]
    return [ROOT / name for name in dict.fromkeys(name for name in names if name)]


def installed_version(python: Path, distribution: str) -> str | None:
    """The version of ``distribution`` installed for ``python``, or None when it is not installed."""
    completed = subprocess.run(
        [str(python), "-c", "import sys, importlib.metadata as m; print(m.version(sys.argv[1]))", distribution],
        capture_output=True,
        text=True,
    )
    return completed.stdout.strip() if completed.returncode == 0 else None


def main(argv: list[str]) -> int:
    if not argv or argv[0].count("==") != 1:
        print(__doc__, file=sys.stderr)
        return 2
    tool, wanted = argv[0].split("==")
    found = []
    for venv in candidate_venvs():
        python = venv / "bin" / "python"
        version = installed_version(python, tool) if python.exists() else None
        if version == wanted:
            os.execv(python, [str(python), "-m", tool, *argv[1:]])
        found.append(f"  {venv}: {'no venv' if not python.exists() else version or f'no {tool}'}")
    print(
        f"This hook runs {tool} {wanted}; no venv holds it:\n" + "\n".join(found) + "\n"
        "`python3 dev.py test` or `make venv` installs requirements-dev.txt; if that pins another "
        f"{tool}, .pre-commit-config.yaml must name the same version.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
