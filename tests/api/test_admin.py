"""The operator admin: every page answers for staff; immutable rows cannot be added, changed or deleted."""

import contextlib
import html
import re
import threading
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.urls import reverse

from artifacts import services
from artifacts.admin import history as history_admin
from artifacts.models import (
    Artifact,
    ArtifactRevision,
    ContextReference,
    MemoryEntryVersion,
    ProfileCandidate,
    Scope,
)
from vocabulary.limits import MAX_SCOPE_REFERENCES

pytestmark = pytest.mark.django_db
DATE = re.compile(r"\w{3,5}\.? \d{1,2}, \d{4}, (\d{1,2}(:\d{2})? [ap]\.m\.|noon|midnight)")


@pytest.fixture
def memory_history():
    scope = services.scope_create(scope_id="project:admin", title="Admin")
    W = services.EntryVersionWrite
    services.memory_revision_create(
        scope=scope, artifact_id="memory", writes=[W("e1", "e1-v1", "<b>first</b>")], author="t"
    )
    services.memory_revision_create(scope=scope, artifact_id="memory", writes=[W("e2", "e2-v1", "second")], author="t")
    services.memory_revision_create(
        scope=scope, artifact_id="memory", writes=[W("e1", "e1-v2", "first, revised")], removals=["e2"], author="t"
    )
    services.experience_revision_create(scope=scope, artifact_id="exp", body="lesson", author="t")
    return scope


@pytest.fixture
def every_kind_of_row(memory_history):
    """memory_history plus a pending profile candidate and a read key: every change list has rows."""
    services.profile_candidate_propose(scope=memory_history, artifact_id="profile", body="Tea.", proposed_by="host")
    _, plaintext = services.api_key_create(name="reader", read_scopes=[memory_history])
    return plaintext


def _sha(artifact_id: str, revision: int) -> str:
    return ArtifactRevision.objects.get(artifact__artifact_id=artifact_id, revision=revision).content_sha256


def test_every_changelist_shows_its_rows(staff_client, every_kind_of_row):
    # Each row's cells as shown, oldest first where the admin orders so; the created_at column (last, or
    # before revoked_at) is left out.
    candidate = ProfileCandidate.objects.get().pk  # its own id: PostgreSQL does not roll sequences back
    expected = {
        # scope id, title, authority tier (unset: the default), references in order (none), artifacts
        "scope": [["project:admin", "Admin", "user_default (default)", "—", "3"]],
        "artifact": [
            ["exp", "Experience", "project:admin", "1"],
            ["memory", "Memory", "project:admin", "3"],
            ["profile", "Profile", "project:admin", "0"],
        ],
        # the hash shortened to 12 hex digits, so that author and time stay on screen
        "artifactrevision": [
            ["project:admin experience:exp r1", "1", "experience", _sha("exp", 1)[:12], "t"],
            *[[f"project:admin memory:memory r{n}", str(n), "memory", _sha("memory", n)[:12], "t"] for n in (1, 2, 3)],
        ],
        "memoryentryversion": [
            ["e1", "e1-v1", "project:admin memory:memory", "1", "3"],
            ["e2", "e2-v1", "project:admin memory:memory", "2", "3"],
            ["e1", "e1-v2", "project:admin memory:memory", "3", "-"],
        ],
        "profilecandidate": [
            [f"project:admin profile:profile candidate #{candidate} (pending)", "Pending", "-", "host"]
        ],
        "apikey": [["reader", every_kind_of_row[:12], "-"]],
    }
    for model, rows in expected.items():
        response = staff_client.get(reverse(f"admin:artifacts_{model}_changelist"))
        assert response.status_code == 200
        shown = [
            [cell for cell in row if not DATE.fullmatch(cell)] for row in _changelist_rows(response.content.decode())
        ]
        assert sorted(shown) == sorted(rows), model
        # Never the key's secret: only its 12-character prefix.
        assert every_kind_of_row not in response.content.decode()


