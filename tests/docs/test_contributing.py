"""CONTRIBUTING.md's commands exist, its rules are the ones the hooks enforce, and the pre-commit configuration
runs the ruff that requirements-dev.txt pins: checked as a contributor meets them (make, dev.py, pre-commit, git)."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import PROJECT_ROOT

CONTRIBUTING = (PROJECT_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
CONFIG_PATH = PROJECT_ROOT / ".pre-commit-config.yaml"
CONFIG = yaml.safe_load(CONFIG_PATH.read_text(encoding="utf-8"))
MAKE_TARGETS = sorted(set(re.findall(r"(?:`|^)make ([a-z][a-z0-9-]*)", CONTRIBUTING, flags=re.MULTILINE)))
DEV_COMMANDS = sorted(set(re.findall(r"python3 dev\.py ([a-z][a-z0-9-]*)", CONTRIBUTING)))


def _pinned(name: str) -> str:
    """The version requirements-dev.txt pins for ``name``."""
    text = (PROJECT_ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    [version] = re.findall(rf"^{re.escape(name)}==(\S+)", text, flags=re.MULTILINE)
    return version


def _hooks() -> list[dict]:
    return [hook for repo in CONFIG["repos"] for hook in repo["hooks"]]


def test_contributing_names_the_checks_the_set_up_and_the_openapi_command():
    assert {"check", "format", "api-generate", "venv"} <= set(MAKE_TARGETS)
    assert {"serve", "test"} <= set(DEV_COMMANDS)
    assert "[docs/architecture.md](docs/architecture.md)" in CONTRIBUTING


def test_the_set_up_commands_are_the_readmes_two():
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    for command in ("python3 dev.py serve", "python3 dev.py test"):
        assert f"```sh\n{command}\n```" in setup
        assert command in CONTRIBUTING


@pytest.mark.parametrize("target", MAKE_TARGETS)
def test_each_make_target_contributing_names_exists(target):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # -n prints the recipe without running it; a target the Makefile lacks is an error ("No rule to make target").
    completed = subprocess.run(
        ["make", "-n", target], cwd=PROJECT_ROOT, capture_output=True, text=True, env={**os.environ, "SECRET_KEY": "x"}
    )
    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("command", DEV_COMMANDS)
def test_each_dev_py_command_contributing_names_is_in_dev_pys_usage(command):
    # `python3 dev.py` without a command prints its usage, which lists every command (and does nothing else).
    completed = subprocess.run([sys.executable, "dev.py"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    usage = completed.stdout + completed.stderr
    assert re.search(rf"^\s+python3 dev\.py {command}\b", usage, flags=re.MULTILINE), usage


def test_the_commit_subject_limit_contributing_states_is_the_hooks():
    spec = importlib.util.spec_from_file_location("commit_msg", PROJECT_ROOT / ".ci" / "commit_msg.py")
    commit_msg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(commit_msg)
    assert f"at most {commit_msg.SUBJECT_MAX_CHARACTERS} characters, in the imperative" in CONTRIBUTING
    [hook] = [hook for hook in _hooks() if hook["entry"] == ".ci/commit_msg.py"]
    assert hook["stages"] == ["commit-msg"]


def test_the_pre_commit_hooks_run_ruff_check_and_format_at_the_version_requirements_dev_pins():
    ruff = _pinned("ruff")
    entries = [hook["entry"] for hook in _hooks() if "ruff" in hook["entry"]]
    assert sorted(entry.split()[2] for entry in entries) == ["check", "format"]
    assert all(entry.startswith(f".ci/venv_tool.py ruff=={ruff} ") for entry in entries), (entries, ruff)


def test_every_tool_a_hook_runs_from_the_venv_is_at_the_version_requirements_dev_pins():
    pinned = [hook["entry"].split()[1] for hook in _hooks() if hook["entry"].startswith(".ci/venv_tool.py ")]
    assert pinned
    for requirement in pinned:
        tool, version = requirement.split("==")
        assert version == _pinned(tool), f"{requirement}: requirements-dev.txt pins {tool}=={_pinned(tool)}"


def test_the_type_checker_hook_runs_mypy_on_the_whole_product_as_make_check_does():
    [hook] = [hook for hook in _hooks() if hook["id"] == "mypy"]
    assert hook["entry"] == f".ci/venv_tool.py mypy=={_pinned('mypy')}"
    assert hook["pass_filenames"] is False
    makefile = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8")
    check = makefile.split("\ncheck:", 1)[1].split("\n\n", 1)[0]
    assert "\t$(PY) -m mypy\n" in check + "\n"


def test_every_hook_is_local_and_runs_a_script_of_the_repository():
    assert [repo["repo"] for repo in CONFIG["repos"]] == ["local"]
    for hook in _hooks():
        script = PROJECT_ROOT / hook["entry"].split()[0]
        assert hook["language"] == "script" and script.is_file() and os.access(script, os.X_OK), hook


@pytest.fixture(scope="module")
def pre_commit_clone(tmp_path_factory):
    """A git repository holding the project's hook configuration and scripts, with `pre-commit install` run in
    it as CONTRIBUTING.md says; its hooks use this test run's venv. Shared by the tests below (each commits files
    of its own), since installing and running the hooks takes seconds."""
    pytest.importorskip("pre_commit")
    tmp_path = tmp_path_factory.mktemp("pre-commit")
    repository = tmp_path / "clone"
    (repository / ".ci").mkdir(parents=True)
    for name in (".pre-commit-config.yaml", "pyproject.toml", ".ci/commit_msg.py", ".ci/venv_tool.py"):
        shutil.copy2(PROJECT_ROOT / name, repository / name)
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "POWERCONTEXT_VENV": sys.prefix,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        # The clone holds none of the product that mypy checks (make check runs it, and so does the hook in a
        # checkout of the project).
        "SKIP": "mypy",
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=repository, env=environment, capture_output=True, text=True, check=check, timeout=300
        )

    run("git", "init", "-q")
    run("git", "add", ".")
    run("git", "commit", "-q", "-m", "Add the hook configuration")
    run(sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml")
    run(sys.executable, "-m", "pre_commit", "install")
    return repository, run


def test_an_installed_hook_refuses_a_commit_whose_subject_is_over_72_characters(pre_commit_clone):
    repository, run = pre_commit_clone
    (repository / "notes.txt").write_text("one\n")
    run("git", "add", "notes.txt")
    refused = run("git", "commit", "-q", "-m", "Add notes " + "x" * 63, check=False)
    assert refused.returncode == 1
    assert "The commit subject is 73 characters; at most 72" in refused.stdout + refused.stderr
    run("git", "commit", "-q", "-m", "Add notes " + "x" * 62)
    assert run("git", "log", "-1", "--format=%s").stdout.strip() == "Add notes " + "x" * 62


def test_an_installed_hook_refuses_code_ruff_rejects_and_formats_it(pre_commit_clone):
    repository, run = pre_commit_clone
    (repository / "module.py").write_text("import os\nvalue=1\n")
    run("git", "add", "module.py")
    refused = run("git", "commit", "-q", "-m", "Add a module", check=False)
    assert refused.returncode == 1
    output = refused.stdout + refused.stderr
    assert "F401" in output and "files were modified by this hook" in output
    assert (repository / "module.py").read_text() == "import os\n\nvalue = 1\n"
    (repository / "module.py").write_text("value = 1\n")
    run("git", "add", "module.py")
    run("git", "commit", "-q", "-m", "Add a module")
