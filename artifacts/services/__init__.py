"""All writes, by subject. Each public function is one transaction that keeps a storage invariant.

- ``scopes``: scopes and their ordered references
- ``memory``: memory revisions (entry versions born and retired)
- ``revisions``: experiences, topic memories, committed profiles, body-only families
- ``profiles``: profile candidates (propose, commit, reject)
- ``keys``: API keys and grants
- ``idempotency``: writes made once per Idempotency-Key
- ``prepare_log``: the prepare log (one INSERT per prepare, or batches of them, never failing it) and its purge
- ``prepare_log_writer``: the prepare log's background writer (a queue and a thread per process)
- ``common``: the shared text checks, gapless revision allocation, batched purges and SQLite's WAL checkpoint

The recall index is maintained by ``artifacts.recall.index`` inside these transactions.
"""

from artifacts.services.common import artifact_create, database_wal_checkpoint
from artifacts.services.idempotency import idempotent_write_run, idempotent_writes_purge
from artifacts.services.keys import api_key_create, api_key_grant_set, api_key_revoke
from artifacts.services.memory import EntryVersionWrite, MemoryRevisionResult, memory_revision_create
from artifacts.services.prepare_log import PrepareLogWrite, prepare_log_purge, prepare_log_write
from artifacts.services.prepare_log_writer import prepare_log_enqueue, prepare_log_flush
from artifacts.services.profiles import profile_candidate_commit, profile_candidate_propose, profile_candidate_reject
from artifacts.services.revisions import (
    artifact_body_revision_create,
    experience_revision_create,
    topic_memory_revision_create,
)
from artifacts.services.scopes import (
    scope_create,
    scope_references_count_problem,
    scope_references_lock,
    scope_references_set,
)
from vocabulary.history import memory_revision_sha256, topic_memory_sha256  # the content hashes, for callers

__all__ = [
    "EntryVersionWrite",
    "MemoryRevisionResult",
    "PrepareLogWrite",
    "api_key_create",
    "api_key_grant_set",
    "api_key_revoke",
    "artifact_body_revision_create",
    "artifact_create",
    "database_wal_checkpoint",
    "experience_revision_create",
    "idempotent_write_run",
    "idempotent_writes_purge",
    "memory_revision_create",
    "memory_revision_sha256",
    "prepare_log_enqueue",
    "prepare_log_flush",
    "prepare_log_purge",
    "prepare_log_write",
    "profile_candidate_commit",
    "profile_candidate_propose",
    "profile_candidate_reject",
    "scope_create",
    "scope_references_count_problem",
    "scope_references_lock",
    "scope_references_set",
    "topic_memory_revision_create",
    "topic_memory_sha256",
]