def test_memory_revision_page_lists_entry_versions_live_at_that_revision(staff_client, memory_history):
    revision = ArtifactRevision.objects.get(artifact__artifact_id="memory", revision=2)
    page = staff_client.get(reverse("admin:artifacts_artifactrevision_change", args=[revision.pk])).content.decode()
    assert "e1 @ e1-v1" in page and "e2 @ e2-v1" in page
    revision3 = ArtifactRevision.objects.get(artifact__artifact_id="memory", revision=3)
    page3 = staff_client.get(reverse("admin:artifacts_artifactrevision_change", args=[revision3.pk])).content.decode()
    assert "e1 @ e1-v2" in page3 and "e2 @ e2-v1" not in page3
    assert "previous (revision 2)" in page3


def test_entry_version_body_is_shown_escaped_never_as_html(staff_client, memory_history):
    version = MemoryEntryVersion.objects.get(version_id="e1-v1")
    page = staff_client.get(reverse("admin:artifacts_memoryentryversion_change", args=[version.pk])).content.decode()
    assert "&lt;b&gt;first&lt;/b&gt;" in page
    assert "<b>first</b>" not in page


def test_artifact_page_links_every_revision(staff_client, memory_history):
    artifact = Artifact.objects.get(artifact_id="memory")
    page = staff_client.get(reverse("admin:artifacts_artifact_change", args=[artifact.pk])).content.decode()
    for number in (1, 2, 3):
        assert f"revision {number}</a>" in page
    assert "older revisions" not in page


def test_an_artifact_with_many_revisions_links_its_newest_and_the_revision_list_for_the_rest(staff_client):
    # Its page listed every revision: its size grew with the history, without bound.
    scope = services.scope_create(scope_id="project:long")
    shown = history_admin.ADMIN_REVISION_LINKS_SHOWN
    for number in range(shown + 3):
        services.experience_revision_create(scope=scope, artifact_id="busy", body=f"lesson {number}", author="test")
    artifact = Artifact.objects.get(artifact_id="busy")
    page = staff_client.get(reverse("admin:artifacts_artifact_change", args=[artifact.pk])).content.decode()
    linked = [int(n) for n in re.findall(r">revision (\d+)</a>", page)]
    assert linked == list(range(shown + 3, 3, -1))
    more = re.search(r'<a href="([^"]+)">3 older revisions</a>', page)
    assert more is not None
    listed = staff_client.get(html.unescape(more.group(1)))
    assert listed.context["cl"].result_count == shown + 3  # the list, searched by the artifact within its scope


def test_revision_search_finds_by_sha256(staff_client, memory_history):
    revision = ArtifactRevision.objects.get(artifact__artifact_id="exp")
    url = reverse("admin:artifacts_artifactrevision_changelist")
    page = staff_client.get(url, {"q": revision.content_sha256}).content.decode()
    assert "1 result" in page


TAMPERED = {
    "artifact_id": "tampered",
    "family": "topic_memory",
    "revision": "99",
    "body": "tampered",
    "title": "tampered",
    "summary": "tampered",
    "content_sha256": "0" * 64,
    "author": "tampered",
    "entry_id": "tampered",
    "version_id": "tampered",
    "born_in_revision": "99",
    "retired_in_revision": "99",
    "conflict_key": "tampered:slot",
}


def _stored(row) -> dict:
    return {field.attname: getattr(row, field.attname) for field in row._meta.concrete_fields}


@pytest.mark.parametrize("model", [ArtifactRevision, MemoryEntryVersion, Artifact], ids=lambda m: m.__name__)
def test_immutable_rows_cannot_be_added_changed_or_deleted(staff_client, memory_history, model):
    name = model._meta.model_name
    row = model.objects.order_by("pk").first()
    before = _stored(row)
    tampered = {key: value for key, value in TAMPERED.items() if key in before}
    assert tampered, "the change must post fields the model really has"
    assert staff_client.get(reverse(f"admin:artifacts_{name}_add")).status_code == 403
    delete = staff_client.post(reverse(f"admin:artifacts_{name}_delete", args=[row.pk]), {"post": "yes"})
    assert delete.status_code == 403
    change = staff_client.post(reverse(f"admin:artifacts_{name}_change", args=[row.pk]), tampered)
    assert change.status_code == 403
    row.refresh_from_db()
    assert _stored(row) == before
    assert model.objects.count() == {ArtifactRevision: 4, MemoryEntryVersion: 3, Artifact: 2}[model]


