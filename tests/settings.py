"""Settings of the test suite (pyproject's DJANGO_SETTINGS_MODULE): the project's, with a test-only key.

pytest-django imports this module before any conftest, so the key is set here; test subprocesses
(``manage.py …``) inherit both the key and DJANGO_SETTINGS_MODULE through the environment.
"""

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "powercontext-tests-only-" + "x9Jq2" * 8)

from powercontext.settings import *  # noqa: E402,F403

# Plain storage: templates get unhashed static URLs without a collectstatic run. The production storage
# (CompressedManifestStaticFilesStorage) is tested on its own, in tests/api/test_static_and_health.py.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# An existing, empty STATIC_ROOT, so that WhiteNoise does not warn about a missing directory.
STATIC_ROOT = os.path.join(tempfile.gettempdir(), "powercontext-test-static")
os.makedirs(STATIC_ROOT, exist_ok=True)

# The prepare log's row is written when a prepare's response is closed, so that a test reads it right after the
# request; the background writer has tests of its own (tests/api/test_prepare_log_writer.py).
POWERCONTEXT_PREPARE_LOG_WRITER = "inline"

# Recall ranks by BM25 alone, so golden outputs stay byte-exact; the dense side has tests of its own
# (tests/unit/recall/vectors/, tests/integration/test_embedding_endpoint.py).
POWERCONTEXT_RECALL_MODE = "lexical"
# A hybrid test's write stores its vectors with the write (tests that rank by meaning right after writing); deferred
# vectors, embedded by a background thread, have tests of their own (tests/api/test_recall_vectors_deferred.py).
POWERCONTEXT_EMBEDDINGS = {**POWERCONTEXT_EMBEDDINGS, "write": "inline"}  # noqa: F405

# On PostgreSQL a test blocked on a lock (a writer whose row locking was lost, a flush behind a stuck
# thread) fails within a minute with "canceling statement due to lock timeout" instead of hanging the run.
# Not through PgBouncer: it refuses the "options" startup parameter, and transaction pooling could not keep
# session settings anyway (its runner bounds the run's time instead).
if DATABASES["default"]["ENGINE"].endswith("postgresql") and os.environ.get("POWERCONTEXT_PGBOUNCER") != "transaction":  # noqa: F405
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c lock_timeout=60s -c statement_timeout=120s"  # noqa: F405

# Read replicas (tests/api/test_read_replicas.py): on PostgreSQL one alias, "replica", a second connection to
# the test database (a test mirror), routed to only where a test names it in POWERCONTEXT_READ_REPLICAS. It
# sees committed rows only: a test's own open transaction is exactly a write the replica has not replayed.
# Replicas of the environment are left out, so the suite runs the same with POWERCONTEXT_READ_REPLICA_URLS set.
for _alias in POWERCONTEXT_READ_REPLICAS:  # noqa: F405
    del DATABASES[_alias]  # noqa: F405
POWERCONTEXT_READ_REPLICAS = []
DATABASE_ROUTERS = []
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["replica"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}  # noqa: F405
    DATABASE_ROUTERS = ["infrastructure.replicas.ReplicaRouter"]
