"""Hostile query strings and posts in the admin: what Django answers to invalid input, never a 500.

A filter value that cannot be a lookup (a NUL character, which PostgreSQL refuses; a date beyond ``datetime``)
sends the operator to the unfiltered list (``?e=1``) as Django does for its other invalid lookups; an autocomplete
term with a NUL matches nothing; an action posted with a selection that is no id changes nothing.
"""

from urllib.parse import quote

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from artifacts import services
from artifacts.admin.guards import GuardedAdmin
from artifacts.models import ApiKey, ArtifactRevision, PrepareLog, Scope
from tests.api.factories import make_key_object, make_scope, prepare

pytestmark = pytest.mark.django_db
AUTOCOMPLETE_URL = "/admin/autocomplete/"


@pytest.fixture
def operator(db):
    """A superuser's client that answers a server error as a response (so the test can say which URL gave it)."""
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator-1"))
    return client


@pytest.fixture
def rows(client):
    """A row on every change list: a scope with a memory, a key, a logged prepare, a pending candidate."""
    scope = make_scope("project:demo")
    services.profile_candidate_propose(scope=scope, artifact_id="profile", body="Tea.", proposed_by="host")
    api_key, key = make_key_object(read=[scope])
    prepare(client, key, query="alpha")
    return {"scope": scope, "api_key": api_key, "key": key}


def _get(client, url: str, params: dict[str, str]):
    """GET with each value sent as written (already percent-encoded where it must be)."""
    return client.get(url + "?" + "&".join(f"{quote(name)}={value}" for name, value in params.items()))


def _changelist(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def _is_invalid_lookup_answer(response, url: str) -> bool:
    return response.status_code == 302 and response["Location"] == f"{url}?e=1"


def test_every_admin_of_the_site_is_guarded():
    registered = admin.site._registry.values()
    assert [type(model_admin).__name__ for model_admin in registered if not isinstance(model_admin, GuardedAdmin)] == []


@pytest.mark.parametrize(
    "params",
    [
        {"time": "forever"},
        {"time": ""},
        {"time": "hour%00"},
        {"mode": "%00"},
        {"result_status": "legacy%00"},
    ],
    ids=lambda params: "&".join(f"{k}={v}" for k, v in params.items()),
)
def test_a_prepare_log_filter_beyond_what_can_be_looked_up_is_an_invalid_lookup(operator, rows, params):
    url = _changelist(PrepareLog)
    assert _is_invalid_lookup_answer(_get(operator, url, params), url)
    assert operator.get(f"{url}?e=1").status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"created_at__year": "2026"},
        {"created_at__year": "99999999999"},
        {"created_at__year": "2026", "created_at__month": "99999999999"},
        {"created_at__gte": "2026-01-01"},
        {"time__year": "2026"},
    ],
    ids=lambda params: "&".join(f"{k}={v}" for k, v in params.items()),
)
def test_a_date_part_of_the_prepare_log_is_no_filter_of_its_page(operator, rows, params):
    # The time filter's one parameter is its own; a lookup on the logged time (a date drill-down) is refused (400).
    assert _get(operator, _changelist(PrepareLog), params).status_code == 400


def test_the_time_filter_still_filters(operator, rows):
    url = _changelist(PrepareLog)
    assert "1 prepare log entry" in operator.get(url, {"time": "hour"}).content.decode()


def _filter_parameters(client, model) -> set[str]:
    """Every query parameter the change list's filters read, and each filtered field's bare name."""
    response = client.get(_changelist(model))
    assert response.status_code == 200, model
    names = set()
    for spec in response.context["cl"].filter_specs:
        for parameter in spec.expected_parameters():
            names |= {parameter, parameter.split("__")[0]}
    return names


@pytest.mark.parametrize("value", ["%00", "a%00b"])
def test_a_nul_character_in_any_filter_of_any_change_list_is_an_invalid_lookup(operator, rows, value):
    checked = 0
    for model in admin.site._registry:
        url = _changelist(model)
        for name in _filter_parameters(operator, model):
            response = _get(operator, url, {name: value})
            assert _is_invalid_lookup_answer(response, url), (url, name, response.status_code)
            checked += 1
    assert checked >= 20  # the families, statuses, modes, keys, scopes and the user flags, at least


@pytest.mark.parametrize("url_params", [{"family": "%00"}, {"family__exact": "memory%00"}], ids=["family", "exact"])
def test_the_artifact_family_filter_with_a_nul_is_an_invalid_lookup(operator, rows, url_params):
    url = reverse("admin:artifacts_artifact_changelist")
    assert _is_invalid_lookup_answer(_get(operator, url, url_params), url)


def test_a_search_with_a_nul_is_refused_by_the_search_form(operator, rows):
    response = _get(operator, _changelist(PrepareLog), {"q": "alpha%00"})
    assert response.status_code == 200
    assert "Null characters are not allowed." in response.content.decode()


@pytest.mark.parametrize("term", ["%00", "project%00demo"])
@pytest.mark.parametrize("source", [("contextreference", "target"), ("apikeygrant", "scope")])
def test_an_autocomplete_term_with_a_nul_matches_nothing(operator, rows, term, source):
    model_name, field_name = source
    params = {"app_label": "artifacts", "model_name": model_name, "field_name": field_name}
    found = operator.get(AUTOCOMPLETE_URL, {**params, "term": "project"})
    assert [result["text"] for result in found.json()["results"]] == ["project:demo"]
    response = _get(operator, AUTOCOMPLETE_URL, {**params, "term": term})
    assert response.status_code == 200
    assert response.json() == {"results": [], "pagination": {"more": False}}


