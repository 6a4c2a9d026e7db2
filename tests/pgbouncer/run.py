#!/usr/bin/env python3
"""Run a test suite against PostgreSQL through a PgBouncer of its own, in transaction mode (docs/scaling.md).

    python tests/pgbouncer/run.py [--compare-direct] [--timeout SECONDS] [pytest arguments, default: tests/api -q]

Writes a config and an auth file into a temporary directory, starts ``pgbouncer`` on 127.0.0.1 and a free port
(``pool_mode = transaction``, trust authentication for the ``postgres`` user, a wildcard ``[databases]`` entry
so that the test database and ``postgres`` itself are reachable), runs pytest with
``DATABASE_URL=postgres://postgres@127.0.0.1:<port>/powercontext POWERCONTEXT_PGBOUNCER=transaction``, prints
PgBouncer's transaction count for the test database as proof that the traffic went through it, and stops
everything it started, on failure, timeout or a signal too. Run as root it drops to the ``postgres`` user
(PgBouncer refuses to run as root).

The test database is created through PgBouncer but kept at the end (``--reuse-db``) and dropped here, directly
and after PgBouncer has stopped: Django's own DROP DATABASE would go through PgBouncer, whose idle server
connections to that database make PostgreSQL refuse it.

``--compare-direct`` first runs the same tests straight against PostgreSQL and prints both wall-clock times.
"""

import argparse
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_HOST = os.environ.get("POWERCONTEXT_PGBOUNCER_UPSTREAM_HOST", "127.0.0.1")
UPSTREAM_PORT = int(os.environ.get("POWERCONTEXT_PGBOUNCER_UPSTREAM_PORT", "5432"))
DB_USER = "postgres"
DB_NAME = "powercontext"

CONFIG = """\
[databases]
* = host={upstream_host} port={upstream_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {directory}/userlist.txt
admin_users = {user}
stats_users = {user}
pool_mode = transaction
max_client_conn = 200
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
"""


class Interrupted(Exception):
    pass


def _raise_interrupted(signum, frame):
    raise Interrupted(f"signal {signum}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"pgbouncer did not listen on 127.0.0.1:{port} within {seconds:.0f}s")


def start_pgbouncer(directory: Path, port: int) -> subprocess.Popen:
    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
    if binary is None:
        raise RuntimeError("pgbouncer is not installed (Debian: apt-get install -y pgbouncer)")
    config = directory / "pgbouncer.ini"
    config.write_text(
        CONFIG.format(
            upstream_host=UPSTREAM_HOST, upstream_port=UPSTREAM_PORT, port=port, directory=directory, user=DB_USER
        )
    )
    (directory / "userlist.txt").write_text(f'"{DB_USER}" ""\n')
    command = [binary, str(config)]
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root: it switches to the postgres user, which must read the files.
        account = pwd.getpwnam(os.environ.get("POWERCONTEXT_PGBOUNCER_OS_USER", "postgres"))
        for path in (directory, *directory.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
        command[1:1] = ["-u", account.pw_name]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for_port(port, process)
    return process


def stop(process: subprocess.Popen | None, name: str) -> None:
    """SIGTERM to the process group (pgbouncer: immediate shutdown), SIGKILL after 10 s."""
    if process is None or process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            print(f"== {name} did not stop on {sig.name}", file=sys.stderr)


def run_pytest(env: dict, pytest_args: list[str], deadline: float) -> int:
    command = [sys.executable, "-m", "pytest", *pytest_args]
    process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    try:
        return process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print("== pytest exceeded the time limit: stopped", file=sys.stderr)
        return 124
    finally:
        stop(process, "pytest")


def psql(port: int, database: str, sql: str) -> str:
    result = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, "-d", database, "-tAX", "-F", " ", "-c", sql],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        raise RuntimeError(f"psql: {result.stderr.strip()}")
    return result.stdout


def drop_database(name: str) -> None:
    psql(UPSTREAM_PORT, "postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def transactions_through(port: int, database: str) -> int | None:
    """PgBouncer's total transaction count for one database (SHOW STATS on its admin console)."""
    for line in psql(port, "pgbouncer", "SHOW STATS").splitlines():
        fields = line.split(" ")
        if fields and fields[0] == database:
            return int(fields[1])  # database, total_xact_count, ...
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=1200, help="seconds for everything (default 1200)")
    parser.add_argument("--compare-direct", action="store_true", help="also run the tests straight, for timing")
    options, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or ["tests/api", "-q"]
    deadline = time.monotonic() + options.timeout
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)

    base_env = {key: value for key, value in os.environ.items() if not key.startswith("POWERCONTEXT_DB_POOL")}
    base_env.pop("POWERCONTEXT_PGBOUNCER", None)
    timings = {}
    status = 0
    if options.compare_direct:
        env = dict(base_env, DATABASE_URL=f"postgres://{DB_USER}@{UPSTREAM_HOST}:{UPSTREAM_PORT}/{DB_NAME}")
        env.pop("POWERCONTEXT_TEST_DB_NAME", None)
        print(f"== direct: {' '.join(pytest_args)}", flush=True)
        started = time.monotonic()
        status = run_pytest(env, pytest_args, deadline)
        timings["direct"] = time.monotonic() - started

    test_db = f"test_{DB_NAME}_pgbouncer_{os.getpid()}"
    pgbouncer = None
    directory = Path(tempfile.mkdtemp(prefix="powercontext-pgbouncer-"))
    try:
        port = free_port()
        pgbouncer = start_pgbouncer(directory, port)
        print(f"== through PgBouncer (transaction mode) on 127.0.0.1:{port}: {' '.join(pytest_args)}", flush=True)
        env = dict(
            base_env,
            DATABASE_URL=f"postgres://{DB_USER}@127.0.0.1:{port}/{DB_NAME}",
            POWERCONTEXT_PGBOUNCER="transaction",
            POWERCONTEXT_TEST_DB_NAME=test_db,
            # Tests that log in as a role of their own (PgBouncer knows only DB_USER) reach PostgreSQL directly.
            POWERCONTEXT_TEST_DIRECT_POSTGRES=f"{UPSTREAM_HOST}:{UPSTREAM_PORT}",
        )
        started = time.monotonic()
        status = run_pytest(env, [*pytest_args, "--reuse-db"], deadline) or status
        timings["pgbouncer"] = time.monotonic() - started
        transactions = transactions_through(port, test_db)
        print(f"== PgBouncer carried {transactions} transactions to {test_db}")
        if not transactions:
            print("== FAILED: no transaction went through PgBouncer", file=sys.stderr)
            status = status or 1
    except (Interrupted, KeyboardInterrupt, RuntimeError, subprocess.TimeoutExpired) as error:
        print(f"== stopped: {error}", file=sys.stderr)
        status = status or 1
    finally:
        stop(pgbouncer, "pgbouncer")
        try:
            drop_database(test_db)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"== could not drop {test_db}: {error}", file=sys.stderr)
        if status and (directory / "pgbouncer.log").exists():
            print("== last lines of pgbouncer.log:", file=sys.stderr)
            print("".join((directory / "pgbouncer.log").read_text().splitlines(True)[-20:]), file=sys.stderr)
        shutil.rmtree(directory, ignore_errors=True)
    for label, seconds in timings.items():
        print(f"== wall clock, {label}: {seconds:.1f}s")
    return status


if __name__ == "__main__":
    sys.exit(main())
