"""The Hermes set-up honours HERMES_HOME: the README's steps, the install command and the provider.

Every Hermes command runs in a subprocess with its own HERMES_HOME and HOME, so nothing reaches a
developer's real ~/.hermes (and the session's HERMES_HOME of conftest.py is not touched).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hermes_powercontext.config import load_config

from tests.conftest import PROJECT_ROOT

BIN = Path(sys.executable).parent
KEY = "pc_demo_0123456789abcdef0123456789abcdef"


def _readme_hermes_block() -> str:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("### Enable PowerContext in Hermes Agent")
    return re.compile(r"```sh\n(.*?)```", re.S).search(readme, start).group(1)


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "POWERCONTEXT_"))}
    # PC and KEY as the README's "Try it" section sets them in the user's shell.
    shell = {"PC": "http://127.0.0.1:8000", "KEY": KEY}
    return environ | shell | {"HOME": str(home), "PATH": f"{BIN}{os.pathsep}{environ.get('PATH', '')}"} | extra


def test_the_readme_steps_write_only_under_hermes_home_and_hermes_reports_the_provider(tmp_path):
    hermes_home = tmp_path / "hermes-home"
    script = _readme_hermes_block().replace(".venv/bin/", f"{BIN}/")

    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=PROJECT_ROOT,
        env=_environment(tmp_path, HERMES_HOME=str(hermes_home)),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert (hermes_home / "plugins" / "powercontext" / "__init__.py").is_file()
    assert "provider: powercontext" in (hermes_home / "config.yaml").read_text(encoding="utf-8")
    written = json.loads((hermes_home / "powercontext.json").read_text(encoding="utf-8"))
    assert written["scope_id"] == "project:demo" and written["base_url"] == "http://127.0.0.1:8000"
    assert not (tmp_path / "home" / ".hermes").exists()
    # `hermes memory status`, the README's check
    assert re.search(r"Provider:\s+powercontext", done.stdout), done.stdout
    assert "installed ✓" in done.stdout and "available ✓" in done.stdout


def test_the_readme_steps_default_to_home_dot_hermes(tmp_path):
    script = _readme_hermes_block().replace(".venv/bin/", f"{BIN}/")

    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=PROJECT_ROOT,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "home" / ".hermes" / "plugins" / "powercontext" / "plugin.yaml").is_file()
    assert (tmp_path / "home" / ".hermes" / "powercontext.json").is_file()


def test_install_writes_into_hermes_home_and_names_it(tmp_path):
    hermes_home = tmp_path / "elsewhere"

    done = subprocess.run(
        [sys.executable, "-m", "hermes_powercontext", "install"],
        env=_environment(tmp_path, HERMES_HOME=str(hermes_home)),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert (hermes_home / "plugins" / "powercontext" / "__init__.py").is_file()
    assert str(hermes_home / "powercontext.json") in done.stdout
    assert str(hermes_home / "config.yaml") in done.stdout
    assert "hermes memory status" in done.stdout
    assert not (tmp_path / "home" / ".hermes").exists()


def test_the_provider_reads_its_configuration_from_hermes_home(tmp_path, monkeypatch):
    from hermes_powercontext.provider import PowerContextMemoryProvider

    (tmp_path / "powercontext.json").write_text(
        json.dumps({"base_url": "http://127.0.0.1:8000", "scope_id": "project:demo"}), encoding="utf-8"
    )
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("POWERCONTEXT_API_KEY", KEY)

    assert PowerContextMemoryProvider().is_available() is True
    assert load_config(tmp_path).scope_id == "project:demo"
