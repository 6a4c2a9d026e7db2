"""The change lists' filters cost the same whatever is stored: the prepare log's statuses and modes come from the
code's vocabulary, keys and scopes from a bounded read of their tables; never a DISTINCT over the log, never a list
of every scope."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from artifacts.admin.filters import RELATED_FILTER_CHOICES, RecentListFilter
from artifacts.models import ApiKey, PrepareLog, Scope
from assembly.api.views import PREPARE_ERROR_STATUSES
from assembly.replay import MODES
from assembly.types import RESULT_STATUSES
from tests.api.factories import add_memory, make_scope

pytestmark = pytest.mark.django_db

LOG = reverse("admin:artifacts_preparelog_changelist")


def _log_rows(count: int, *, start: int = 0) -> None:
    """``count`` log rows, each with its own key, scope, status, mode and result status (none of them a real one)."""
    numbers = range(start, start + count)
    scopes = Scope.objects.bulk_create(Scope(scope_id=f"tenant:{number}") for number in numbers)
    keys = ApiKey.objects.bulk_create(
        ApiKey(name=f"tenant-key-{number}", key_prefix="pc_tenant", key_sha256=f"{number:064x}") for number in numbers
    )
    PrepareLog.objects.bulk_create(
        PrepareLog(
            api_key=key,
            scope=scope,
            scope_sent=scope.scope_id,
            http_status=200 + number,
            mode=f"mode-{number}",
            result_status=f"status-{number}",
        )
        for number, key, scope in zip(numbers, keys, scopes, strict=True)
    )


def _logged_ago(*ages: timedelta) -> None:
    """A logged prepare created each ``age`` ago (inserted as logged, never updated: the log is immutable)."""
    scope = Scope.objects.get_or_create(scope_id="tenant:ago")[0]
    key = ApiKey.objects.get_or_create(name="ago-key", key_prefix="pc_ago", key_sha256="1" * 64)[0]
    now = timezone.now()
    PrepareLog.objects.bulk_create(
        PrepareLog(api_key=key, scope=scope, scope_sent=scope.scope_id, http_status=200, created_at=now - age)
        for age in ages
    )


def _statements(client, url: str, params: dict | None = None) -> tuple[int, list[str]]:
    """The statements the page ran (no filter's DISTINCT over the prepare log) and its filters' choices."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params or {})
    assert response.status_code == 200
    for sql in (query["sql"] for query in queries.captured_queries):
        if sql.startswith("SELECT DISTINCT"):
            assert f'"{PrepareLog._meta.db_table}"' not in sql, sql
    choices = [
        f"{spec.title}: {choice['display']}"
        for spec in response.context["cl"].filter_specs
        for choice in spec.choices(response.context["cl"])
    ]
    return len(queries.captured_queries), choices


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="unfiltered"),
        pytest.param({"http_status": "404", "mode": "legacy", "result_status": "ready"}, id="by-vocabulary"),
        pytest.param({"api_key__id__exact": "CHOSEN_KEY"}, id="by-a-key"),
        pytest.param({"scope__id__exact": "CHOSEN_SCOPE", "q": "tenant"}, id="by-a-scope-and-searched"),
    ],
)
def test_the_prepare_log_list_runs_the_same_statements_with_one_row_or_two_hundred(staff_client, params):
    _log_rows(1)
    chosen = {"CHOSEN_KEY": "api_key", "CHOSEN_SCOPE": "scope"}
    last_key, last_scope = ApiKey.objects.get(), Scope.objects.get()
    params = {
        name: str({"CHOSEN_KEY": last_key, "CHOSEN_SCOPE": last_scope}[value].pk) if value in chosen else value
        for name, value in params.items()
    }
    _statements(staff_client, LOG, params)  # the session and the user, as on any later request
    few, few_choices = _statements(staff_client, LOG, params)
    _log_rows(199, start=1)
    many, many_choices = _statements(staff_client, LOG, params)
    assert many == few
    statuses = [choice for choice in many_choices if choice.startswith("http status: ")]
    assert statuses == ["http status: All"] + [f"http status: {s}" for s in (200, *PREPARE_ERROR_STATUSES, 500)]
    assert [c for c in many_choices if c.startswith("mode: ")] == ["mode: All", *(f"mode: {m}" for m in MODES)]
    results = [c for c in many_choices if c.startswith("result status: ")]
    assert results == ["result status: All", *(f"result status: {s}" for s in RESULT_STATUSES)]
    keys = [choice for choice in many_choices if choice.startswith("api key (the first 20; search for others): ")]
    assert len(keys) == 1 + RELATED_FILTER_CHOICES + 1  # All, the first keys by name, (None)
    assert len(few_choices) < len(many_choices)  # one key and scope listed before, the first twenty after


