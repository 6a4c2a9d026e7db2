"""All writes. Each public function is one transaction that keeps a storage invariant.

Invariants kept here: revision numbers per artifact are 1, 2, 3 … with no gap, even under
concurrent writers (PostgreSQL: a row lock on the artifact; SQLite: IMMEDIATE transactions, see
settings); one write creates exactly one revision; a memory entry has at most one live version;
the recall index always reflects exactly the live heads.
"""

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from artifacts import search
from artifacts.models import (
    ApiKey,
    ApiKeyGrant,
    Artifact,
    ArtifactRevision,
    ContextReference,
    Family,
    MemoryEntryVersion,
    ProfileCandidate,
    RecallCorpusStat,
    RecallDocument,
    RecallPosting,
    RecallTermStat,
    Scope,
)
from vocabulary.errors import Conflict, InvalidInput, NotFound
from vocabulary.families import BODY_ONLY_FAMILIES
from vocabulary.limits import (
    API_KEY_PREFIX,
    API_KEY_SHOWN_PREFIX_CHARACTERS,
    MAX_BODY_CHARACTERS,
    MAX_IDENTIFIER_CHARACTERS,
    MAX_SCOPE_TITLE_CHARACTERS,
    MAX_TOPIC_TITLE_CHARACTERS,
)
from vocabulary.text import canonical_json, sha256_text, stored_text_problem


