"""All reads of stored state, by subject (recall has its own package, ``artifacts.recall``).

- ``scopes``: scopes and their ordered references
- ``keys``: API keys and grants
- ``revisions``: revisions and entry versions by identity (services, admin, operator tools)
- ``exact_reads``: what a key may read of a citation over HTTP
- ``history_pages``: a page of an artifact's history over HTTP
- ``profiles``: profile candidates
- ``citations``: the exact rows a citation names (the operator tools' resolver)
- ``prepare_logs``: the prepare log and the candidates a logged prepare is replayed from
"""

from artifacts.selectors.citations import CitationNotFound, ResolvedCitation, citation_resolve
from artifacts.selectors.exact_reads import EntryVersionAt, artifact_revision_read
from artifacts.selectors.history_pages import HistoryPage, artifact_history_read
from artifacts.selectors.keys import (
    ActiveKey,
    api_key_find_by_id,
    api_key_find_by_name,
    api_key_find_by_sha256,
    api_key_get_active,
    api_key_get_active_by_id,
    api_key_grant_list,
)
from artifacts.selectors.prepare_logs import (
    PrepareRecord,
    RebuiltCandidates,
    prepare_candidates_rebuild,
    prepare_log_get,
    prepare_log_newest_over_cap,
    prepare_log_query_kept,
    prepare_record_read,
)
from artifacts.selectors.profiles import (
    profile_candidate_get_writable,
    profile_candidate_list_all,
)
from artifacts.selectors.revisions import (
    artifact_get,
    artifact_history_page,
    artifact_revision_get,
    artifact_revision_list_all,
    immutable_row_get,
    memory_entries_live_at,
    memory_entry_version_find,
    memory_entry_version_get_at,
    memory_entry_version_list_all,
    memory_entry_versions_changed_in,
)
from artifacts.selectors.scopes import (
    ReadableScope,
    ReadableScopePage,
    scope_get,
    scope_get_many,
    scope_get_readable_with_references,
    scope_get_writable,
    scope_list_readable,
    scope_references_list,
)

__all__ = [
    "ActiveKey",
    "CitationNotFound",
    "EntryVersionAt",
    "HistoryPage",
    "PrepareRecord",
    "ReadableScope",
    "ReadableScopePage",
    "RebuiltCandidates",
    "ResolvedCitation",
    "api_key_find_by_id",
    "api_key_find_by_name",
    "api_key_find_by_sha256",
    "api_key_get_active",
    "api_key_get_active_by_id",
    "api_key_grant_list",
    "artifact_get",
    "artifact_history_page",
    "artifact_history_read",
    "artifact_revision_get",
    "artifact_revision_list_all",
    "artifact_revision_read",
    "citation_resolve",
    "immutable_row_get",
    "memory_entries_live_at",
    "memory_entry_version_find",
    "memory_entry_version_get_at",
    "memory_entry_version_list_all",
    "memory_entry_versions_changed_in",
    "prepare_candidates_rebuild",
    "prepare_log_get",
    "prepare_log_newest_over_cap",
    "prepare_log_query_kept",
    "prepare_record_read",
    "profile_candidate_get_writable",
    "profile_candidate_list_all",
    "scope_get",
    "scope_get_many",
    "scope_get_readable_with_references",
    "scope_get_writable",
    "scope_list_readable",
    "scope_references_list",
]