def test_admin_refuses_a_non_staff_user(client, memory_history):
    user = get_user_model().objects.create_user("visitor", "v@example.com", "pw-visitor-1")
    client.force_login(user)
    response = client.get(reverse("admin:artifacts_artifactrevision_changelist"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


class _ResultTable(HTMLParser):
    """The text of every cell of a change list's result table, row by row (the selection checkbox left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.inside = self.in_body = False

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id") == "result_list":
            self.inside = True
        elif self.inside and tag == "tbody":
            self.in_body = True
        elif self.in_body and tag == "tr":
            self.rows.append([])
        elif self.in_body and tag in ("td", "th") and "action-checkbox" not in (dict(attrs).get("class") or ""):
            self.rows[-1].append("")

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = self.in_body = False

    def handle_data(self, data):
        if self.in_body and self.rows and self.rows[-1]:
            self.rows[-1][-1] += data.strip()


def _changelist_rows(page: str) -> list[list[str]]:
    parser = _ResultTable()
    parser.feed(page)
    return parser.rows


class _Structure(HTMLParser):
    """The start tags of a fragment with the attributes that shape breadcrumbs (not the text, not the links)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str | None, str | None]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes.get("class"), attributes.get("aria-current")))


def _breadcrumbs(page: str) -> str:
    match = re.search(r'<nav aria-label="Breadcrumbs">(.*?)</nav>', page, re.S)
    assert match, "no breadcrumbs navigation on the page"
    return match.group(1)


def _structure(fragment: str) -> list[tuple[str, str | None, str | None]]:
    parser = _Structure()
    parser.feed(fragment)
    return parser.tags


@pytest.mark.parametrize("page", ["revision", "entry_version"])
def test_immutable_pages_have_the_breadcrumbs_markup_of_the_running_django(staff_client, memory_history, page):
    # Django 5.2 renders breadcrumbs as a div of links, 6.x as an ordered list styled inline: the revision and
    # entry-version pages must use the running Django's markup (an <ol> on 5.2 shows as a numbered list).
    stock = staff_client.get(reverse("admin:artifacts_scope_change", args=[memory_history.pk])).content.decode()
    if page == "revision":
        row = ArtifactRevision.objects.get(artifact__artifact_id="memory", revision=2)
        url = reverse("admin:artifacts_artifactrevision_change", args=[row.pk])
    else:
        row = MemoryEntryVersion.objects.get(version_id="e1-v1")
        url = reverse("admin:artifacts_memoryentryversion_change", args=[row.pk])
    response = staff_client.get(url)
    ours = _breadcrumbs(response.content.decode())
    assert _structure(ours) == _structure(_breadcrumbs(stock))
    # The current page is named by the escaped subtitle, never by the object's own string.
    last = re.split(r"</a>", ours)[-1]
    assert html.escape(response.context["subtitle"]) in last


def _scope_form(scope, targets) -> dict:
    form = {
        "title": scope.title,
        "references-TOTAL_FORMS": str(len(targets)),
        "references-INITIAL_FORMS": "0",
        "references-MIN_NUM_FORMS": "0",
        "references-MAX_NUM_FORMS": str(MAX_SCOPE_REFERENCES),
    }
    for i, target in enumerate(targets):
        form |= {f"references-{i}-target": str(target.pk), f"references-{i}-position": str(i + 1)}
    return form


