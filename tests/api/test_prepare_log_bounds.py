"""The prepare log's bounds: long queries kept as a hash, the hash-only mode, and the total size cap."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from artifacts.models import PrepareLog
from assembly.replay import prepare_replay
from tests.api.factories import add_memory, add_topic, make_key, make_scope, prepare
from vocabulary.text import sha256_text

pytestmark = pytest.mark.django_db

# 8,192 characters, 24,576 UTF-8 bytes of CJK: what made a log row ~25 KB.
CJK_QUERY = "alpha " + "漢字検索" * 2046 + "ab"
SECTIONS = {"sections": [{"family": "topic_memory", "limit": 2}, {"family": "memory", "limit": 2}]}


@pytest.fixture
def key():
    demo = make_scope("project:demo")
    add_memory(demo, {"m1": "alpha release notes", "m2": "alpha 漢字 deploy steps"})
    add_topic(demo, "topic-1", title="Alpha", summary="About alpha", body="intro\nthe alpha detail line\nmore\n")
    add_topic(demo, "topic-2", title="Other", summary="alpha elsewhere", body="nothing shared here\n")
    return make_key(read=[demo])


def _logged(client, key, query: str) -> tuple[PrepareLog, str]:
    response = prepare(client, key, query=query, max_bytes=4000, assembly=SECTIONS)
    assert response.status_code == 200
    return PrepareLog.objects.order_by("-id").first(), response.json()["content"]


def test_a_query_over_the_budget_keeps_its_hash_and_size_and_still_replays_exactly(client, key):
    assert len(CJK_QUERY) == 8192
    log, content = _logged(client, key, CJK_QUERY)
    assert "Match: the alpha detail line" in content
    assert log.query == ""
    assert (log.query_bytes, log.query_sha256) == (len(CJK_QUERY.encode()), sha256_text(CJK_QUERY))
    assert log.stored_bytes < 1024
    replay = prepare_replay(log=log)
    assert replay.matches, replay.problems
    assert replay.result.content == content


def test_a_query_within_the_budget_is_kept_as_text(client, key, settings):
    settings.POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES = 1024
    log, content = _logged(client, key, "alpha 漢字")
    assert (log.query, log.query_bytes, log.query_sha256) == ("alpha 漢字", 12, sha256_text("alpha 漢字"))
    assert "topic_shown" not in log.record
    assert prepare_replay(log=log).result.content == content


def test_the_hash_only_mode_stores_no_query_text_and_replays_exactly(client, key, settings):
    settings.POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES = 0
    log, content = _logged(client, key, "alpha")
    assert log.query == "" and "alpha" not in log.record
    assert (log.query_bytes, log.query_sha256) == (5, sha256_text("alpha"))
    replay = prepare_replay(log=log)
    assert replay.matches, replay.problems
    assert replay.result.content == content


def test_the_admin_shows_an_entry_without_its_query_proves_its_replay_and_finds_it_by_the_query_hash(
    client, staff_client, key
):
    log, _ = _logged(client, key, CJK_QUERY)
    page = staff_client.get(reverse("admin:artifacts_preparelog_change", args=[log.pk])).content.decode()
    assert f"not kept ({len(CJK_QUERY.encode())} bytes, SHA-256 {sha256_text(CJK_QUERY)})" in page
    assert "漢字検索" not in page
    assert "equals the logged one" in page and "ALARM" not in page
    found = staff_client.get(reverse("admin:artifacts_preparelog_changelist"), {"q": sha256_text(CJK_QUERY)})
    assert "1 prepare log entry" in found.content.decode()


def test_the_purge_keeps_the_newest_entries_within_the_size_cap(client, key, settings):
    for _ in range(5):
        _logged(client, key, "alpha")
    ids = list(PrepareLog.objects.order_by("id").values_list("pk", flat=True))
    # Five rows of 300 KB each (as if each carried a large record) against a 1 MB cap: the newest three fit.
    PrepareLog.objects.update(stored_bytes=300 * 1024)
    settings.POWERCONTEXT_PREPARE_LOG_MAX_MB = 1
    out = StringIO()
    call_command("purge_prepare_log", "--batch", "1", stdout=out, stderr=StringIO())
    assert out.getvalue().strip() == "2 prepare log entries purged"
    assert list(PrepareLog.objects.order_by("id").values_list("pk", flat=True)) == ids[2:]
    settings.POWERCONTEXT_PREPARE_LOG_MAX_MB = 0
    call_command("purge_prepare_log", stdout=StringIO(), stderr=StringIO())
    assert PrepareLog.objects.count() == 3
