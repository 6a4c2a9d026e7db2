"""`python3 dev.py test` (README "Set up"): the suite from a venv of its own, never the `.venv` that `dev.py serve`
runs from (unless POWERCONTEXT_VENV names one, as .ci/run does per Python line), spread over every core."""

import re
import subprocess
import sys
import types

import pytest

import dev


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    """dev.test with nothing installed or run: the venv each step saw, and the command it would run."""
    for name in ("VENV", "BIN", "PYTHON", "STAMP", "DEV_STAMP"):
        monkeypatch.setattr(dev, name, getattr(dev, name))  # restored afterwards, whatever dev.use_venv set
    monkeypatch.delenv("POWERCONTEXT_VENV", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)  # the engine dev.test names: SQLite, whichever runs this
    seen = {}

    def ensure_environment(dev_requirements=False):
        seen["installed into"] = dev.VENV
        seen["dev requirements"] = dev_requirements

    def run(command, **options):
        seen["command"] = command
        seen["POWERCONTEXT_VENV"] = dev.os.environ.get("POWERCONTEXT_VENV")
        return types.SimpleNamespace(returncode=0)

    monkeypatch.setattr(dev, "ensure_environment", lambda dev=False: ensure_environment(dev))
    monkeypatch.setattr(dev, "versions", lambda: "Python 3, Django 5")
    monkeypatch.setattr(dev, "subprocess", types.SimpleNamespace(run=run))
    yield seen
    monkeypatch.delenv("POWERCONTEXT_VENV", raising=False)  # dev.test set it for its children


def _test(*extra: str) -> None:
    with pytest.raises(SystemExit) as exited:
        dev.test(list(extra))
    assert exited.value.code == 0


def test_the_suite_installs_into_and_runs_from_the_test_venv_not_the_one_serve_runs_from(recorded, capsys):
    _test()
    assert recorded["installed into"] == dev.ROOT / ".venv-test" != dev.ROOT / ".venv"
    assert recorded["dev requirements"] is True
    assert recorded["command"][:3] == [str(dev.ROOT / ".venv-test" / "bin" / "python"), "-m", "pytest"]
    # the `dev.py serve` a test starts (tests/docs/test_readme_serve.py) uses that venv too
    assert recorded["POWERCONTEXT_VENV"] == ".venv-test"
    out = capsys.readouterr().out
    assert "running the test suite on SQLite with Python 3, Django 5" in out
    assert "the test suite on SQLite took " in out


def test_a_venv_named_by_powercontext_venv_is_used_as_ci_does_per_python_line(recorded, monkeypatch):
    monkeypatch.setenv("POWERCONTEXT_VENV", ".venv-py3.11")
    monkeypatch.setattr(dev, "VENV", dev.ROOT / ".venv-py3.11")
    monkeypatch.setattr(dev, "PYTHON", dev.ROOT / ".venv-py3.11" / "bin" / "python")
    _test()
    assert recorded["installed into"] == dev.ROOT / ".venv-py3.11"
    assert recorded["command"][0] == str(dev.ROOT / ".venv-py3.11" / "bin" / "python")


def test_the_suite_runs_on_one_xdist_worker_per_core_with_groups_kept_on_one_worker(recorded):
    _test("tests/unit", "-q")
    assert recorded["command"][3:] == ["-n", "auto", "--dist", "loadgroup", "tests/unit", "-q"]


@pytest.mark.parametrize("choice", [["-n", "0"], ["-n0"], ["--numprocesses=3"], ["-p", "no:xdist"]])
def test_workers_chosen_by_the_caller_replace_the_default(recorded, choice):
    _test("tests/unit", *choice)
    assert recorded["command"][3:] == ["tests/unit", *choice]


def test_a_failing_suite_exits_with_pytests_status(recorded, monkeypatch):
    failed = types.SimpleNamespace(returncode=1)
    monkeypatch.setattr(dev, "subprocess", types.SimpleNamespace(run=lambda command, **options: failed))
    with pytest.raises(SystemExit) as exited:
        dev.test([])
    assert exited.value.code == 1


MODULE_WITH_A_SERVER = """
import os
import pytest

@pytest.fixture(scope="module")
def server():
    return os.getpid()  # started once per module: the worker that runs the module's tests

@pytest.mark.parametrize("n", range(6))
def test_uses_the_server(server, n):
    pass

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    pass
"""


def test_tests_sharing_a_module_scoped_fixture_run_on_one_worker_and_the_rest_are_shared_out(tmp_path):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_servers.py").write_text(MODULE_WITH_A_SERVER)
    env = {k: v for k, v in dev.os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env |= {"PYTHONPATH": str(dev.ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # xdist alone: a quick start
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "no:cacheprovider", "-v"]
        + [*pytest_arguments_for_two_workers(), "test_servers.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # e.g. "[gw1] [ 50%] PASSED test_servers.py::test_uses_the_server[2]@test_servers.py"
    passed = re.findall(r"\[(gw\d)\] .*PASSED test_servers.py::test_(\w+)\[", completed.stdout)
    assert len(passed) == 12, completed.stdout
    assert len({worker for worker, test in passed if test == "uses_the_server"}) == 1
    assert "@test_servers.py" not in "".join(line for line in completed.stdout.splitlines() if "test_alone" in line)


def pytest_arguments_for_two_workers() -> list[str]:
    """dev.py's own arguments, with two workers whatever the cores."""
    arguments = dev.pytest_arguments([])
    arguments[arguments.index("-n") + 1] = "2"
    return arguments
