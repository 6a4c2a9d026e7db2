"""Recall index maintenance at write time: one document per live text, its postings and statistics.

Called inside the write services' transactions, so the index always reflects exactly the live heads.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F

from artifacts.models import (
    Artifact,
    ArtifactRevision,
    MemoryEntryVersion,
    RecallCorpusStat,
    RecallDocument,
    RecallPosting,
    RecallTermStat,
)
from artifacts.recall import tokenize


def recall_index_add(
    *,
    artifact: Artifact,
    text: str,
    entry_version: MemoryEntryVersion | None = None,
    revision: ArtifactRevision | None = None,
) -> None:
    frequencies, length = tokenize.term_frequencies(text)
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


def recall_index_remove(*, artifact: Artifact, documents: Iterable[RecallDocument]) -> None:
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
