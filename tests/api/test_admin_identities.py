"""Operators never see a spoofed identity: every admin page (change lists, change pages, history, titles)
shows identities with bidi controls and invisible characters escaped, never raw."""

import re

import pytest
from django.urls import reverse

from artifacts import services
from artifacts.models import ApiKey, Artifact, ArtifactRevision, MemoryEntryVersion, ProfileCandidate, Scope

pytestmark = pytest.mark.django_db

SPOOFS = ("\u202e", "\u2066", "\u200b")
SCOPE_ID = "project:\u202egnp.exe"
ENTRY_ID = "bidi\u202egnp.exe"
VERSION_ID = "v\u2066isible\u200b"
KEY_NAME = "host\u202ekey"


@pytest.fixture
def spoofed(db):
    scope = services.scope_create(scope_id=SCOPE_ID, title="title\u202e")
    services.memory_revision_create(
        scope=scope,
        artifact_id="memory\u200b",
        writes=[services.EntryVersionWrite(ENTRY_ID, VERSION_ID, "body")],
        author="author\u2066",
    )
    services.profile_candidate_propose(scope=scope, artifact_id="profile", body="p", proposed_by="proposer\u202e")
    services.api_key_create(name=KEY_NAME, read_scopes=[scope])
    return scope


def assert_escaped(response):
    assert response.status_code == 200
    # An editable form field holds the stored text itself (a scope's title): everything else is display.
    page = re.sub(r'<input[^>]*value="[^"]*"[^>]*>', "<input>", response.content.decode())
    for char in SPOOFS:
        assert char not in page, f"raw U+{ord(char):04X} on {response.request['PATH_INFO']}"
    return page


@pytest.mark.parametrize(
    "model", ["scope", "artifact", "artifactrevision", "memoryentryversion", "profilecandidate", "apikey"]
)
def test_change_lists_show_identities_escaped(staff_client, spoofed, model):
    page = assert_escaped(staff_client.get(reverse(f"admin:artifacts_{model}_changelist")))
    assert "\\u202e" in page or "\\u2066" in page or "\\u200b" in page


def _objects():
    return {
        "scope": Scope.objects.get(),
        "artifact": Artifact.objects.get(family="memory"),
        "artifactrevision": ArtifactRevision.objects.get(),
        "memoryentryversion": MemoryEntryVersion.objects.get(),
        "profilecandidate": ProfileCandidate.objects.get(),
        "apikey": ApiKey.objects.get(),
    }


@pytest.mark.parametrize(
    "model", ["scope", "artifact", "artifactrevision", "memoryentryversion", "profilecandidate", "apikey"]
)
@pytest.mark.parametrize("page", ["change", "history"])
def test_change_and_history_pages_and_their_titles_show_identities_escaped(staff_client, spoofed, model, page):
    obj = _objects()[model]
    content = assert_escaped(staff_client.get(reverse(f"admin:artifacts_{model}_{page}", args=[obj.pk])))
    title = content.split("<title>", 1)[1].split("</title>", 1)[0]
    assert "\\u" in title or model == "profilecandidate"


def test_the_escaped_forms_name_the_characters_exactly(spoofed):
    assert str(Scope.objects.get()) == '"project:\\u202egnp.exe"'
    assert str(MemoryEntryVersion.objects.get()) == '"bidi\\u202egnp.exe"@"v\\u2066isible\\u200b"'
