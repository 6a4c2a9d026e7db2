"""Recompute every revision's hashes from the stored rows and report what differs (docs/deployment.md, section 9).

Per artifact, in batches (memory stays bounded whatever the history's size): each revision's content hash (its
texts, or for memory the chain over the entry versions born and retired in it), the hash of its texts, each entry
version's hash of its body, the counts a revision declares, the chain linking it to its predecessor (which covers
every column a read serves or the selection policy uses: times, author, slots, texts), that revisions run 1..head
without a gap, and that nothing lies above the head (no revision, no entry version born or retired there). A
superuser who edits rows with the triggers lifted breaks one of these; one who recomputes a whole chain
consistently is caught by an anchor: ``--write-anchor FILE`` records each artifact's head and chain hash,
``--anchor FILE`` checks that the database still extends every anchored chain. Keep anchors off the database host.
Both files are checked before the verification starts (a run can take hours); an anchor replaces the previous one
at once, never left half written.

Progress goes to stderr, the per-artifact report and summary to stdout (``--json``: one JSON document); the exit
status is 0 when everything verifies and 1 when anything does not.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import nullcontext
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from artifacts.selectors.erasures import ErasureIndex, erasure_chain_walk
from artifacts.selectors.history import (
    AboveHead,
    ArtifactIdentity,
    RevisionHistory,
    StrayVersion,
    history_artifact_batches,
    history_artifact_count,
    history_revisions,
)
from vocabulary.escaping import artifact_label, json_literal
from vocabulary.history import (
    ERASED_HASHES,
    Mismatch,
    entry_version_mismatch,
    revision_chain_v1_sha256,
    revision_mismatches,
)
from vocabulary.text import canonical_json, sha256_text

ANCHOR_FORMAT = "powercontext.history-anchor.v2"
ENCODING_1_ANCHOR_FORMAT = "powercontext.history-anchor.v1"
"""An anchor written before migration 0022: its heads are chain encoding 1 hashes, which the rows no longer store.
It stays verifiable: with one, each anchored artifact's encoding 1 chain is recomputed from the rows (what encoding 1
covered, not what only encoding 2 covers) and compared at the anchored head."""
BATCH = 500


def anchor_digest(heads: list[list], erasure_head: list | None = None) -> str:
    """The digest over every anchored head, and the erasure chain's last record when there was one: a file edited by
    hand no longer matches it (an anchor without erasures digests exactly as before erasures existed)."""
    if erasure_head is None:
        return sha256_text(canonical_json(heads))
    return sha256_text(canonical_json({"heads": heads, "erasure_head": erasure_head}))


def anchor_erasure_head(head: object) -> list | None:
    """The anchored erasure head, ``[sequence, chain_sha256]`` or None; ValueError when malformed."""
    if head is None:
        return None
    if not (isinstance(head, list) and len(head) == 2 and type(head[0]) is int and head[0] >= 1):
        raise ValueError("erasure_head must be [sequence, chain_sha256]")
    if not isinstance(head[1], str):
        raise ValueError("erasure_head: chain_sha256 must be a string")
    return head


def anchor_heads(heads: object) -> dict[tuple[str, str, str], tuple[int, str | None]]:
    """The anchored heads by (scope id, family, artifact id): (revision, chain hash); ValueError names a bad one.

    A correct digest proves only that the file was not edited after it was written, not that it has the shape
    this version writes: every head is checked before it is used.
    """
    if not isinstance(heads, list):
        raise ValueError(f"heads must be a list, not {type(heads).__name__}")
    anchored = {}
    for number, head in enumerate(heads):
        if not isinstance(head, list) or len(head) != 5:
            raise ValueError(f"head {number} must be [scope_id, family, artifact_id, revision, chain_sha256]")
        scope_id, family, artifact_id, revision, chain = head
        if not all(isinstance(value, str) for value in (scope_id, family, artifact_id)):
            raise ValueError(f"head {number}: scope_id, family and artifact_id must be strings")
        if type(revision) is not int or revision < 1:  # bool is an int: refused too
            raise ValueError(f"head {number}: revision must be a whole number from 1")
        if chain is not None and not isinstance(chain, str):
            raise ValueError(f"head {number}: chain_sha256 must be a string or null")
        if (scope_id, family, artifact_id) in anchored:
            raise ValueError(f"head {number}: the artifact is anchored twice")
        anchored[scope_id, family, artifact_id] = (revision, chain)
    return anchored


class AnchorTarget:
    """Where ``--write-anchor`` goes: a temporary file beside it, made at once, put in its place when written.

    Made before the verification, it proves the directory exists and is writable when the run starts, not
    hours later; replacing the target only once the new anchor is on disk (``os.replace``, atomic on POSIX)
    means an interruption or a full disk leaves the previous anchor whole.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise CommandError(f"cannot write anchor {path}: it is a directory")
        try:
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise CommandError(f"cannot write anchor {path}: {exc.strerror or exc}") from exc
        os.close(fd)
        self.temporary = Path(temporary)

    def write(self, text: str) -> None:
        """Write ``text`` to the temporary file, flush it to disk, then put it in place of the target."""
        try:
            with self.temporary.open("w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            umask = os.umask(0)  # mkstemp made the file 0600: give it the mode a plain write would have
            os.umask(umask)
            self.temporary.chmod(0o666 & ~umask)
            os.replace(self.temporary, self.path)
        except OSError as exc:
            raise CommandError(f"cannot write anchor {self.path}: {exc}") from exc
        try:  # the rename itself on disk (POSIX); not every platform opens a directory
            directory = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(directory)
        except OSError:
            pass
        finally:
            os.close(directory)

    def discard(self) -> None:
        """Remove the temporary file if it is still there (the verification failed, or the write did)."""
        self.temporary.unlink(missing_ok=True)


def _batch_transaction():
    """PostgreSQL: one transaction per batch, so its streams are plain server-side cursors (outside one, Django
    declares them WITH HOLD and the server copies each whole result at once). SQLite: none (every transaction there
    takes the write lock)."""
    return transaction.atomic() if connection.vendor == "postgresql" else nullcontext()


def _problem_line(problem: dict) -> str:
    """One line of the text report: the artifact, the revision, what differs."""
    where = f"scope {json_literal(problem['scope_id'])} {artifact_label(problem['family'], problem['artifact_id'])}"
    if problem["revision"] is not None:
        where += f" revision {problem['revision']}"
    if problem["stored"] is None and problem["computed"] is None:
        return f"{where}: {problem['problem']}"
    return f"{where}: {problem['problem']} (stored {problem['stored']}, recomputed {problem['computed']})"


def _above_head(item: AboveHead) -> Mismatch:
    """What a row above its artifact's head is: the revision, or the entry version born or retired there."""
    where = f"above the head (revision {item.head})"
    if item.version is None:
        return Mismatch(f"revision stored {where}", None, None)
    name = f"{json_literal(item.version.entry_id)}@{json_literal(item.version.version_id)}"
    return Mismatch(f"entry {name} {item.event} in a revision {where}", None, None)


def _texts_blank(stored) -> bool:
    """A revision of a single-text family whose texts an erasure blanked (a memory revision holds no text)."""
    texts = (stored.body, stored.title, stored.summary)
    return any(text == "" for text in texts) and all(text in ("", None) for text in texts)


def _erasure_line(record: dict) -> str:
    """One line of the text report per erasure: what, when, by whom, why (an erasure is never a problem)."""
    what = f"scope {json_literal(record['scope_id'])}"
    if record["artifact_id"] is not None:
        what += f" {artifact_label(record['family'], record['artifact_id'])}"
    if record["revision"] is not None:
        what += f" revision {record['revision']}"
    if record["version_id"] is not None:
        what += f" entry {json_literal(record['entry_id'])}@{json_literal(record['version_id'])}"
    return (
        f"erasure #{record['sequence']} ({record['kind']}) of {what}: {record['rows_erased']} texts erased at "
        f"{record['erased_at']} by {json_literal(record['erased_by'])}, reason {json_literal(record['reason'])}"
    )


class Command(BaseCommand):
    help = "Recompute every revision's content and chain hashes from the rows; exit 1 when anything differs."

    def add_arguments(self, parser):
        parser.add_argument("--scope", help="only the artifacts of this scope id")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON document, not text")
        parser.add_argument("--write-anchor", metavar="FILE", help="write each artifact's head and chain hash")
        parser.add_argument("--anchor", metavar="FILE", help="check the database still extends these chains")

    def handle(self, *args, scope=None, as_json=False, write_anchor=None, anchor=None, **options):
        self._anchored_erasure = None
        self._anchor_encoding = 2
        anchored = self._read_anchor(anchor, scope) if anchor else {}
        target = AnchorTarget(write_anchor) if write_anchor else None
        try:
            self._verify(scope, as_json, target, anchored)
        finally:
            if target is not None:
                target.discard()

    def _verify(self, scope, as_json, target: AnchorTarget | None, anchored) -> None:
        total = history_artifact_count(scope_id=scope)
        problems: list[dict] = []
        counts = {"artifacts": 0, "revisions": 0, "entry_versions": 0, "erased_texts": 0}
        heads: list[list] = []
        erasures = ErasureIndex()
        records = self._verify_erasures(erasures, problems)
        self._check_erasure_anchor(problems, records)
        for batch in history_artifact_batches(scope_id=scope, batch=BATCH):
            with _batch_transaction():
                self._verify_batch(batch, problems, counts, heads, anchored, erasures)
            counts["artifacts"] += len(batch)
            self.stderr.write(f"verify_history: {counts['artifacts']} of {total} artifacts")
        for (scope_id, family, artifact_id), (revision, _) in sorted(anchored.items()):
            problems.append(
                {
                    "scope_id": scope_id,
                    "family": family,
                    "artifact_id": artifact_id,
                    "revision": revision,
                    "problem": "anchored artifact or revision missing",
                    "stored": None,
                    "computed": None,
                }
            )
        failed = {(p["scope_id"], p["family"], p["artifact_id"]) for p in problems}
        summary = {**counts, "erasures": len(records), "problems": len(problems), "artifacts_failing": len(failed)}
        if as_json:
            self.stdout.write(
                canonical_json({"ok": not problems, **summary, "report": problems, "erasure_records": records})
            )
        else:
            for record in records:
                self.stdout.write(_erasure_line(record))
            for problem in problems:
                self.stdout.write(_problem_line(problem))
            erased = f", {len(records)} erasures ({counts['erased_texts']} erased texts)" if records else ""
            self.stdout.write(
                f"checked {counts['artifacts']} artifacts, {counts['revisions']} revisions, "
                f"{counts['entry_versions']} entry versions{erased}: "
                f"{len(problems)} problems in {len(failed)} artifacts"
            )
        if problems:
            raise CommandError(f"history does not verify: {len(problems)} problems in {len(failed)} artifacts")
        if target is not None:
            erasure_head = [records[-1]["sequence"], records[-1]["chain_sha256"]] if records else None
            document = {
                "format": ANCHOR_FORMAT,
                "written_at": timezone.now().isoformat(),
                "heads": heads,
                "digest": anchor_digest(heads, erasure_head),
            }
            if erasure_head is not None:
                document["erasure_head"] = erasure_head
            target.write(canonical_json(document) + "\n")
            self.stderr.write(f"verify_history: anchor of {len(heads)} heads written to {target.path}")

    def _check_erasure_anchor(self, problems: list[dict], records: list[dict]) -> None:
        """The erasure chain still extends the anchored one: its record at the anchored sequence has the anchored chain
        hash (records removed from its end, or a chain recomputed consistently, are caught here)."""
        if self._anchored_erasure is None:
            return
        sequence, chain = self._anchored_erasure
        found = next((record for record in records if record["sequence"] == sequence), None)
        if found is None or found["chain_sha256"] != chain:
            problems.append(
                {
                    "scope_id": found["scope_id"] if found else "",
                    "family": (found or {}).get("family") or "",
                    "artifact_id": (found or {}).get("artifact_id") or "",
                    "revision": None,
                    "problem": f"anchored erasure #{sequence} " + ("missing" if found is None else "chain_sha256"),
                    "stored": found["chain_sha256"] if found else None,
                    "computed": chain if found else None,
                }
            )

    @staticmethod
    def _verify_erasures(erasures: ErasureIndex, problems: list[dict]) -> list[dict]:
        """The erasure chain, every record recomputed and linked (problems reported against the record's target)."""
        records = []
        for checked in erasure_chain_walk(erasures):
            record = checked.record
            records.append(record)
            for mismatch in checked.mismatches:
                problems.append(
                    {
                        "scope_id": record["scope_id"],
                        "family": record["family"] or "",
                        "artifact_id": record["artifact_id"] or "",
                        "revision": record["revision"],
                        "problem": f"{mismatch.what} of erasure #{record['sequence']}",
                        "stored": mismatch.stored,
                        "computed": mismatch.computed,
                    }
                )
        return records

    def _verify_batch(self, batch, problems, counts, heads, anchored, erasures: ErasureIndex) -> None:
        chained: dict[int, tuple[int, str, str | None]] = {}  # artifact pk: (revision, content, chain) last seen
        encoding_1: dict[int, str] = {}  # artifact pk: its encoding 1 chain recomputed (an anchor written before 0022)
        for item in history_revisions(batch):
            artifact = item.artifact
            if isinstance(item, AboveHead):
                self._report(problems, artifact, item.revision, _above_head(item))
                continue
            if isinstance(item, StrayVersion):
                self._report(
                    problems,
                    artifact,
                    item.revision,
                    Mismatch(
                        f"entry {json_literal(item.version.entry_id)}@{json_literal(item.version.version_id)} "
                        f"{item.event} in a revision that does not exist",
                        None,
                        None,
                    ),
                )
                continue
            revision = item.stored.revision
            last, content, chain = chained.get(artifact.pk, (0, "", ""))
            if revision != last + 1:
                self._report(problems, artifact, revision, Mismatch("revision number", revision, last + 1))
            mismatches = item.version_mismatches + revision_mismatches(
                scope_id=artifact.scope_id,
                family=artifact.family,
                artifact_id=artifact.artifact_id,
                stored=item.stored,
                previous_content=content,
                previous_chain=chain or "",
                born=item.born,
                retired=item.retired,
            )
            for version, version_pk in item.blank_versions:
                if erasures.names_version(
                    scope_id=artifact.scope_id,
                    artifact_pk=artifact.pk,
                    version_id=version.version_id,
                    version_pk=version_pk,
                    born_in_revision=revision,
                ):
                    counts["erased_texts"] += 1
                # Blank with no record naming it: tampering, like any other changed body (a blank version's hash is
                # never the empty text's, so there is a mismatch).
                elif (mismatch := entry_version_mismatch(version, "")) is not None:
                    mismatches.append(mismatch)
            # A revision from history_revisions always has its row id (pk).
            if (
                _texts_blank(item.stored)
                and item.pk is not None
                and erasures.names_revision(
                    scope_id=artifact.scope_id, artifact_pk=artifact.pk, revision=revision, revision_pk=item.pk
                )
            ):
                # Erased: its texts no longer hash to its kept hashes, which stay in the chain (checked below).
                counts["erased_texts"] += 1
                mismatches = [m for m in mismatches if m.what not in ERASED_HASHES]
            for mismatch in mismatches:
                self._report(problems, artifact, revision, mismatch)
            anchored_chain = item.stored.chain_sha256
            if self._anchor_encoding == 1 and (artifact.scope_id, artifact.family, artifact.artifact_id) in anchored:
                anchored_chain = encoding_1[artifact.pk] = revision_chain_v1_sha256(
                    previous_chain=encoding_1.get(artifact.pk, ""),
                    scope_id=artifact.scope_id,
                    family=artifact.family,
                    artifact_id=artifact.artifact_id,
                    revision=revision,
                    content_sha256=item.stored.content_sha256,
                    author=item.stored.author,
                    born=item.born,
                    retired=item.retired,
                )
            self._check_anchor(problems, artifact, item, anchored, anchored_chain)
            chained[artifact.pk] = (revision, item.stored.content_sha256, item.stored.chain_sha256)
            counts["revisions"] += 1
            counts["entry_versions"] += len(item.born)
        for artifact in batch:
            last, _, chain = chained.get(artifact.pk, (0, "", None))
            if last != artifact.head_revision:
                self._report(problems, artifact, None, Mismatch("head revision", artifact.head_revision, last))
            if last:
                heads.append([artifact.scope_id, artifact.family, artifact.artifact_id, last, chain])

    @staticmethod
    def _check_anchor(problems, artifact: ArtifactIdentity, item: RevisionHistory, anchored, found: str | None) -> None:
        """The anchored head's chain hash against ``found``: the stored one, or for an anchor written before 0022 the
        encoding 1 chain recomputed from the rows."""
        key = (artifact.scope_id, artifact.family, artifact.artifact_id)
        if key in anchored and anchored[key][0] == item.stored.revision:
            _, chain = anchored.pop(key)
            if chain != found:
                mismatch = Mismatch("chain_sha256 at the anchored head", found, chain)
                Command._report(problems, artifact, item.stored.revision, mismatch)

    @staticmethod
    def _report(problems, artifact: ArtifactIdentity, revision: int | None, mismatch: Mismatch) -> None:
        problems.append(
            {
                "scope_id": artifact.scope_id,
                "family": artifact.family,
                "artifact_id": artifact.artifact_id,
                "revision": revision,
                "problem": mismatch.what,
                "stored": mismatch.stored,
                "computed": mismatch.computed,
            }
        )

    def _read_anchor(self, path: str, scope: str | None) -> dict[tuple[str, str, str], tuple[int, str | None]]:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
            heads = document["heads"]
            erasure_head = anchor_erasure_head(document.get("erasure_head"))
            known = (ANCHOR_FORMAT, ENCODING_1_ANCHOR_FORMAT)
            if document.get("format") not in known or document.get("digest") != anchor_digest(heads, erasure_head):
                raise ValueError("not an anchor this version wrote, or edited since")
            self._anchor_encoding = 1 if document["format"] == ENCODING_1_ANCHOR_FORMAT else 2
            self._anchored_erasure = erasure_head
            anchored = anchor_heads(heads)  # inside the try: a malformed head is refused, never a traceback
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"cannot use anchor {path}: {exc}") from exc
        return {key: head for key, head in anchored.items() if scope is None or key[0] == scope}
