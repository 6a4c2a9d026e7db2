"""The growing tables' change lists cost the same whatever is stored: the count reads at most a cap of rows
(``SELECT COUNT(*) FROM (SELECT ... LIMIT cap + 1)``) and says "N+" past it, the unfiltered table is never counted,
and nothing reads the table's dates; the prepare log narrows by time with fixed periods."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts.admin.paging import CHANGE_LIST_COUNT_CAP, CappedPaginator
from artifacts.models import ArtifactRevision, MemoryEntryVersion, PrepareLog
from tests.api.factories import add_memory, make_scope
from tests.api.test_admin import _changelist_rows
from tests.api.test_admin_filters import _logged_ago as _log_rows

pytestmark = pytest.mark.django_db

LOG = reverse("admin:artifacts_preparelog_changelist")
TABLES = {
    "preparelog": PrepareLog._meta.db_table,
    "artifactrevision": ArtifactRevision._meta.db_table,
    "memoryentryversion": MemoryEntryVersion._meta.db_table,
}


def _statements(client, url: str, params: dict | None = None) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params or {})
    assert response.status_code == 200
    return [query["sql"] for query in queries.captured_queries]


def _reads_the_whole_table(sql: str, table: str) -> bool:
    """A statement over ``table`` that counts it without a LIMIT, or lists its distinct values."""
    if f'"{table}"' not in sql:
        return False
    counts = "COUNT(" in sql.upper()
    return sql.upper().startswith("SELECT DISTINCT") or (counts and "LIMIT" not in sql.upper())


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="unfiltered"),
        pytest.param({"time": "7d"}, id="last-7-days"),
        pytest.param({"http_status": "200", "q": "tenant"}, id="by-status-and-searched"),
        pytest.param({"p": "2"}, id="second-page"),
        pytest.param({"_facets": ""}, id="facets-asked"),  # no "Show counts": each would count the filtered log
    ],
)
def test_the_prepare_log_list_runs_the_same_bounded_statements_with_one_row_or_three_hundred(staff_client, params):
    _log_rows(*[timedelta(minutes=1)] * 101)  # two pages, so that the second page is one
    _statements(staff_client, LOG, params)  # the session and the user, as on any later request
    few = _statements(staff_client, LOG, params)
    _log_rows(*[timedelta(minutes=2)] * 199)
    many = _statements(staff_client, LOG, params)
    assert len(many) == len(few)
    table = TABLES["preparelog"]
    assert [sql for sql in many if _reads_the_whole_table(sql, table)] == []
    [count] = [sql for sql in many if f'"{table}"' in sql and "COUNT(" in sql.upper()]
    assert f"LIMIT {CHANGE_LIST_COUNT_CAP + 1}" in count  # the capped subquery: one count, at most cap + 1 rows


@pytest.mark.parametrize("model", ["artifactrevision", "memoryentryversion"], ids=lambda model: f"{model}-list")
def test_the_revision_and_entry_version_lists_count_at_most_the_cap(staff_client, model):
    url = reverse(f"admin:artifacts_{model}_changelist")
    scope = make_scope("project:paging")
    add_memory(scope, {"m1": "alpha"})
    _statements(staff_client, url)
    few = _statements(staff_client, url)
    add_memory(scope, {f"m{number}": "beta" for number in range(2, 40)}, artifact_id="other")
    many = _statements(staff_client, url)
    assert len(many) == len(few)
    table = TABLES[model]
    assert [sql for sql in many if _reads_the_whole_table(sql, table)] == []
    assert any(f"LIMIT {CHANGE_LIST_COUNT_CAP + 1}" in sql for sql in many if "COUNT(" in sql.upper())


def test_past_the_cap_the_count_says_so_and_the_list_shows_one_page(staff_client, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 5)
    _log_rows(*[timedelta(minutes=minutes) for minutes in range(8)])
    for params in ({}, {"all": ""}):
        response = staff_client.get(LOG, params)
        page = response.content.decode()
        assert "5+ prepare log entries" in page and "8 prepare log" not in page
        assert response.context["cl"].result_count == 5 and response.context["cl"].paginator.capped
        assert len(_changelist_rows(page)) == 5, params  # never every row: "Show all" is not offered past the cap
        assert 'class="showall"' not in page
        assert "5 results" not in page  # the search bar does not repeat the capped count as a number


def test_up_to_the_cap_the_count_is_exact(staff_client, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 5)
    _log_rows(*[timedelta(minutes=minutes) for minutes in range(5)])
    page = staff_client.get(LOG).content.decode()
    assert "5 prepare log entries" in page and "5+" not in page
    assert len(_changelist_rows(page)) == 5


def test_a_page_past_the_cap_is_an_invalid_lookup(staff_client, monkeypatch):
    monkeypatch.setattr(CappedPaginator, "cap", 5)
    _log_rows(*[timedelta(minutes=minutes) for minutes in range(8)])
    response = staff_client.get(LOG, {"p": "2"})
    assert response.status_code == 302 and response["Location"] == f"{LOG}?e=1"