def test_the_scope_form_refuses_more_references_than_a_scope_may_have(staff_client):
    scope = services.scope_create(scope_id="project:many", title="Many")
    targets = [services.scope_create(scope_id=f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    url = reverse("admin:artifacts_scope_change", args=[scope.pk])
    refused = staff_client.post(url, _scope_form(scope, targets))
    assert refused.status_code == 200
    assert f"a scope references at most {MAX_SCOPE_REFERENCES} scopes, not 65" in refused.content.decode()
    assert not ContextReference.objects.filter(scope=scope).exists()
    accepted = staff_client.post(url, _scope_form(scope, targets[:MAX_SCOPE_REFERENCES]))
    assert accepted.status_code == 302
    assert ContextReference.objects.filter(scope=scope).count() == MAX_SCOPE_REFERENCES


def test_the_scope_form_counts_the_stored_references_not_the_posted_forms(staff_client):
    scope = services.scope_create(scope_id="project:many", title="Many")
    targets = [services.scope_create(scope_id=f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    services.scope_references_set(scope=scope, targets=targets[:MAX_SCOPE_REFERENCES])
    url = reverse("admin:artifacts_scope_change", args=[scope.pk])
    # A form that declares no existing rows and adds one more: the stored 64 stay, so it would make 65.
    extra = _scope_form(scope, targets[MAX_SCOPE_REFERENCES:])
    extra["references-0-position"] = str(MAX_SCOPE_REFERENCES + 1)
    refused = staff_client.post(url, extra)
    assert refused.status_code == 200
    assert f"a scope references at most {MAX_SCOPE_REFERENCES} scopes, not 65" in refused.content.decode()
    assert ContextReference.objects.filter(scope=scope).count() == MAX_SCOPE_REFERENCES


def test_a_new_scope_is_added_with_its_references_in_order(staff_client):
    targets = [services.scope_create(scope_id=f"team:{i}") for i in range(2)]
    form = _scope_form(Scope(title="New"), targets) | {"scope_id": "project:new"}
    assert staff_client.post(reverse("admin:artifacts_scope_add"), form).status_code == 302
    scope = Scope.objects.get(scope_id="project:new")
    references = ContextReference.objects.filter(scope=scope).order_by("position")
    assert [r.target.scope_id for r in references] == ["team:0", "team:1"]


def test_the_scope_form_changes_the_title_and_keeps_the_scope_id(staff_client):
    scope = services.scope_create(scope_id="project:one", title="One")
    form = _scope_form(scope, []) | {"title": "One, renamed", "scope_id": "project:two"}
    assert staff_client.post(reverse("admin:artifacts_scope_change", args=[scope.pk]), form).status_code == 302
    scope.refresh_from_db()
    assert (scope.scope_id, scope.title) == ("project:one", "One, renamed")


def _two_operators_at_once(monkeypatch, first_post: tuple, second_post: tuple, *, meet_saved: bool = False) -> tuple:
    """Two admin POSTs of a scope's references (``(scope, target, position)`` each) in two threads; the responses.

    The first waits (a bounded second) after counting its scope's references, so that the second runs its own
    count meanwhile unless a lock holds it back. With ``meet_saved`` each also waits (a bounded second) after
    saving its references for the other to have saved its own, so both commit holding what their saves locked.
    """
    from django.test import Client

    from artifacts.admin import scopes as scope_admin

    user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw-operator-1")
    first_counted, second_counted = threading.Event(), threading.Event()
    count_problem = services.scope_references_count_problem

    def counted(count):
        if threading.current_thread().name == "first":
            first_counted.set()
            second_counted.wait(timeout=1)
        else:
            second_counted.set()
        return count_problem(count)

    monkeypatch.setattr(scope_admin.services, "scope_references_count_problem", counted)
    if meet_saved:
        both_saved = threading.Barrier(2)
        save = scope_admin.ContextReferenceFormSet.save

        def saved_then_meet(formset, *args, **kwargs):
            saved = save(formset, *args, **kwargs)
            # Bounded: on SQLite the other waits for this one's write lock instead.
            with contextlib.suppress(threading.BrokenBarrierError):
                both_saved.wait(timeout=1)
            return saved

        monkeypatch.setattr(scope_admin.ContextReferenceFormSet, "save", saved_then_meet)
    responses = {}

    def operator(name: str, scope, target, position: int) -> None:
        client = Client(raise_request_exception=False)  # a 500 is an answer the test checks, not a crash
        client.force_login(user)
        form = _scope_form(scope, [target]) | {"references-0-position": str(position)}
        try:
            responses[name] = client.post(reverse("admin:artifacts_scope_change", args=[scope.pk]), form)
        finally:
            connections.close_all()

    first = threading.Thread(target=operator, args=("first", *first_post), name="first")
    second = threading.Thread(target=operator, args=("second", *second_post), name="second")
    first.start()
    assert first_counted.wait(timeout=30)
    second.start()
    first.join(timeout=60)
    second.join(timeout=60)
    assert not first.is_alive() and not second.is_alive()
    return responses["first"], responses["second"]


def test_two_operators_adding_a_reference_at_once_cannot_pass_the_limit_together(committed_db, monkeypatch):
    """Each admin POST adds one reference to a scope holding one fewer than the limit: one is refused."""
    scope = services.scope_create(scope_id="project:many", title="Many")
    targets = [services.scope_create(scope_id=f"team:{i}") for i in range(MAX_SCOPE_REFERENCES + 1)]
    services.scope_references_set(scope=scope, targets=targets[: MAX_SCOPE_REFERENCES - 1])

    # Different targets and positions: only the limit can refuse one of them.
    first, second = _two_operators_at_once(
        monkeypatch, (scope, targets[-2], MAX_SCOPE_REFERENCES), (scope, targets[-1], MAX_SCOPE_REFERENCES + 1)
    )

    assert first.status_code == 302
    assert second.status_code == 200  # shown again with the error
    assert f"a scope references at most {MAX_SCOPE_REFERENCES} scopes, not 65" in second.content.decode()
    assert ContextReference.objects.filter(scope=scope).count() == MAX_SCOPE_REFERENCES


def test_two_operators_referencing_each_others_scope_at_once_both_save(committed_db, monkeypatch):
    """X adds a reference to Y while Y adds one to X: both saves go through.

    Both commit while the other still holds its own scope's row (``meet_saved``): on PostgreSQL each commit then
    checks its new reference's foreign key to the other's scope, which deadlocked while the admin's UPDATE of a
    scope named its scope_id.
    """
    x = services.scope_create(scope_id="project:x", title="X")
    y = services.scope_create(scope_id="project:y", title="Y")

    first, second = _two_operators_at_once(monkeypatch, (x, y, 1), (y, x, 1), meet_saved=True)

    assert (first.status_code, second.status_code) == (302, 302)
    assert list(ContextReference.objects.values_list("scope__scope_id", "target__scope_id").order_by("scope_id")) == [
        ("project:x", "project:y"),
        ("project:y", "project:x"),
    ]


@pytest.mark.parametrize("taken", ["position", "target"])
def test_a_new_reference_at_a_stored_references_position_or_target_is_a_form_error(staff_client, taken):
    # A form that declares no existing rows (as a stale page or a crafted POST does) and adds a reference whose
    # position, or target, another stored reference of the scope holds: the form says so, never a 500.
    scope = services.scope_create(scope_id="project:refs", title="Refs")
    first, second = (services.scope_create(scope_id=f"team:{i}") for i in range(2))
    services.scope_references_set(scope=scope, targets=[first])
    stored = ContextReference.objects.get(scope=scope)
    form = _scope_form(scope, [second if taken == "position" else first])
    form["references-0-position"] = str(stored.position if taken == "position" else stored.position + 1)
    response = staff_client.post(reverse("admin:artifacts_scope_change", args=[scope.pk]), form)
    assert response.status_code == 200
    errors = " ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S))
    # Django 6.1 checks the unique constraint against the stored rows itself; on 5.2 the formset does (its words).
    named = ("position",) if taken == "position" else ("target", "names this scope")
    assert any(word in errors.lower() for word in named), errors
    assert list(ContextReference.objects.filter(scope=scope).values_list("target_id", "position")) == [
        (first.pk, stored.position)
    ]
