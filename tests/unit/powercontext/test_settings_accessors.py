"""Each area's settings accessor (infrastructure/conf.py; issue 53, item 2): a bad value is a system check error naming
its environment variable, and an override through the ``settings`` fixture is what the accessor reads."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from artifacts.conf import idempotency_settings, prepare_log_settings
from artifacts.recall.conf import embeddings_settings, recall_settings
from assembly.conf import assembly_settings
from infrastructure import conf
from infrastructure.admin_conf import admin_settings
from infrastructure.database_conf import database_settings
from infrastructure.metrics_conf import metrics_settings
from infrastructure.replicas.conf import replica_settings

# (the Django setting, a bad value, the environment variable the error names, the check's id)
BAD_VALUES = [
    ("POWERCONTEXT_RECALL_MODE", "semantic", "POWERCONTEXT_RECALL_MODE", "powercontext.E010"),
    ("POWERCONTEXT_RECALL_FUSION", ["bge-m3"], "POWERCONTEXT_RECALL_FUSION", "powercontext.E010"),
    ("POWERCONTEXT_RESIDENT_MEMORY_MB", -1, "POWERCONTEXT_RESIDENT_MEMORY_MB", "powercontext.E010"),
    ("POWERCONTEXT_RESIDENT_PAIR_POSTINGS", "many", "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", "powercontext.E010"),
    ("POWERCONTEXT_RESIDENT_VECTORS_MB", None, "POWERCONTEXT_RESIDENT_VECTORS_MB", "powercontext.E010"),
    (
        "POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM",
        2.5,
        "POWERCONTEXT_RESIDENT_VECTORS_QUANTIZED_FROM",
        "powercontext.E010",
    ),
    ("POWERCONTEXT_SEARCH_INDEX_DIR", 3, "POWERCONTEXT_SEARCH_INDEX_DIR", "powercontext.E010"),
    ("POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS", 0, "POWERCONTEXT_SEARCH_INDEX_MIN_DOCUMENTS", "powercontext.E010"),
    ("POWERCONTEXT_SEARCH_INDEX_MAX_LAG", True, "POWERCONTEXT_SEARCH_INDEX_MAX_LAG", "powercontext.E010"),
    ("POWERCONTEXT_READ_REPLICAS", "replica_1", "POWERCONTEXT_READ_REPLICA_URLS", "powercontext.E020"),
    ("POWERCONTEXT_REPLICA_MAX_LAG_SECONDS", 0, "POWERCONTEXT_REPLICA_MAX_LAG_SECONDS", "powercontext.E020"),
    ("POWERCONTEXT_REPLICA_SKIP_SECONDS", -1, "POWERCONTEXT_REPLICA_SKIP_SECONDS", "powercontext.E020"),
    ("POWERCONTEXT_PREPARE_ON_REPLICAS", "yes", "POWERCONTEXT_PREPARE_ON_REPLICAS", "powercontext.E020"),
    ("POWERCONTEXT_REPLICA_HEALTH_DIR", 1.5, "POWERCONTEXT_REPLICA_HEALTH_DIR", "powercontext.E020"),
    ("POWERCONTEXT_EMBEDDINGS", "packaged", "POWERCONTEXT_EMBEDDINGS", "powercontext.E040"),
    ("POWERCONTEXT_PREPARE_LOG", "off", "POWERCONTEXT_PREPARE_LOG", "powercontext.E030"),
    ("POWERCONTEXT_METRICS_TOKEN", 1234, "POWERCONTEXT_METRICS_TOKEN", "powercontext.E050"),
    ("POWERCONTEXT_METRICS_LOOPBACK", "true", "POWERCONTEXT_METRICS_LOOPBACK", "powercontext.E050"),
    ("POWERCONTEXT_JSON_LOGS", 1, "POWERCONTEXT_JSON_LOGS", "powercontext.E050"),
    ("POWERCONTEXT_TRUSTED_PROXIES", -1, "POWERCONTEXT_TRUSTED_PROXIES", "powercontext.E060"),
    ("AXES_FAILURE_LIMIT", 0, "POWERCONTEXT_ADMIN_LOGIN_FAILURE_LIMIT", "powercontext.E060"),
    ("AXES_COOLOFF_TIME", 15, "POWERCONTEXT_ADMIN_LOGIN_COOLOFF_MINUTES", "powercontext.E060"),
    ("POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS", 0, "POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS", "powercontext.E080"),
    (
        "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES",
        0,
        "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES",
        "powercontext.E090",
    ),
    ("POWERCONTEXT_RECALL_SOURCES", {"memory": 3}, "POWERCONTEXT_RECALL_SOURCES", "powercontext.E090"),
    ("POWERCONTEXT_MEMORY_RERANKER", ["a.b"], "POWERCONTEXT_MEMORY_RERANKER", "powercontext.E090"),
    ("POWERCONTEXT_DB_RETRY_DELAY_MS", -2, "POWERCONTEXT_DB_RETRY_DELAY_MS", "powercontext.E070"),
    ("POWERCONTEXT_DB_REQUIRE_STANDBY", "on", "POWERCONTEXT_DB_REQUIRE_STANDBY", "powercontext.E070"),
    ("POWERCONTEXT_PREPARE_LOG_WRITER", "sometimes", "POWERCONTEXT_PREPARE_LOG_WRITER", "powercontext.E030"),
    ("POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS", 0, "POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS", "powercontext.E030"),
    ("POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES", -1, "POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES", "powercontext.E030"),
    ("POWERCONTEXT_PREPARE_LOG_MAX_MB", "2G", "POWERCONTEXT_PREPARE_LOG_MAX_MB", "powercontext.E030"),
]

# POWERCONTEXT_EMBEDDINGS's options: (the key, a bad value); the error names POWERCONTEXT_EMBEDDINGS_<KEY>
BAD_EMBEDDINGS = [
    ("provider", "openai"),
    ("url", 8080),
    ("model", ["e5"]),
    ("api_key", 1),
    ("dimension", -1),
    ("batch_size", 0),
    ("timeout", 0),
    ("write_wait", 601),
    ("write", "later"),
    ("query_prefix", None),
    ("passage_prefix", b"passage: "),
    ("input_type", "yes"),
    ("threads", 1.5),
    ("query_timeout", "soon"),
    ("query_cache", -1),
]

# (the accessor, a setting it reads, a good value other than the default, the field it fills)
OVERRIDES = [
    (recall_settings, "POWERCONTEXT_RECALL_MODE", "lexical", "mode", "lexical"),
    (recall_settings, "POWERCONTEXT_RESIDENT_PAIR_POSTINGS", 7, "resident_pair_postings", 7),
    (recall_settings, "POWERCONTEXT_SEARCH_INDEX_DIR", None, "search_index_dir", ""),
    (replica_settings, "POWERCONTEXT_READ_REPLICAS", ["replica_1"], "aliases", ("replica_1",)),
    (replica_settings, "POWERCONTEXT_REPLICA_SKIP_SECONDS", 0, "skip_seconds", 0),
    (replica_settings, "POWERCONTEXT_PREPARE_ON_REPLICAS", True, "prepare_on_replicas", True),
    (embeddings_settings, "POWERCONTEXT_EMBEDDINGS", {"provider": "off"}, "provider", "off"),
    (embeddings_settings, "POWERCONTEXT_EMBEDDINGS", {"query_cache": 0}, "query_cache", 0),
    (prepare_log_settings, "POWERCONTEXT_PREPARE_LOG", False, "enabled", False),
    (metrics_settings, "POWERCONTEXT_METRICS_TOKEN", "metrics-token", "token", "metrics-token"),
    (metrics_settings, "POWERCONTEXT_JSON_LOGS", True, "json_logs", True),
    (admin_settings, "POWERCONTEXT_TRUSTED_PROXIES", 1, "trusted_proxies", 1),
    (admin_settings, "AXES_FAILURE_LIMIT", 3, "login_failure_limit", 3),
    (database_settings, "POWERCONTEXT_DB_RETRY_DELAY_MS", -1, "retry_delay_ms", -1),
    (idempotency_settings, "POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS", 1, "retention_hours", 1),
    (assembly_settings, "POWERCONTEXT_SERVER_RUNTIME_CONTEXT_ASSEMBLY_MAX_ENTRIES", 5, "max_entries", 5),
    (assembly_settings, "POWERCONTEXT_MEMORY_RERANKER", "a.b", "memory_reranker", "a.b"),
    (database_settings, "POWERCONTEXT_DB_REQUIRE_STANDBY", True, "require_standby", True),
    (prepare_log_settings, "POWERCONTEXT_PREPARE_LOG_WRITER", "inline", "writer", "inline"),
    (prepare_log_settings, "POWERCONTEXT_PREPARE_LOG_MAX_MB", 0, "max_mb", 0),
]


def _ids(rows: list[tuple]) -> list[str]:
    return [row[0] if isinstance(row[0], str) else row[1] for row in rows]


@pytest.mark.parametrize(("setting", "value", "variable", "check_id"), BAD_VALUES, ids=_ids(BAD_VALUES))
def test_a_bad_value_is_a_check_error_naming_the_variable(settings, setting, value, variable, check_id):
    setattr(settings, setting, value)

    errors = [m for m in checks.run_checks(tags=[conf.SETTINGS_TAG]) if m.is_serious()]

    assert [(m.id, m.msg.split()[0]) for m in errors] == [(check_id, variable)]
    assert repr(value) in errors[0].msg
    with pytest.raises(SystemCheckError, match=variable):
        call_command("check")


@pytest.mark.parametrize(("key", "value"), BAD_EMBEDDINGS, ids=[key for key, _ in BAD_EMBEDDINGS])
def test_a_bad_embeddings_option_is_a_check_error_naming_its_variable(settings, key, value):
    settings.POWERCONTEXT_EMBEDDINGS = {**settings.POWERCONTEXT_EMBEDDINGS, key: value}

    errors = [m for m in checks.run_checks(tags=[conf.SETTINGS_TAG]) if m.is_serious()]

    assert [(m.id, m.msg.split()[0]) for m in errors] == [
        ("powercontext.E040", f"POWERCONTEXT_EMBEDDINGS_{key.upper()}")
    ]


def test_a_bad_fusion_entry_is_a_check_error_naming_the_model_and_parameter(settings):
    settings.POWERCONTEXT_RECALL_FUSION = {"bge-m3": {"dense": 0.6}}

    errors = [m for m in checks.run_checks(tags=[conf.SETTINGS_TAG]) if m.is_serious()]

    assert [m.id for m in errors] == ["powercontext.E011"]
    assert errors[0].msg.startswith("POWERCONTEXT_RECALL_FUSION: 'bge-m3': unknown parameter 'dense'")
    with pytest.raises(SystemCheckError, match="POWERCONTEXT_RECALL_FUSION"):
        call_command("check")


def test_good_settings_give_no_check_error():
    assert checks.run_checks(tags=[conf.SETTINGS_TAG]) == []


def test_an_entry_point_without_checks_refuses_a_bad_value(settings):
    """What powercontext/wsgi.py runs before gunicorn serves."""
    settings.POWERCONTEXT_RECALL_MODE = "semantic"

    with pytest.raises(ImproperlyConfigured, match="powercontext.E010: POWERCONTEXT_RECALL_MODE must be one of"):
        conf.refuse_bad_settings()


@pytest.mark.parametrize(("accessor", "setting", "value", "field", "seen"), OVERRIDES, ids=_ids(OVERRIDES))
def test_an_override_through_the_settings_fixture_is_seen_by_the_accessor(
    settings, accessor, setting, value, field, seen
):
    before = accessor()
    setattr(settings, setting, value)

    assert getattr(accessor(), field) == seen
    assert accessor() is accessor()  # read once, then kept
    assert accessor() is not before


def test_the_accessor_is_read_anew_once_the_override_ends():
    default = recall_settings().mode
    from django.test import override_settings

    with override_settings(POWERCONTEXT_RECALL_MODE="lexical" if default == "hybrid" else "hybrid"):
        assert recall_settings().mode != default
    assert recall_settings().mode == default


def test_an_accessor_read_with_a_bad_value_raises_naming_the_variable(settings):
    settings.POWERCONTEXT_RESIDENT_MEMORY_MB = "lots"

    with pytest.raises(ImproperlyConfigured, match="POWERCONTEXT_RESIDENT_MEMORY_MB must be a number"):
        recall_settings()


def test_a_setting_changed_at_run_time_through_setting_set_is_seen(settings):
    """What the benchmarks do (``bench/``): a plain ``settings.X = …`` sends no setting_changed."""
    settings.POWERCONTEXT_RECALL_MODE = "hybrid"  # the fixture restores it, and says so, at the end
    assert recall_settings().mode == "hybrid"

    conf.setting_set("POWERCONTEXT_RECALL_MODE", "lexical")

    assert recall_settings().mode == "lexical"