@pytest.mark.parametrize("selected", ["%00", "99999999999999999999", "-99999999999999999999", "one"])
def test_an_action_posted_with_a_selection_that_is_no_id_changes_nothing(operator, client, rows, selected):
    url = reverse("admin:artifacts_apikey_changelist")
    body = f"action=revoke_keys&index=0&_selected_action={rows['api_key'].pk}&_selected_action={selected}"
    response = operator.post(url, data=body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302
    assert "No items have been changed" in operator.get(response["Location"]).content.decode()
    assert ApiKey.objects.get(pk=rows["api_key"].pk).revoked_at is None
    assert prepare(client, rows["key"], query="alpha").status_code == 200


@pytest.mark.parametrize("model", [Scope, ApiKey, get_user_model()], ids=lambda model: model.__name__)
def test_delete_selected_with_a_selection_that_is_no_id_changes_nothing(operator, rows, model):
    before = model.objects.count()
    body = f"action=delete_selected&index=0&_selected_action={model.objects.first().pk}&_selected_action=%00"
    response = operator.post(_changelist(model), data=body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302
    assert model.objects.count() == before


@pytest.mark.parametrize(
    ("model", "lookup"),
    [(ArtifactRevision, "body__regex"), (PrepareLog, "query__iregex"), (Scope, "scope_id__regex")],
    ids=["revision body", "logged query", "scope id"],
)
def test_a_regular_expression_in_a_change_list_url_is_refused_before_it_reaches_the_database(
    operator, rows, model, lookup
):
    # An invalid pattern was a 500, a backtracking one held the worker for minutes (SQLite runs it in Python).
    response = operator.get(_changelist(model), {lookup: "^(a+)+$["})
    assert response.status_code == 400


# --- autocomplete fields posted with an id that is no id ----------------------------------------------------------


def _inline_form(prefix: str, field: str, value: str) -> dict:
    return {
        f"{prefix}-TOTAL_FORMS": "1",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
        f"{prefix}-0-{field}": value,
    }


@pytest.mark.parametrize("value", ["abc", "99999999999999999999999", "-99999999999999999999999", "1%00"])
@pytest.mark.parametrize("page", ["scope-add", "scope-change", "key-change"])
def test_an_inline_autocomplete_posted_with_no_id_shows_the_form_again_with_its_error(operator, rows, page, value):
    # Django redraws the autocomplete with the posted id looked up as it is: text or an overflowing number was a 500.
    value = value.replace("%00", "\x00")
    if page == "key-change":
        url = reverse("admin:artifacts_apikey_change", args=[rows["api_key"].pk])
        form = {"name": rows["api_key"].name, **_inline_form("grants", "scope", value), "grants-0-can_read": "on"}
    else:
        url = reverse("admin:artifacts_scope_add") if page == "scope-add" else None
        url = url or reverse("admin:artifacts_scope_change", args=[rows["scope"].pk])
        form = {"scope_id": "project:new", "title": "New", **_inline_form("references", "target", value)}
        form["references-0-position"] = "1"
    before = (Scope.objects.count(), ApiKey.objects.get(pk=rows["api_key"].pk).grants.count())
    response = operator.post(url, form)
    assert response.status_code == 200, response.content[:300]
    assert "<title>Error: " in response.content.decode()  # the form again, its error said
    assert (Scope.objects.count(), ApiKey.objects.get(pk=rows["api_key"].pk).grants.count()) == before


# --- pages only some staff may see: the permission before the row ------------------------------------------------


@pytest.mark.parametrize("view", ["change", "delete", "history"])
@pytest.mark.parametrize("model", [Scope, ApiKey, PrepareLog, get_user_model()], ids=lambda model: model.__name__)
def test_a_row_page_refuses_staff_without_the_permission_alike_whether_the_row_exists_or_not(rows, model, view):
    # Django read the row first: its history page redirected a missing id ("doesn't exist") and refused an existing
    # one, and every page read more for a row that exists.
    staff = get_user_model().objects.create_user("plain", "plain@example.com", "pw-plain-1", is_staff=True)
    client = Client()
    client.force_login(staff)
    existing = model.objects.order_by("pk").first().pk
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}"
    answers = []
    for pk in (existing, existing + 10_000):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse(name, args=[pk]))
        answers.append((response.status_code, response.content, len(queries)))
    assert answers[0][0] == 403
    assert answers[0] == answers[1]


def test_the_history_page_still_opens_for_staff_who_may_view_the_row(operator, rows):
    response = operator.get(reverse("admin:artifacts_scope_history", args=[rows["scope"].pk]))
    assert response.status_code == 200


@pytest.mark.parametrize("object_id", ["1", "99999999999999999999999", "abc"])
def test_the_view_on_site_redirect_is_not_served(operator, rows, object_id):
    # No model here has a URL of its own; Django's redirect read any row by id for any staff member, and overflowed
    # on a model whose key is a one-to-one field (a 500).
    from django.contrib.contenttypes.models import ContentType

    for content_type in ContentType.objects.order_by("pk"):
        response = operator.get(f"/admin/r/{content_type.pk}/{object_id}/")
        assert response.status_code == 404, (content_type, response.status_code)
        assert response.json()["error"]["code"] == "not_found"
