"""The recall index's table names, as every recall statement spells them (the models are in ``artifacts.models``)."""

from __future__ import annotations

from artifacts.models import RecallCorpusStat, RecallDocument, RecallPosting, RecallTermStat, RecallVector

POSTINGS_TABLE = RecallPosting._meta.db_table
DOCUMENTS_TABLE = RecallDocument._meta.db_table
CORPUS_TABLE = RecallCorpusStat._meta.db_table
TERM_STATS_TABLE = RecallTermStat._meta.db_table
VECTORS_TABLE = RecallVector._meta.db_table
