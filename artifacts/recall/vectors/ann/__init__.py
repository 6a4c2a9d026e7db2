"""An approximate-nearest-neighbour index (usearch HNSW) that ranks the large pairs' vectors, beside the exact scan.

The dense twin of the lexical engine (``recall.engine``): the database stays the source of truth, and the index is a
per-machine, file-backed copy of one (scope, family, model) pair's vectors under POWERCONTEXT_SEARCH_INDEX_DIR
(``dense-v1/``), built and brought up to date by ``manage.py recall_vector_index_build``. Every worker maps the same
file (``usearch`` views it), so a machine holds one copy however many workers it runs.

At query time the index only proposes candidates: they are read back from the database with the vectors written
since the index's watermark (the tail), scored exactly from the stored vectors and ordered as ``ranking.dense_rank``
orders (cosine desc, document id asc). A pair below POWERCONTEXT_DENSE_INDEX_MIN_VECTORS, and one whose index is
missing, damaged, built for another model or too far behind, is ranked by the exact scan (``vectors.resident``).

- ``store``: the index files, their metadata and this process's views of them
- ``build``: full and incremental builds from the database
- ``query``: candidates, the tail, exact rescoring, the fallback
"""

from __future__ import annotations

from artifacts.recall.vectors.ann.query import count_missing, ranked_by_index

__all__ = ["count_missing", "ranked_by_index"]
