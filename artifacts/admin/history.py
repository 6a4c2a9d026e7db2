"""The admin of the history: artifacts, their revisions and memory entry versions, all read-only (immutable rows).

Scopes, profile candidates, API keys and their grants have their own modules (configuration and credentials, not
history): ``artifacts.admin.scopes``, ``profiles`` and ``keys``.
"""

from functools import partial
from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from artifacts import selectors
from artifacts.admin.display import (
    CITED_REVISION_PARAMETER,
    ReadOnlyAdmin,
    artifact_link,
    citation_lines,
    cited_revision_of,
    identity_column,
    revision_verification_shown,
    text_shown,
)
from artifacts.admin.erasure import ErasureAdminMixin
from artifacts.admin.filters import BoundedRelatedFieldListFilter
from artifacts.admin.paging import CappedCountAdmin
from artifacts.admin.related import author_display, hidden, may_view, viewer_display
from artifacts.models import (
    Artifact,
    ArtifactRevision,
    Family,
    MemoryEntryVersion,
    Scope,
)
from vocabulary.escaping import artifact_label, escape_invisible, json_literal
from vocabulary.limits import REVISION_ENTRIES_PAGE_DEFAULT

ADMIN_REVISION_LINKS_SHOWN = 50
"""Revisions an artifact's admin page links at most (the newest); the rest are in the revision list."""
ADMIN_LIVE_ENTRIES_SHOWN = REVISION_ENTRIES_PAGE_DEFAULT
"""Live entries a memory revision's admin page shows at most (with their bodies), as an exact read's page does."""


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    list_display = [identity_column("artifact_id", "artifact id"), "family", "scope", "head_revision", "created_at"]
    list_filter = ["family", ("scope", BoundedRelatedFieldListFilter)]
    list_select_related = ["scope"]
    search_fields = ["artifact_id", "scope__scope_id"]
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    fields = ("scope_link", "family", "artifact_id_shown", "head_revision", "created_at", "revision_links")
    readonly_fields = fields
    artifact_id_shown = identity_column("artifact_id", "Artifact id")

    @viewer_display(description="Scope")
    def scope_link(self, obj, user):
        # The scope's id is the artifact's identity; its page (title, tier, references) is the scope's own.
        if not may_view(user, Scope):
            return str(obj.scope)
        url = reverse("admin:artifacts_scope_change", args=[obj.scope_id])
        return format_html('<a href="{}">{}</a>', url, obj.scope)

    @viewer_display(description="Revisions")
    def revision_links(self, obj, user):
        # The newest ones: an artifact may have any number of revisions, and each revision's page links its
        # neighbours. Revisions are numbered 1..head, so the head says how many there are.
        if not may_view(user, ArtifactRevision):
            numbers = "revision 1" if obj.head_revision == 1 else f"revisions 1 to {obj.head_revision}"
            return hidden(numbers, ArtifactRevision, explained=True)
        revisions = (
            ArtifactRevision.objects.filter(artifact=obj)
            .order_by("-revision")
            .values_list("pk", "revision")[:ADMIN_REVISION_LINKS_SHOWN]
        )
        links = format_html_join(
            ", ",
            '<a href="{}">revision {}</a>',
            ((reverse("admin:artifacts_artifactrevision_change", args=[pk]), number) for pk, number in revisions),
        )
        older = obj.head_revision - ADMIN_REVISION_LINKS_SHOWN
        if older <= 0:
            return links
        query = urlencode({"q": obj.artifact_id, "artifact__scope__id__exact": obj.scope_id})
        url = f"{reverse('admin:artifacts_artifactrevision_changelist')}?{query}"
        return format_html('{}, … and <a href="{}">{} older revisions</a>', links, url, older)


class ImmutableRowAdmin(ReadOnlyAdmin):
    """An immutable row's page: the row itself may come from a read replica (docs/scaling.md §8).

    Only the row: the list (newest rows first), the neighbours, the permissions and everything else the page
    reads come from the primary.
    """

    def get_object(self, request, object_id, from_field=None):
        return selectors.immutable_row_get(partial(super().get_object, request, object_id, from_field))


