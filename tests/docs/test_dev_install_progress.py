"""`dev.py serve` and `dev.py test` show pip's progress while they install: each line pip prints, after the seconds
elapsed, a line when pip is silent for a while, and how long the install took (README "Set up")."""

import re
import sys
from pathlib import Path

import pytest

import dev

ELAPSED = re.compile(r"^\[ *\d+s\] ")


def test_each_line_of_the_command_is_shown_after_the_seconds_elapsed_and_silence_is_reported(capsys):
    script = (
        "import sys, time\n"
        "print('Collecting django')\n"
        "print('a warning', file=sys.stderr)\n"
        "time.sleep(0.6)\n"
        "print('Successfully installed django')\n"
        "sys.exit(3)\n"
    )
    status = dev._echo_with_elapsed([sys.executable, "-c", script], quiet_seconds=0.2)
    lines = capsys.readouterr().out.splitlines()
    assert status == 3
    assert lines and all(ELAPSED.match(line) for line in lines), lines
    texts = [ELAPSED.sub("", line) for line in lines]
    assert texts[:2] == ["Collecting django", "a warning"]  # stderr too, in order
    assert texts[-1] == "Successfully installed django"
    assert "… still working" in texts[2:-1]  # the 0.6 s of silence


@pytest.fixture
def scratch_venv(tmp_path, monkeypatch):
    """dev's paths pointed at an empty venv directory (its python: this one), so nothing real is installed."""
    monkeypatch.setattr(dev, "VENV", tmp_path / "venv")
    monkeypatch.setattr(dev, "PYTHON", Path(sys.executable))
    monkeypatch.setattr(dev, "STAMP", tmp_path / "stamp")
    monkeypatch.setattr(dev, "DEV_STAMP", tmp_path / "dev-stamp")
    calls = []

    def pip(args, **options):
        calls.append([str(a) for a in args])
        print("[   0s] Collecting django")
        return 0

    monkeypatch.setattr(dev, "_echo_with_elapsed", pip)
    return calls


@pytest.mark.parametrize(("dev_requirements", "name"), [(False, "requirements.txt"), (True, "requirements-dev.txt")])
def test_serve_and_test_install_with_pips_progress_shown(scratch_venv, capsys, dev_requirements, name):
    dev.ensure_environment(dev=dev_requirements)  # `serve` asks for the runtime, `test` (and .ci/run) for dev
    out = capsys.readouterr().out
    [args] = scratch_venv
    assert args[:4] == [sys.executable, "-m", "pip", "install"] and args[-2:] == ["-r", str(dev.ROOT / name)]
    assert "--quiet" not in args and "-q" not in args  # pip's own lines are what shows the progress
    assert f"installing {name} into " in out and "(seconds elapsed on the left)" in out
    assert "[   0s] Collecting django" in out
    assert re.search(rf"installed {re.escape(name)} into .* in \d+ s", out), out
    # installed once: the stamp says so, and a second call installs nothing
    dev.ensure_environment(dev=dev_requirements)
    assert len(scratch_venv) == 1


def test_a_failed_install_says_how_long_it_ran_and_exits_with_pips_status(scratch_venv, monkeypatch, capsys):
    monkeypatch.setattr(dev, "_echo_with_elapsed", lambda args, **options: 2)
    with pytest.raises(SystemExit) as exited:
        dev.ensure_environment()
    assert exited.value.code == 2
    assert re.search(r"installing requirements.txt failed after \d+ s \(pip exit status 2\)", capsys.readouterr().out)
    assert not dev.STAMP.exists()  # the next run tries again
