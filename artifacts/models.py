"""Storage model: scopes, references, artifacts and their immutable revisions (DESIGN §3).

Every ``__str__`` shows identities escaped (``vocabulary.escaping``): admin titles, breadcrumbs, change
lists and history pages never display a raw bidi control or invisible character.

Revisions and memory entry versions are append-only. The database refuses UPDATE and DELETE of
them (triggers installed by migration, see ``artifacts/immutability.py``); the only permitted
change is stamping a live entry version's ``retired_in_revision`` once, from NULL to a number.
"""

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from vocabulary.authority import AUTHORITY_TIERS
from vocabulary.escaping import artifact_label, short_identity
from vocabulary.families import STORED_FAMILIES
from vocabulary.limits import MAX_CONFLICT_KEY_CHARACTERS

Family = models.TextChoices(  # type: ignore[call-overload]  # the stubs lack Enum's functional API, which Django has
    "Family", [(family.upper(), family) for family in STORED_FAMILIES]
)
"""Every family storage knows (``Family.MEMORY == "memory"``), from the shared vocabulary."""


class Scope(models.Model):
    """A namespace of knowledge (``project:demo``); the unit of authorization."""

    scope_id = models.CharField(max_length=200, unique=True)
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The selection policy's authority tier of everything stored here (vocabulary.authority), set by operators only.
    # Nullable so that SQLite adds the column in place (a NOT NULL column rebuilds the table and drops its triggers);
    # null is AUTHORITY_DEFAULT.
    authority = models.CharField(
        max_length=32, null=True, blank=True, choices=[(tier, tier) for tier in AUTHORITY_TIERS]
    )

    class Meta:
        ordering = ["scope_id"]
        # Changing a scope (its title, its references) does not include its tier: a tier decides which stored
        # fact wins a conflict slot, so it is a permission of its own (operator_tools.access, docs/deployment.md).
        permissions = [("change_scope_authority", "Can set a scope's authority tier (selection policy)")]

    def __str__(self) -> str:
        return short_identity(self.scope_id)