def test_a_chosen_key_beyond_the_first_listed_is_listed_and_selected(staff_client):
    _log_rows(30)
    chosen = ApiKey.objects.order_by("-name").first()  # listed by name: tenant-key-9 comes after tenant-key-29
    response = staff_client.get(LOG, {"api_key__id__exact": chosen.pk})
    assert "1 prepare log entry" in response.content.decode()
    [spec] = [spec for spec in response.context["cl"].filter_specs if spec.field_path == "api_key"]
    assert spec.title == f"api key (the first {RELATED_FILTER_CHOICES}; search for others)"
    selected = [choice["display"] for choice in spec.choices(response.context["cl"]) if choice["selected"]]
    assert selected == [str(chosen)]


def test_staff_who_may_not_view_keys_or_scopes_are_not_shown_them_by_the_log_filters(client):
    # The filters list rows of the key and scope tables, not of the log: staff who may read the log but not those
    # tables would otherwise learn every key's name and every scope's id (by the first rows, or by id in the URL).
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    _log_rows(1)
    hidden_scope = Scope.objects.create(scope_id="hidden:scope")
    hidden_key = ApiKey.objects.create(name="hidden-key-name", key_prefix="pc_hidden", key_sha256="2" * 64)
    user = get_user_model().objects.create_user("log-reader", password="pw-log-reader-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(content_type__app_label="artifacts", codename="view_preparelog"))
    client.force_login(user)
    for params in ({}, {"api_key__id__exact": hidden_key.pk}, {"scope__id__exact": hidden_scope.pk}):
        response = client.get(LOG, params)
        assert response.status_code == 200, params
        page = response.content.decode()
        assert "hidden-key-name" not in page, params
        assert "hidden:scope" not in page, params
    [spec] = [spec for spec in response.context["cl"].filter_specs if spec.field_path == "scope"]
    assert [c["display"] for c in spec.choices(response.context["cl"]) if c["selected"]] == [f"id {hidden_scope.pk}"]
    # With the tables' view permissions, the same filters list them.
    for model in ("apikey", "scope"):
        user.user_permissions.add(Permission.objects.get(content_type__app_label="artifacts", codename=f"view_{model}"))
    client.force_login(get_user_model().objects.get(pk=user.pk))
    page = client.get(LOG).content.decode()
    assert "hidden-key-name" in page
    assert "hidden:scope" in page


def test_a_filter_value_that_is_no_id_chooses_nothing_listed_and_is_an_invalid_lookup(staff_client):
    _log_rows(1)
    for value in ("abc", "9" * 30, "-1"):
        response = staff_client.get(LOG, {"scope__id__exact": value})
        assert response.status_code in (200, 302), value  # Django's answer to an invalid lookup: ?e=1


@pytest.mark.parametrize(
    "model", ["artifact", "artifactrevision", "memoryentryversion"], ids=lambda model: f"{model}-list"
)
def test_the_artifact_lists_do_not_list_every_scope(staff_client, model):
    url = reverse(f"admin:artifacts_{model}_changelist")
    add_memory(make_scope("project:first"), {"m1": "alpha"})
    _statements(staff_client, url)
    few, _ = _statements(staff_client, url)
    Scope.objects.bulk_create(Scope(scope_id=f"tenant:{number}") for number in range(300))
    many, choices = _statements(staff_client, url)
    assert many == few
    assert len([choice for choice in choices if "tenant:" in choice]) <= RELATED_FILTER_CHOICES


def test_the_time_filter_selects_the_rows_of_each_period(staff_client):
    _logged_ago(timedelta(minutes=30), timedelta(hours=3), timedelta(days=3), timedelta(days=20), timedelta(days=40))
    today = timezone.localdate()
    logged_today = sum(timezone.localtime(row.created_at).date() == today for row in PrepareLog.objects.all())
    counts = {
        period: staff_client.get(LOG, {"time": period}).context["cl"].result_count
        for period in RecentListFilter.PERIODS
    }
    assert counts == {"hour": 1, "today": logged_today, "7d": 3, "30d": 4}
    assert "5 prepare log entries" in staff_client.get(LOG).content.decode()


def test_the_time_filter_lists_its_fixed_periods_and_reads_no_dates(staff_client):
    _logged_ago(timedelta(minutes=1), timedelta(days=400))
    _statements(staff_client, LOG)
    few, choices = _statements(staff_client, LOG)
    _logged_ago(*(timedelta(days=days) for days in range(200)))
    many, _ = _statements(staff_client, LOG)
    assert many == few  # no statement per date: the periods come from the clock
    periods = [choice for choice in choices if choice.startswith("time: ")]
    assert periods == ["time: All", "time: Last hour", "time: Today", "time: Last 7 days", "time: Last 30 days"]


def test_today_starts_at_the_current_time_zones_midnight():
    now = timezone.now()
    midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    assert RecentListFilter.start("today", now) == midnight
    assert RecentListFilter.start("hour", now) == now - timedelta(hours=1)
    assert RecentListFilter.start("30d", now) == now - timedelta(days=30)