@admin.register(ArtifactRevision)
class ArtifactRevisionAdmin(ErasureAdminMixin, CappedCountAdmin, ImmutableRowAdmin):
    change_form_template = "admin/powercontext/immutable_change_form.html"
    list_display = [
        "__str__",
        "revision",
        "family",
        "short_sha256",
        "author_column",
        "created_at",
    ]
    list_filter = ["artifact__family", ("artifact__scope", BoundedRelatedFieldListFilter)]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "content_sha256", "artifact__artifact_id", "artifact__scope__scope_id"]
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    fields = (
        "artifact_link",
        "revision",
        "citation",
        "neighbours",
        "content_sha256",
        "verification",
        "author_shown",
        "created_at",
        "title_text",
        "summary_text",
        "body_text",
        "live_entries",
        "erase_link",
    )
    readonly_fields = fields
    artifact_link = artifact_link
    # api-key:<name> and admin:<username> name another model's row (artifacts.admin.related).
    author_column = author_display("author", "author")
    author_shown = author_display("author", "Author", explained=True)

    @admin.display(description="SHA-256", ordering="content_sha256")
    def short_sha256(self, obj):
        return format_html('<code title="{}">{}</code>', obj.content_sha256, obj.content_sha256[:12])

    def page_subtitle(self, obj) -> str:
        artifact = obj.artifact
        return (
            f"{artifact_label(artifact.family, artifact.artifact_id)} revision {obj.revision} "
            f"in scope {json_literal(artifact.scope.scope_id)}"
        )

    @admin.display(description="Verification")
    def verification(self, obj):
        return revision_verification_shown(obj)

    @admin.display(description="Citation")
    def citation(self, obj):
        note = "A memory citation also names one of the entry versions live at this revision (below)."
        return citation_lines(
            obj.artifact, str(obj.revision), note=note if obj.artifact.family == Family.MEMORY else ""
        )

    @admin.display(description="Title")
    def title_text(self, obj):
        return text_shown(obj.title)

    @admin.display(description="Family")
    def family(self, obj):
        return obj.artifact.family

    @admin.display(description="Previous / next")
    def neighbours(self, obj):
        links = []
        for label, number in (("previous", obj.revision - 1), ("next", obj.revision + 1)):
            pk = (
                ArtifactRevision.objects.filter(artifact_id=obj.artifact_id, revision=number)
                .values_list("pk", flat=True)
                .first()
            )
            if pk:
                links.append((reverse("admin:artifacts_artifactrevision_change", args=[pk]), label, number))
        return format_html_join(" · ", '<a href="{}">{} (revision {})</a>', links) or "—"

    @admin.display(description="Body")
    def body_text(self, obj):
        return text_shown(obj.body)

    @admin.display(description="Summary")
    def summary_text(self, obj):
        return text_shown(obj.summary)

    @viewer_display(description="Entry versions live at this revision")
    def live_entries(self, obj, user):
        if obj.artifact.family != Family.MEMORY:
            return "—"
        if not may_view(user, MemoryEntryVersion):
            # Their ids, bodies and links are the entry versions' data: the revision's permission does not show them.
            return hidden("the entry versions live here", MemoryEntryVersion, explained=True)
        versions, more = selectors.memory_entries_live_at(
            artifact=obj.artifact, revision=obj.revision, limit=ADMIN_LIVE_ENTRIES_SHOWN
        )
        # Each entry's text inline (escaped like every body), under a link to its version's own page; a bounded
        # number of them, as the API pages them (vocabulary.limits).
        shown = format_html_join(
            "",
            '<div class="powercontext-live-entry"><a href="{}">{} @ {}</a>{}</div>',
            (
                (
                    reverse("admin:artifacts_memoryentryversion_change", args=[v.pk]),
                    escape_invisible(v.entry_id),
                    escape_invisible(v.version_id),
                    text_shown(v.body),
                )
                for v in versions
            ),
        )
        if more:
            shown = format_html(
                '{}<p class="powercontext-live-entries-more">Only the first {} live entries are shown (by entry id); '
                "the memory entry versions list has the others.</p>",
                shown,
                ADMIN_LIVE_ENTRIES_SHOWN,
            )
        return shown or "none"


@admin.register(MemoryEntryVersion)
class MemoryEntryVersionAdmin(ErasureAdminMixin, CappedCountAdmin, ImmutableRowAdmin):
    change_form_template = "admin/powercontext/immutable_change_form.html"
    list_display = [
        identity_column("entry_id", "entry id"),
        identity_column("version_id", "version id"),
        "artifact",
        "born_in_revision",
        "retired_in_revision",
        "created_at",
    ]
    list_select_related = ["artifact__scope"]
    search_fields = ["=id", "entry_id", "version_id", "content_sha256", "artifact__scope__scope_id"]
    list_filter = [("artifact__scope", BoundedRelatedFieldListFilter)]
    # A tuple: one sequence serves as fields and readonly_fields, which a list could not type as both.
    fields = (
        "artifact_link",
        "entry_id_text",
        "version_id_text",
        "born_in_revision",
        "retired_in_revision",
        "content_sha256",
        "conflict_slot",
        "created_at",
        "citation",
        "body_text",
        "erase_link",
    )
    readonly_fields = fields
    artifact_link = artifact_link

    def page_context(self, request, obj) -> dict:
        # Reached from a citation (the resolver, the inspector): the cited revision, linked, above the version.
        context = super().page_context(request, obj)
        cited = cited_revision_of(obj, request.GET.get(CITED_REVISION_PARAMETER))
        if cited is not None:
            may_open = may_view(request.user, ArtifactRevision)
            url = reverse("admin:artifacts_artifactrevision_change", args=[cited.pk]) if may_open else None
            context |= {"cited_revision": cited, "cited_revision_url": url}
        return context

    def page_subtitle(self, obj) -> str:
        artifact = obj.artifact
        return (
            f"entry {json_literal(obj.entry_id)} version {json_literal(obj.version_id)} of "
            f"{artifact_label(artifact.family, artifact.artifact_id)} in scope "
            f"{json_literal(artifact.scope.scope_id)}"
        )

    @admin.display(description="Citation")
    def citation(self, obj):
        last = "the head" if obj.retired_in_revision is None else f"revision {obj.retired_in_revision - 1}"
        note = f"Live from revision {obj.born_in_revision} through {last}."
        return citation_lines(obj.artifact, "<any revision this version is live in>", entry=obj, note=note)

    @admin.display(description="Entry id")
    def entry_id_text(self, obj):
        return json_literal(obj.entry_id)

    @admin.display(description="Version id")
    def version_id_text(self, obj):
        return json_literal(obj.version_id)

    @admin.display(description="Conflict slot")
    def conflict_slot(self, obj):
        # As stored (the writer's text, normalized only by the selection policy), invisible characters escaped.
        return "none" if obj.conflict_key is None else json_literal(obj.conflict_key)

    @admin.display(description="Body")
    def body_text(self, obj):
        return text_shown(obj.body)