class ContextReference(models.Model):
    """A direct, ordered reference from one scope to another whose items prepare also reads."""

    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="references")
    target = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="referenced_by")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["scope", "position"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "target"], name="reference_unique_target"),
            models.UniqueConstraint(fields=["scope", "position"], name="reference_unique_position"),
            models.CheckConstraint(condition=~Q(scope=F("target")), name="reference_not_self"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} → {self.target} (#{self.position})"


class Artifact(models.Model):
    """A named, versioned item of one family in one scope; its content lives in revisions."""

    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="artifacts")
    family = models.CharField(max_length=20, choices=Family.choices)
    artifact_id = models.CharField(max_length=200)
    head_revision = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["scope", "family", "artifact_id"]
        constraints = [
            models.UniqueConstraint(fields=["scope", "family", "artifact_id"], name="artifact_unique_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {artifact_label(self.family, self.artifact_id)}"


class ArtifactRevision(models.Model):
    """One immutable revision of an artifact, numbered 1, 2, 3 … without gaps."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="revisions")
    revision = models.PositiveIntegerField()
    body = models.TextField(null=True, blank=True)
    title = models.TextField(null=True, blank=True)
    summary = models.TextField(null=True, blank=True)
    content_sha256 = models.CharField(max_length=64, db_index=True)
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    # How many entry versions this revision births and retires: the database lets no more be born or retired in
    # it (artifacts/immutability.py), so once its write commits its changes are sealed. Null (rows written before
    # migration 0011 filled them, or by an older worker) counts as 0.
    entries_born = models.PositiveIntegerField(null=True, blank=True)
    entries_retired = models.PositiveIntegerField(null=True, blank=True)
    # vocabulary.history.revision_chain_sha256: this revision chained to its predecessor (manage.py verify_history).
    chain_sha256 = models.CharField(max_length=64, null=True, blank=True)
    # vocabulary.history.revision_texts_sha256 of its title, summary and body, which the chain covers (migration 0022):
    # kept when an erasure blanks them, as content_sha256 is. Nullable so SQLite adds the column in place.
    texts_sha256 = models.CharField(max_length=64, null=True, blank=True)
    # Not columns: set by the selectors that read them with the revision. A memory revision's page of live entry
    # versions and the entry id the next page starts after (exact_reads); the versions a history page's revision
    # added and retired (history_pages).
    entries: "list[MemoryEntryVersion]"
    next_entries_after: str | None
    added: "list[MemoryEntryVersion]"
    retired: "list[MemoryEntryVersion]"

    class Meta:
        ordering = ["artifact", "revision"]
        constraints = [
            models.UniqueConstraint(fields=["artifact", "revision"], name="revision_unique_number"),
            models.CheckConstraint(condition=Q(revision__gte=1), name="revision_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.artifact} r{self.revision}"


class MemoryEntryVersion(models.Model):
    """An immutable version of one memory entry, live from one artifact revision until retired."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="entry_versions")
    entry_id = models.CharField(max_length=200)
    version_id = models.CharField(max_length=200)
    body = models.TextField()
    content_sha256 = models.CharField(max_length=64, db_index=True)
    # The fact slot the writer declared (seeds/003 conflict slots); part of the immutable version. Null: no slot.
    conflict_key = models.CharField(max_length=MAX_CONFLICT_KEY_CHARACTERS, null=True, blank=True)
    born_in_revision = models.PositiveIntegerField()
    retired_in_revision = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # This version's position among the versions its revision births (retires), 1..entries_born (entries_retired),
    # unique per revision: a revision holds at most the changes it declared, each checked by one index probe (a
    # count of the revision's versions per row made a write of n entries cost O(n²)). Null: not retired, or born or
    # retired in a revision that was no longer its artifact's head when migration 0011 ran.
    born_ordinal = models.PositiveIntegerField(null=True, blank=True)
    retired_ordinal = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["artifact", "born_in_revision", "entry_id"]
        constraints = [
            models.UniqueConstraint(fields=["artifact", "version_id"], name="entry_version_unique_id"),
            models.UniqueConstraint(
                fields=["artifact", "entry_id"],
                condition=Q(retired_in_revision__isnull=True),
                name="entry_one_live_version",
            ),
            models.CheckConstraint(
                condition=Q(retired_in_revision__isnull=True) | Q(retired_in_revision__gt=F("born_in_revision")),
                name="entry_retired_after_born",
            ),
            # Partial: an index, never a deferrable constraint, and SQLite adds it without rebuilding the table.
            models.UniqueConstraint(
                fields=["artifact", "born_in_revision", "born_ordinal"],
                condition=Q(born_ordinal__isnull=False),
                name="entry_born_ordinal_unique",
            ),
            models.UniqueConstraint(
                fields=["artifact", "retired_in_revision", "retired_ordinal"],
                condition=Q(retired_ordinal__isnull=False),
                name="entry_retired_ordinal_unique",
            ),
        ]
        indexes = [
            models.Index(fields=["artifact", "born_in_revision"], name="entry_version_born_idx"),
            models.Index(fields=["artifact", "retired_in_revision"], name="entry_version_retired_idx"),
            # A page of a revision's live entries (exact reads) walks this in order and stops after the page, rather
            # than sorting every version of the artifact: 16 -> 6 ms a page at 20,000 entries on SQLite.
            models.Index(fields=["artifact", "entry_id", "version_id"], name="entry_version_order_idx"),
        ]

    def __str__(self) -> str:
        return f"{short_identity(self.entry_id)}@{short_identity(self.version_id)}"

    def is_live_at(self, revision: int) -> bool:
        """Whether this version was live in the given artifact revision."""
        return self.born_in_revision <= revision and (
            self.retired_in_revision is None or revision < self.retired_in_revision
        )


class Erasure(models.Model):
    """One erasure of stored text (issue 51): an entry version, a revision's texts, or everything a scope holds.

    Append-only and chained like history: record ``sequence`` n hashes record n - 1's ``chain_sha256``
    (``vocabulary.history.erasure_chain_sha256``), and the database refuses any update or delete of it and any insert
    that is not the next record of the chain (``artifacts/immutability.py``). The erased rows keep every hash their
    chain was built from; only their texts are blanked, which the triggers allow only while a record naming them
    exists. ``erased_sha256`` is what was erased: the content hash of the one row, or for several rows the SHA-256 of
    their hashes (``vocabulary.history.erased_digest``).
    """

    class Kind(models.TextChoices):
        ENTRY_VERSION = "entry_version"
        REVISION = "revision"
        SCOPE = "scope"

    sequence = models.PositiveIntegerField(unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="+")
    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    revision = models.PositiveIntegerField(null=True, blank=True)
    entry_id = models.CharField(max_length=200, null=True, blank=True)
    version_id = models.CharField(max_length=200, null=True, blank=True)
    rows_erased = models.PositiveIntegerField()
    erased_sha256 = models.CharField(max_length=64)
    # A scope's record names only the rows it found (the largest revision and entry version ids of the scope then):
    # rows written into the scope later are not erased by it, so no one can blank them under its cover.
    revisions_through = models.PositiveBigIntegerField(null=True, blank=True)
    versions_through = models.PositiveBigIntegerField(null=True, blank=True)
    reason = models.TextField()
    erased_by = models.CharField(max_length=200)
    erased_at = models.DateTimeField(default=timezone.now)
    previous_sha256 = models.CharField(max_length=64, blank=True)
    chain_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["sequence"]
        indexes = [
            models.Index(fields=["artifact", "revision"], name="erasure_revision_idx"),
            models.Index(fields=["artifact", "version_id"], name="erasure_version_idx"),
        ]
        # Erasing is its own power: a change permission on history does not exist, and reading it is not erasing.
        permissions = [("erase_content", "Can erase stored text (entry versions, revisions, scopes)")]

    def __str__(self) -> str:
        return f"erasure #{self.sequence} ({self.kind})"


class ProfileCandidate(models.Model):
    """A proposed profile snapshot; committing it creates the next profile revision."""

    class Status(models.TextChoices):
        PENDING = "pending"
        REJECTED = "rejected"
        COMMITTED = "committed"

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="candidates")
    body = models.TextField()
    content_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    committed_revision = models.PositiveIntegerField(null=True, blank=True, editable=False)
    proposed_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["artifact", "created_at", "id"]

    def __str__(self) -> str:
        return f"{self.artifact} candidate #{self.pk} ({self.status})"


class ApiKey(models.Model):
    """A host's credential; only the SHA-256 of the key is stored, the key is shown once."""

    name = models.CharField(max_length=200, unique=True)
    key_prefix = models.CharField(max_length=12, editable=False)
    key_sha256 = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{short_identity(self.name)} ({short_identity(self.key_prefix)}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class ApiKeyGrant(models.Model):
    """What one API key may do in one scope."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="grants")
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="grants")
    can_read = models.BooleanField(default=True)
    can_write = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "scope"], name="grant_unique_scope")]

    def __str__(self) -> str:
        rights = "+".join(r for r, ok in (("read", self.can_read), ("write", self.can_write)) if ok) or "none"
        return f"{short_identity(self.api_key.name)} → {self.scope}: {rights}"


class RecallDocument(models.Model):
    """A live, searchable text: a live memory entry version, or an experience/topic-memory head.

    Rows come and go as heads move (this is an index, not history); the immutable text stays in
    the revision or entry version it points to.
    """

    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    family = models.CharField(max_length=20, choices=Family.choices)
    artifact = models.ForeignKey(Artifact, on_delete=models.CASCADE, related_name="+")
    entry_version = models.OneToOneField(
        MemoryEntryVersion, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    revision = models.OneToOneField(ArtifactRevision, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    length = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["scope", "family"], name="recall_document_scope_idx")]

    def __str__(self) -> str:
        return f"recall document #{self.pk} ({self.family})"


class RecallPosting(models.Model):
    """One term of one live document, with its frequency (an inverted-index row)."""

    document = models.ForeignKey(RecallDocument, on_delete=models.CASCADE, related_name="postings")
    # Denormalized so one index range answers "documents of this scope and family with this term".
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+", db_index=False)
    family = models.CharField(max_length=20)
    term = models.CharField(max_length=64)
    term_frequency = models.PositiveIntegerField()
    document_length = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["scope", "family", "term"], name="recall_posting_term_idx")]

    def __str__(self) -> str:
        return f"{short_identity(self.term)} ×{self.term_frequency} in #{self.document_id}"


class RecallVector(models.Model):
    """One live document's embedding by one model (dense recall, ``artifacts/recall/vectors``).

    A model change never mixes: readers take the rows of one ``model_id`` and dimension only, and a row is written
    only with its model's dimension; one of another dimension by the same model name (the endpoint's dimension
    changed) counts as missing and is replaced when the document is embedded again. Rows go with their document (an
    index, not history).
    """

    # The unique constraint's index (document first) serves the document's lookups and its cascade.
    document = models.ForeignKey(RecallDocument, on_delete=models.CASCADE, related_name="vectors", db_index=False)
    # Denormalized so one index range answers "this scope and family's vectors by this model".
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+", db_index=False)
    family = models.CharField(max_length=20)
    model_id = models.CharField(max_length=200)
    dimension = models.PositiveIntegerField()
    encoding = models.CharField(max_length=8)
    vector = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "model_id"], name="recall_vector_unique")]
        indexes = [models.Index(fields=["scope", "family", "model_id"], name="recall_vector_pair_idx")]

    def __str__(self) -> str:
        return f"{short_identity(self.model_id)} vector of #{self.document_id}"


class RecallTermStat(models.Model):
    """How many live documents of a scope and family contain a term (BM25 document frequency)."""

    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    family = models.CharField(max_length=20)
    term = models.CharField(max_length=64)
    documents = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "family", "term"], name="recall_term_stat_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.family}/{short_identity(self.term)}: {self.documents} documents"


class RecallCorpusStat(models.Model):
    """Live document count and total length per scope and family (BM25 N and average length).

    ``generation`` changes, in the same transaction, with every change of the scope and family's postings:
    a process that keeps a copy of those postings (``recall.resident``) knows by it whether the copy is current.
    The database renews it on every insert and update of the row, whoever writes (``recall.generation``).
    """

    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    family = models.CharField(max_length=20)
    documents = models.PositiveIntegerField(default=0)
    total_length = models.PositiveBigIntegerField(default=0)
    # The database's triggers choose it on every insert and update (0, the default, never stays). An instance
    # just created on SQLite may still hold 0 (its AFTER trigger runs after RETURNING): read the row for it.
    generation = models.BigIntegerField(db_default=0, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "family"], name="recall_corpus_stat_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.family}: {self.documents} documents"


class IdempotentWrite(models.Model):
    """The outcome of one write made with an ``Idempotency-Key``: a retry with that key gets it back.

    Kept per API key for ``POWERCONTEXT_IDEMPOTENCY_RETENTION_HOURS`` (24 h by default), then purged by
    ``manage.py purge_idempotency_keys``. Only successful writes are kept; a refused one can be retried.
    """

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    request_sha256 = models.CharField(max_length=64)
    status = models.PositiveSmallIntegerField(default=0)
    response_body = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["api_key", "key"], name="idempotent_write_unique_key")]

    def __str__(self) -> str:
        return f"{short_identity(self.key)} of {self.api_key_id} ({self.status or 'pending'})"


class PrepareLog(models.Model):
    """One ``POST /v1/context/prepare``: who asked what, what it answered, and exactly what went in.

    A successful prepare records the effective request, the content's size and SHA-256, and in ``record``
    (compact JSON) the scopes read and every recalled candidate's citation per family and per scope, in
    input order: from those immutable revisions the server re-renders the content byte for byte
    (``assembly.replay``). Errors are recorded without bodies. Kept ``POWERCONTEXT_PREPARE_LOG_RETENTION_DAYS``,
    then purged by ``manage.py purge_prepare_log``, which also keeps the whole log under
    ``POWERCONTEXT_PREPARE_LOG_MAX_MB`` (oldest rows first). A query over
    ``POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES`` keeps only its SHA-256 and size; the record then carries what
    replay would have needed it for (which line of each topic memory matched).
    """

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    api_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    scope = models.ForeignKey(Scope, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    scope_sent = models.TextField(blank=True, help_text="the scope id exactly as sent, when the request parsed")
    http_status = models.PositiveSmallIntegerField()
    error_code = models.CharField(max_length=40, blank=True)
    mode = models.CharField(max_length=10, blank=True, help_text="markdown, legacy, or empty for a refused request")
    query = models.TextField(
        blank=True, help_text="the query's text, when at most POWERCONTEXT_PREPARE_LOG_QUERY_MAX_BYTES (else empty)"
    )
    query_sha256 = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the query, kept or not")
    query_bytes = models.PositiveIntegerField(default=0, help_text="UTF-8 bytes of the query, kept or not")
    max_bytes = models.PositiveIntegerField(null=True, blank=True)
    result_status = models.CharField(max_length=10, blank=True)
    content_bytes = models.PositiveIntegerField(default=0)
    content_sha256 = models.CharField(max_length=64, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    record = models.TextField(blank=True)
    stored_bytes = models.PositiveIntegerField(
        default=0, help_text="estimated bytes this row takes, counted against POWERCONTEXT_PREPARE_LOG_MAX_MB"
    )
    # The erasure that scrubbed this row's query because the prepare showed erased text: its replay says so instead
    # of re-rendering (the erased texts are blank now). Null: nothing it showed was erased.
    erasure = models.ForeignKey(Erasure, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "prepare log entry"
        # The list's count reads "4 prepare log entries" (Django counts in the plural name).
        verbose_name_plural = "prepare log entries"
        # Operator powers beyond Django's view/change/add/delete (docs/deployment.md, "Staff roles"): reading what
        # tenants asked and were given, and preparing as any scope, each expose every tenant's text.
        permissions = [
            ("view_prepare_log_content", "Can read logged queries and re-rendered content"),
            ("run_prepare_inspector", "Can run the prepare inspector over every scope"),
        ]

    def __str__(self) -> str:
        scope = short_identity(self.scope_sent) if self.scope_sent else "—"
        return f"prepare #{self.pk} {scope} → {self.http_status}"
