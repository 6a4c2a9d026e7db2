"""The citation resolver lands on an entry version's page that names the cited revision in its URL
(``?cited_revision=N``) and links that revision's page; any other value of the parameter is ignored."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from tests.api.test_operator_tools import _resolve_text, _revision, _revision_page, _version, _version_page, demo

pytestmark = pytest.mark.django_db
_ = demo  # the fixture, imported for these tests

CITATION = (
    '    Scope: "project:demo"\n    Artifact: family="memory", id="memory", revision={}\n'
    '    Entry: id="entry-1", version="{}"\n'
)


def _notice(page: str) -> str | None:
    start = page.find('id="cited-revision"')
    return None if start < 0 else page[start : page.index("</p>", start)]


def test_the_resolved_entry_version_page_links_the_cited_revision(staff_client, demo):
    # entry-1-v2 is live in revisions 3 and 4: a citation of revision 4 lands on it and links revision 4.
    landing = _resolve_text(staff_client, CITATION.format(4, "entry-1-v2"))["Location"]
    assert landing.endswith("?cited_revision=4")

    page = staff_client.get(landing)

    assert page.status_code == 200
    notice = _notice(page.content.decode())
    assert "The citation named revision 4" in notice
    assert f'href="{_revision_page(_revision("project:demo", "memory", 4))}"' in notice
    assert "Open revision 4" in notice


@pytest.mark.parametrize(
    "value",
    ["3", "0", "5", "-1", "abc", "1e3", "²", "1" * 40, "2 ", "", "2\x00"],
    ids=[
        "retired-there",
        "zero",
        "past-head",
        "negative",
        "word",
        "float",
        "unicode-digit",
        "huge",
        "space",
        "empty",
        "nul",
    ],
)
def test_a_cited_revision_the_version_is_not_live_in_or_not_a_number_is_ignored(staff_client, demo, value):
    # entry-1-v1 is live in revisions 1 and 2 only (entry-1-v2 replaced it in 3).
    page = staff_client.get(_version_page(_version("project:demo", "entry-1-v1")), {"cited_revision": value})

    assert page.status_code == 200
    assert _notice(page.content.decode()) is None
    assert "entry-1-v1" in page.content.decode()


def test_an_earlier_live_revision_is_linked_on_the_older_version(staff_client, demo):
    page = staff_client.get(_version_page(_version("project:demo", "entry-1-v1"), 2))

    assert f'href="{_revision_page(_revision("project:demo", "memory", 2))}"' in _notice(page.content.decode())


def test_staff_who_may_not_open_revisions_see_the_cited_number_without_a_link(client, demo):
    user = get_user_model().objects.create_user("reader", "reader@example.com", "pw-reader-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_memoryentryversion"))
    client.force_login(user)

    page = client.get(_version_page(_version("project:demo", "entry-1-v2"), 3))

    assert page.status_code == 200
    notice = _notice(page.content.decode())
    assert "The citation named revision 3" in notice and "href=" not in notice
