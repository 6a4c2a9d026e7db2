""".ci/venv_tool.py, which the pre-commit hooks run: the venv's own tool, at the version the hook names, or a
refusal that says what each venv holds."""

import importlib.metadata
import os
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / ".ci" / "venv_tool.py"
RUFF = importlib.metadata.version("ruff")


def _run(*args: str, venv: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "POWERCONTEXT_VENV": venv}
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=environment, timeout=120)


def test_the_venvs_tool_runs_with_the_arguments_when_it_is_the_version_asked_for():
    completed = _run(f"ruff=={RUFF}", "--version", venv=sys.prefix)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"ruff {RUFF}"


def test_another_version_is_refused_naming_what_the_venv_holds_and_the_tool_does_not_run():
    completed = _run("ruff==0.0.1", "--version", venv=sys.prefix)
    assert completed.returncode == 1
    assert completed.stdout == ""
    assert completed.stderr.startswith(f"This hook runs ruff 0.0.1; no venv holds it:\n  {sys.prefix}: {RUFF}\n")
    assert ".pre-commit-config.yaml must name the same version" in completed.stderr


def test_a_tool_the_venv_lacks_and_a_missing_venv_are_refused_saying_so(tmp_path):
    lacking = _run("no-such-tool==1.0", venv=sys.prefix)
    assert lacking.returncode == 1
    assert f"  {sys.prefix}: no no-such-tool\n" in lacking.stderr
    missing = _run(f"ruff=={RUFF}", "--version", venv=str(tmp_path / "absent"))
    assert missing.returncode == 1
    assert f"  {tmp_path / 'absent'}: no venv\n" in missing.stderr
    assert "`python3 dev.py test` or `make venv` installs requirements-dev.txt" in missing.stderr


def test_without_a_pinned_tool_it_prints_its_usage():
    completed = _run("ruff", "--version", venv=sys.prefix)
    assert completed.returncode == 2
    assert ".ci/venv_tool.py ruff==" in completed.stderr
