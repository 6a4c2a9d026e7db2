"""Change lists whose count does not grow with the table: a page of the prepare log must not count millions of rows.

Django's change list counts every filtered row for its paginator (``paginator.count``, which also decides "Show
all" and how many pages there are) and, with ``show_full_result_count``, the whole unfiltered table again; its
"Show counts" link (facets) counts each filter's choices over the filtered rows. On an append-only table that is a
scan per page view. ``CappedCountAdmin`` counts at most ``CappedPaginator.cap`` rows (``SELECT COUNT(*) FROM
(SELECT ... LIMIT cap + 1)``), shows "10,000+" past it, never counts the whole table and offers no facets. Pages
past the cap are not reachable by number: the filters and the search narrow the list instead. (A filter that few
rows match still reads on until the end of the table; the prepare log's time filter is an indexed range.)
"""

from __future__ import annotations

from django.contrib.admin.options import IncorrectLookupParameters, ShowFacets
from django.core.paginator import InvalidPage, Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property

from artifacts.admin.guards import GuardedAdmin, GuardedChangeList

CHANGE_LIST_COUNT_CAP = 10_000
"""Rows a capped change list counts at most (100 pages of Django's 100 rows)."""


class CappedPaginator(Paginator):
    """A paginator counting at most ``cap`` rows of a queryset, in one statement whose cost the cap bounds."""

    cap = CHANGE_LIST_COUNT_CAP

    @cached_property
    def _counted(self) -> int:
        if not isinstance(self.object_list, QuerySet):
            return super().count
        # Unordered: the count needs no sort, and the LIMIT keeps the database from reading past cap + 1 rows.
        return self.object_list.order_by()[: self.cap + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self._counted, self.cap)

    @property
    def capped(self) -> bool:
        """True when there are more rows than the count reads (the count is then the cap)."""
        return self._counted > self.cap

    @property
    def count_shown(self) -> str:
        """The count as the page says it: ``10,000+`` when capped."""
        return f"{self.count:,}+" if self.capped else f"{self.count:,}"


class CappedChangeList(GuardedChangeList):
    """A guarded change list that, past its paginator's cap, shows one page of the rows and never all of them."""

    def get_results(self, request):
        super().get_results(request)
        if not self.paginator.capped:
            return
        # Django decides "Show all" and a single page from the count; past the cap the rows are more than it says.
        self.can_show_all = False
        self.multi_page = True
        try:
            self.result_list = self.paginator.page(self.page_num).object_list
        except InvalidPage as exc:
            raise IncorrectLookupParameters from exc
        # The search bar would say "10000 results": the footer says "10,000+" (the template).
        self.full_result_count = self.result_count

    @property
    def page_links(self):
        """The page numbers the footer links (Django's elided range)."""
        return self.paginator.get_elided_page_range(self.page_num)


class CappedCountAdmin(GuardedAdmin):
    """A change list of a table that only grows (the prepare log, revisions, entry versions): its count is capped,
    the unfiltered table is never counted, and no facet counts are offered."""

    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = ShowFacets.NEVER
    change_list_template = "admin/powercontext/capped_change_list.html"

    def get_changelist(self, request, **kwargs):
        return CappedChangeList