def _check_text(value: str, *, path: str, max_length: int = MAX_BODY_CHARACTERS, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput("must be a string", path=path)
    if not value and not allow_empty:
        raise InvalidInput("must not be empty", path=path)
    if len(value) > max_length:
        raise InvalidInput(f"must be at most {max_length} characters", path=path)
    problem = stored_text_problem(value)
    if problem:
        raise InvalidInput(problem, path=path)
    return value


def _check_identifier(value: str, *, path: str) -> str:
    return _check_text(value, path=path, max_length=MAX_IDENTIFIER_CHARACTERS)


# --- scopes and references ---------------------------------------------------------------------


def scope_create(*, scope_id: str, title: str = "") -> Scope:
    """Create a scope; its id is any non-empty string up to 200 characters."""
    _check_identifier(scope_id, path="scope_id")
    _check_text(title, path="title", max_length=MAX_SCOPE_TITLE_CHARACTERS, allow_empty=True)
    return Scope.objects.create(scope_id=scope_id, title=title)


@transaction.atomic
def scope_references_set(*, scope: Scope, targets: Sequence[Scope]) -> None:
    """Replace the scope's ordered direct references with ``targets`` (positions 1, 2, …)."""
    if any(target.pk == scope.pk for target in targets):
        raise InvalidInput("a scope cannot reference itself", path="references")
    if len({t.pk for t in targets}) != len(targets):
        raise InvalidInput("a scope is referenced twice", path="references")
    ContextReference.objects.filter(scope=scope).delete()
    ContextReference.objects.bulk_create(
        ContextReference(scope=scope, target=target, position=i) for i, target in enumerate(targets, start=1)
    )


# --- revision allocation ----------------------------------------------------------------------


def _artifact_for_write(*, scope: Scope, family: str, artifact_id: str) -> Artifact:
    """The artifact, created on first write, locked for the rest of the transaction."""
    _check_identifier(artifact_id, path="artifact_id")
    try:
        with transaction.atomic():
            artifact, _ = Artifact.objects.get_or_create(scope=scope, family=family, artifact_id=artifact_id)
    except IntegrityError:  # a concurrent writer created it first
        pass
    return Artifact.objects.select_for_update().get(scope=scope, family=family, artifact_id=artifact_id)


def _next_revision(artifact: Artifact, *, expected_head_revision: int | None) -> int:
    if expected_head_revision is not None and expected_head_revision != artifact.head_revision:
        raise Conflict(f"expected head revision {expected_head_revision}, but the head is {artifact.head_revision}")
    number = artifact.head_revision + 1
    Artifact.objects.filter(pk=artifact.pk).update(head_revision=number)
    artifact.head_revision = number
    return number


# --- recall index -----------------------------------------------------------------------------


def _recall_index_add(
    *,
    artifact: Artifact,
    text: str,
    entry_version: MemoryEntryVersion | None = None,
    revision: ArtifactRevision | None = None,
) -> None:
    frequencies, length = search.term_frequencies(text)
    document = RecallDocument.objects.create(
        scope_id=artifact.scope_id,
        family=artifact.family,
        artifact=artifact,
        entry_version=entry_version,
        revision=revision,
        length=length,
    )
    RecallPosting.objects.bulk_create(
        RecallPosting(
            document=document,
            scope_id=artifact.scope_id,
            family=artifact.family,
            term=term,
            term_frequency=count,
            document_length=length,
        )
        for term, count in frequencies.items()
    )
    _recall_stats_change(artifact=artifact, terms=frequencies.keys(), length=length, delta=1)


def _recall_index_remove(*, artifact: Artifact, documents: Iterable[RecallDocument]) -> None:
    for document in documents:
        terms = list(RecallPosting.objects.filter(document=document).values_list("term", flat=True))
        document.delete()
        _recall_stats_change(artifact=artifact, terms=terms, length=document.length, delta=-1)


def _recall_stats_change(*, artifact: Artifact, terms: Iterable[str], length: int, delta: int) -> None:
    # Lock order: the scope and family's corpus row first, then term rows in sorted order. Every index
    # change of a scope and family updates that one row, so taking it first queues writers of different
    # artifacts there; taking term rows first let a removal and an addition with different terms lock
    # in opposite orders (a PostgreSQL deadlock, answered 503).
    terms = sorted(set(terms))
    scope_id, family = artifact.scope_id, artifact.family
    if delta > 0:
        RecallCorpusStat.objects.get_or_create(scope_id=scope_id, family=family)
    RecallCorpusStat.objects.filter(scope_id=scope_id, family=family).update(
        documents=F("documents") + delta, total_length=F("total_length") + delta * length
    )
    if delta > 0:
        RecallTermStat.objects.bulk_create(
            [RecallTermStat(scope_id=scope_id, family=family, term=t, documents=0) for t in terms],
            ignore_conflicts=True,
        )
    RecallTermStat.objects.filter(scope_id=scope_id, family=family, term__in=terms).update(
        documents=F("documents") + delta
    )


# --- memory -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryVersionWrite:
    """A new version of an entry: creates the entry, or replaces its live version."""

    entry_id: str
    version_id: str | None
    body: str


@dataclass(frozen=True)
class MemoryRevisionResult:
    revision: ArtifactRevision
    added: tuple[MemoryEntryVersion, ...]
    retired: tuple[MemoryEntryVersion, ...]


def memory_revision_sha256(previous: str, added: Sequence[MemoryEntryVersion], retired) -> str:
    # A hash chain over the changes: O(change) to compute, yet it identifies the whole live set.
    return sha256_text(
        canonical_json(
            {
                "previous": previous,
                "added": sorted([v.entry_id, v.version_id, v.content_sha256] for v in added),
                "retired": sorted([v.entry_id, v.version_id] for v in retired),
            }
        )
    )


def _new_version_id(artifact: Artifact, entry_id: str, *, reserved: set[str]) -> str:
    """The first free ``<entry>-v<k>`` (``entry-1-v3`` after ``-v1`` and ``-v2``), at most 200 characters.

    Probes the unique (artifact, version_id) index, doubling k and then bisecting: O(log k) lookups.
    Counting the entry's versions instead read every version of the artifact (entry_id has no index
    of its own), so each write cost O(memory size). A long entry id is cut to leave room for the suffix.
    ``reserved`` holds the ids this revision already uses; the one returned is added to it.
    """

    def candidate(k: int) -> str:
        suffix = f"-v{k}"
        return entry_id[: MAX_IDENTIFIER_CHARACTERS - len(suffix)] + suffix

    def taken(k: int) -> bool:
        version_id = candidate(k)
        return version_id in reserved or (
            MemoryEntryVersion.objects.filter(artifact=artifact, version_id=version_id).exists()
        )

    low, high = 0, 1  # low is taken (0 stands for "none"); high is free once the doubling stops
    while taken(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if taken(middle) else (low, middle)
    reserved.add(candidate(high))
    return candidate(high)


@transaction.atomic
def memory_revision_create(
    *,
    scope: Scope,
    artifact_id: str,
    writes: Sequence[EntryVersionWrite] = (),
    removals: Sequence[str] = (),
    author: str,
    expected_head_revision: int | None = None,
    require_new_entries: bool = False,
    require_existing_entries: bool = False,
) -> MemoryRevisionResult:
    """Apply entry additions, updates and removals to a memory artifact as one new revision.

    ``require_new_entries`` turns a write to an existing entry into a Conflict;
    ``require_existing_entries`` turns a write or removal of a missing entry into NotFound.
    """
    if not writes and not removals:
        raise InvalidInput("a memory revision must change at least one entry", path="entries")
    touched = [w.entry_id for w in writes] + list(removals)
    if len(set(touched)) != len(touched):
        raise InvalidInput("an entry may change only once per revision", path="entries")
    explicit_versions = [w.version_id for w in writes if w.version_id is not None]
    if len(set(explicit_versions)) != len(explicit_versions):
        raise InvalidInput("a version id may be given only once per revision", path="entries")
    for i, write in enumerate(writes):
        _check_identifier(write.entry_id, path=f"entries[{i}].id")
        if write.version_id is not None:
            _check_identifier(write.version_id, path=f"entries[{i}].version")
        _check_text(write.body, path=f"entries[{i}].body")

    artifact = _artifact_for_write(scope=scope, family=Family.MEMORY, artifact_id=artifact_id)
    live = {
        v.entry_id: v
        for v in MemoryEntryVersion.objects.filter(
            artifact=artifact, entry_id__in=touched, retired_in_revision__isnull=True
        )
    }
    for write in writes:
        if require_new_entries and write.entry_id in live:
            raise Conflict(f"entry {write.entry_id!r} already exists")
        if require_existing_entries and write.entry_id not in live:
            raise NotFound(f"entry {write.entry_id!r} does not exist")
    for entry_id in removals:
        if entry_id not in live:
            raise NotFound(f"entry {entry_id!r} does not exist")
    for write in writes:
        if write.version_id is not None and (
            MemoryEntryVersion.objects.filter(artifact=artifact, version_id=write.version_id).exists()
        ):
            raise Conflict(f"version {write.version_id!r} already exists")

    previous_sha = (
        ArtifactRevision.objects.filter(artifact=artifact, revision=artifact.head_revision)
        .values_list("content_sha256", flat=True)
        .first()
        or ""
    )
    number = _next_revision(artifact, expected_head_revision=expected_head_revision)
    retired = [live[w.entry_id] for w in writes if w.entry_id in live] + [live[e] for e in removals]
    reserved = {w.version_id for w in writes if w.version_id is not None}  # ids of this revision, unsaved yet
    added = [
        MemoryEntryVersion(
            artifact=artifact,
            entry_id=w.entry_id,
            version_id=w.version_id or _new_version_id(artifact, w.entry_id, reserved=reserved),
            body=w.body,
            content_sha256=sha256_text(w.body),
            born_in_revision=number,
        )
        for w in writes
    ]
    revision = ArtifactRevision.objects.create(
        artifact=artifact,
        revision=number,
        content_sha256=memory_revision_sha256(previous_sha, added, retired),
        author=author,
    )
    if retired:
        MemoryEntryVersion.objects.filter(pk__in=[v.pk for v in retired]).update(retired_in_revision=number)
        _recall_index_remove(
            artifact=artifact,
            documents=RecallDocument.objects.filter(entry_version__in=[v.pk for v in retired]),
        )
    for version in added:
        version.save()
        _recall_index_add(artifact=artifact, text=version.body, entry_version=version)
    return MemoryRevisionResult(revision=revision, added=tuple(added), retired=tuple(retired))


# --- experience, topic memory, profile -------------------------------------------------------


def _single_text_revision_create(
    *,
    scope: Scope,
    family: str,
    artifact_id: str,
    author: str,
    expected_head_revision: int | None,
    body: str | None,
    title: str | None = None,
    summary: str | None = None,
    content_sha256: str,
    index_text: str | None,
) -> ArtifactRevision:
    artifact = _artifact_for_write(scope=scope, family=family, artifact_id=artifact_id)
    number = _next_revision(artifact, expected_head_revision=expected_head_revision)
    revision = ArtifactRevision.objects.create(
        artifact=artifact,
        revision=number,
        body=body,
        title=title,
        summary=summary,
        content_sha256=content_sha256,
        author=author,
    )
    if index_text is not None:
        _recall_index_remove(artifact=artifact, documents=RecallDocument.objects.filter(artifact=artifact))
        _recall_index_add(artifact=artifact, text=index_text, revision=revision)
    return revision


@transaction.atomic
def experience_revision_create(
    *, scope: Scope, artifact_id: str, body: str, author: str, expected_head_revision: int | None = None
) -> ArtifactRevision:
    """Record the next revision of an experience; recall then sees only this head."""
    _check_text(body, path="body")
    return _single_text_revision_create(
        scope=scope,
        family=Family.EXPERIENCE,
        artifact_id=artifact_id,
        author=author,
        expected_head_revision=expected_head_revision,
        body=body,
        content_sha256=sha256_text(body),
        index_text=body,
    )


def topic_memory_sha256(*, title: str, summary: str, body: str | None) -> str:
    """The content hash of a topic-memory revision (title, summary and optional detail)."""
    return sha256_text(canonical_json({"title": title, "summary": summary, "body": body}))


@transaction.atomic
def topic_memory_revision_create(
    *,
    scope: Scope,
    artifact_id: str,
    title: str,
    summary: str,
    body: str | None = None,
    author: str,
    expected_head_revision: int | None = None,
) -> ArtifactRevision:
    """Record the next revision of a topic memory (title, summary, optional detail body)."""
    _check_text(title, path="title", max_length=MAX_TOPIC_TITLE_CHARACTERS)
    _check_text(summary, path="summary")
    if body is not None:
        _check_text(body, path="body")
    return _single_text_revision_create(
        scope=scope,
        family=Family.TOPIC_MEMORY,
        artifact_id=artifact_id,
        author=author,
        expected_head_revision=expected_head_revision,
        body=body,
        title=title,
        summary=summary,
        content_sha256=topic_memory_sha256(title=title, summary=summary, body=body),
        index_text="\n".join(part for part in (title, summary, body) if part),
    )


@transaction.atomic
def profile_revision_create(
    *, scope: Scope, artifact_id: str, body: str, author: str, expected_head_revision: int | None = None
) -> ArtifactRevision:
    """Record a committed profile snapshot directly (fixtures; hosts go through candidates)."""
    _check_text(body, path="body")
    return _single_text_revision_create(
        scope=scope,
        family=Family.PROFILE,
        artifact_id=artifact_id,
        author=author,
        expected_head_revision=expected_head_revision,
        body=body,
        content_sha256=sha256_text(body),
        index_text=None,
    )


@transaction.atomic
def profile_candidate_propose(
    *, scope: Scope, artifact_id: str, body: str, proposed_by: str, status: str = ProfileCandidate.Status.PENDING
) -> ProfileCandidate:
    """Propose a profile snapshot; it reaches prepare only once committed."""
    _check_text(body, path="body")
    if status not in (ProfileCandidate.Status.PENDING, ProfileCandidate.Status.REJECTED):
        raise InvalidInput("a new candidate is pending or rejected", path="status")
    try:
        with transaction.atomic():
            artifact, _ = Artifact.objects.get_or_create(scope=scope, family=Family.PROFILE, artifact_id=artifact_id)
    except IntegrityError:
        artifact = Artifact.objects.get(scope=scope, family=Family.PROFILE, artifact_id=artifact_id)
    return ProfileCandidate.objects.create(
        artifact=artifact, body=body, content_sha256=sha256_text(body), status=status, proposed_by=proposed_by
    )


@transaction.atomic
def profile_candidate_commit(
    *, candidate: ProfileCandidate, committed_by: str, expected_head_revision: int | None = None
) -> ArtifactRevision:
    """Commit a pending candidate: it becomes the next immutable profile revision."""
    candidate = ProfileCandidate.objects.select_for_update().select_related("artifact__scope").get(pk=candidate.pk)
    if candidate.status != ProfileCandidate.Status.PENDING:
        raise Conflict(f"candidate is {candidate.status}, not pending")
    revision = profile_revision_create(
        scope=candidate.artifact.scope,
        artifact_id=candidate.artifact.artifact_id,
        body=candidate.body,
        author=committed_by,
        expected_head_revision=expected_head_revision,
    )
    ProfileCandidate.objects.filter(pk=candidate.pk).update(
        status=ProfileCandidate.Status.COMMITTED, committed_revision=revision.revision
    )
    return revision


@transaction.atomic
def profile_candidate_reject(*, candidate: ProfileCandidate) -> ProfileCandidate:
    """Reject a pending candidate; the committed head is untouched."""
    updated = ProfileCandidate.objects.filter(pk=candidate.pk, status=ProfileCandidate.Status.PENDING).update(
        status=ProfileCandidate.Status.REJECTED
    )
    if not updated:
        raise Conflict("only a pending candidate can be rejected")
    candidate.refresh_from_db()
    return candidate


# --- API keys ---------------------------------------------------------------------------------


@transaction.atomic
def api_key_create(
    *,
    name: str,
    read_scopes: Sequence[Scope] = (),
    write_scopes: Sequence[Scope] = (),
    key: str | None = None,
) -> tuple[ApiKey, str]:
    """Create a key with grants; returns the plaintext key, which is never stored."""
    _check_identifier(name, path="name")
    plaintext = key or API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        name=name, key_prefix=plaintext[:API_KEY_SHOWN_PREFIX_CHARACTERS], key_sha256=sha256_text(plaintext)
    )
    rights: dict[int, dict] = {}
    for scope in read_scopes:
        rights.setdefault(scope.pk, {"can_read": False, "can_write": False})["can_read"] = True
    for scope in write_scopes:
        rights.setdefault(scope.pk, {"can_read": False, "can_write": False})["can_write"] = True
    ApiKeyGrant.objects.bulk_create(ApiKeyGrant(api_key=api_key, scope_id=pk, **r) for pk, r in rights.items())
    return api_key, plaintext


def api_key_grant_set(*, api_key: ApiKey, scope: Scope, can_read: bool, can_write: bool) -> ApiKeyGrant:
    """Set what a key may do in a scope."""
    grant, _ = ApiKeyGrant.objects.update_or_create(
        api_key=api_key, scope=scope, defaults={"can_read": can_read, "can_write": can_write}
    )
    return grant


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key: every later request with it answers 401."""
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


# --- families that are stored but never assembled ---------------------------------------------


@transaction.atomic
def artifact_body_revision_create(
    *, scope: Scope, family: str, artifact_id: str, body: str, author: str, expected_head_revision: int | None = None
) -> ArtifactRevision:
    """Record the next revision of a skill, handoff or source artifact (stored, never recalled)."""
    if family not in BODY_ONLY_FAMILIES:
        raise InvalidInput(f"family must be one of {', '.join(BODY_ONLY_FAMILIES)}", path="family")
    _check_text(body, path="body")
    return _single_text_revision_create(
        scope=scope,
        family=family,
        artifact_id=artifact_id,
        author=author,
        expected_head_revision=expected_head_revision,
        body=body,
        content_sha256=sha256_text(body),
        index_text=None,
    )
