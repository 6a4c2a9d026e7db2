"""Display helpers of the operator admin: stored text and identities shown exactly, escaped, never as HTML.

Stored text is shown exactly and never interpreted as HTML; when it holds invisible or control
characters (a bidi override, a zero-width space, a tab) it is also shown with each of them escaped as
``\\uXXXX``, so what an agent saw can be read unambiguously. Used by the admin's modules and the operator
tools' admin pages.
"""

import unicodedata
from collections import Counter

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from artifacts.admin.guards import GuardedAdmin
from artifacts.admin.related import may_view, viewer_display
from artifacts.models import Artifact, MemoryEntryVersion
from artifacts.selectors.history import revision_verification
from artifacts.selectors.revisions import artifact_revision_get
from vocabulary.errors import NotFound
from vocabulary.escaping import artifact_label, escape_invisible, is_invisible, json_literal, short_identity

CITED_REVISION_PARAMETER = "cited_revision"
"""The query parameter of an entry version's page naming the revision a citation cited (the resolver sets it)."""


def cited_revision_of(version: MemoryEntryVersion, raw: str | None):
    """The revision ``raw`` names when it is a revision this entry version is live in, else None.

    Anything else (not a number, out of range, a revision the version is not live in) is ignored: the page is
    the entry version's either way, and a link it shows must be true.
    """
    if not raw or not raw.isascii() or not raw.isdigit() or len(raw) > 10:
        return None
    number = int(raw)
    if number < version.born_in_revision or (
        version.retired_in_revision is not None and number >= version.retired_in_revision
    ):
        return None
    try:
        return artifact_revision_get(artifact=version.artifact, revision=number)
    except NotFound:
        return None


def _character_name(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} {name}".rstrip()


def text_shown(text: str | None):
    """Stored text exactly, escaped (never interpreted as HTML), whitespace preserved.

    Text with invisible characters is shown twice: first with each of them as a visible \\uXXXX
    escape (and a list of what they are), then exactly as stored.
    """
    if text is None:
        return "—"
    exact = format_html(
        '<pre class="powercontext-body" dir="ltr" style="white-space: pre-wrap; unicode-bidi: isolate">{}</pre>', text
    )
    invisible = Counter(char for char in text if is_invisible(char))
    if not invisible:
        return exact
    names = ", ".join(
        f"{_character_name(char)} ×{count}" for char, count in sorted(invisible.items(), key=lambda item: item[0])
    )
    return format_html(
        '<p class="powercontext-invisible-note"><strong>Contains {} invisible or control character(s):</strong> {}.'
        " Shown first with each escaped as \\uXXXX, then exactly as stored.</p>"
        '<pre class="powercontext-body-escaped" style="white-space: pre-wrap">{}</pre>'
        '<p class="powercontext-invisible-note">Exactly as stored:</p>{}',
        sum(invisible.values()),
        names,
        escape_invisible(text),
        exact,
    )


def citation_lines(artifact: Artifact, revision: str, *, entry: MemoryEntryVersion | None = None, note: str = ""):
    """Markdown metadata lines citing ``revision`` of ``artifact`` (and ``entry``), as prepared content has them."""
    lines = [
        f"    Scope: {json_literal(artifact.scope.scope_id)}",
        f"    Artifact: family={json_literal(artifact.family)}, id={json_literal(artifact.artifact_id)}, "
        f"revision={revision}",
    ]
    if entry is not None:
        lines.append(f"    Entry: id={json_literal(entry.entry_id)}, version={json_literal(entry.version_id)}")
    resolve_url = reverse("admin-citation-resolve")
    return format_html(
        '<pre class="powercontext-citation" style="white-space: pre-wrap">{}</pre>{}'
        '<div class="help"><a href="{}">Resolve another citation</a></div>',
        "\n".join(lines),
        format_html('<div class="help">{}</div>', note) if note else "",
        resolve_url,
    )


def _artifact_link(artifact: Artifact, user):
    """The artifact's identity, visibly escaped: a link to its page for staff who may view artifacts."""
    label = f"{artifact_label(artifact.family, artifact.artifact_id)} in scope {json_literal(artifact.scope.scope_id)}"
    if not may_view(user, Artifact):
        return label
    return format_html('<a href="{}">{}</a>', reverse("admin:artifacts_artifact_change", args=[artifact.pk]), label)


@viewer_display(description="Artifact")
def artifact_link(model_admin, obj, user):
    """A row's artifact (``obj.artifact``), as an admin's field: ``artifact_link = artifact_link``."""
    return _artifact_link(obj.artifact, user)


def identity_column(path: str, description: str):
    """A change-list column showing an identity (``scope_id``, ``artifact__artifact_id``) visibly escaped.

    A missing value anywhere along the path (a prepare logged without a valid key has no ``api_key``) shows as
    the admin's empty value.
    """

    @admin.display(description=description, ordering=path)
    def column(*args):  # (obj) in list_display, (admin, obj) as an admin attribute in fields
        value = args[-1]
        for part in path.split("__"):
            value = getattr(value, part)
            if value is None:
                return None
        return short_identity(value)

    return column


def text_column(path: str, description: str):
    """A change-list column showing free text with its invisible characters escaped."""

    @admin.display(description=description, ordering=path)
    def column(*args):
        return escape_invisible(getattr(args[-1], path))

    return column


class ReadOnlyAdmin(GuardedAdmin):
    """No add, change or delete: the row is history."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def page_subtitle(self, obj) -> str | None:
        """The page heading, with identities escaped; None keeps Django's."""
        return None

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # Reached through GuardedAdmin.change_view, which has asked for the permission: only staff who may view the
        # row have it read for what its page adds.
        obj = self.get_object(request, object_id) if object_id is not None else None
        context = self.page_context(request, obj) if obj is not None else {}
        return super().changeform_view(request, object_id, form_url, {**context, **(extra_context or {})})

    def page_context(self, request, obj) -> dict:
        """What the row's page shows besides its fields (read only for staff who may view it): the heading with
        identities escaped (``page_subtitle``)."""
        subtitle = self.page_subtitle(obj)
        return {} if subtitle is None else {"subtitle": subtitle}


def revision_verification_shown(revision) -> str:
    """A revision's verification state, recomputed from the rows on the page (O(that revision)): "verified", or
    "MISMATCH" with each stored value that differs from its recomputation (``manage.py verify_history`` checks all)."""
    mismatches = revision_verification(revision=revision)
    checked = (
        "content hash, entry versions born and retired, and the link to the previous revision's chain hash "
        f"(chain_sha256 {revision.chain_sha256 or '—'})"
    )
    if not mismatches:
        return format_html('<strong class="powercontext-verified">verified</strong>: {}', checked)
    return format_html(
        '<strong class="powercontext-mismatch" style="color: #ba2121">MISMATCH</strong>: {}<ul>{}</ul>',
        checked,
        format_html_join("", "<li>{}</li>", ((str(m),) for m in mismatches)),
    )
