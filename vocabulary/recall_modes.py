"""How prepare recalls (``POWERCONTEXT_RECALL_MODE``): one constant per mode, read by the settings, recall, the
prepare log and the operator pages alike."""

RECALL_MODE_HYBRID = "hybrid"
"""BM25 fused with the dense (semantic) ranking where a scope's documents have vectors (the default)."""
RECALL_MODE_LEXICAL = "lexical"
"""BM25 alone."""
RECALL_MODES = (RECALL_MODE_HYBRID, RECALL_MODE_LEXICAL)

EMBEDDINGS_WRITE_INLINE = "inline"
"""A write embeds its new texts in the request, before its transaction (``POWERCONTEXT_EMBEDDINGS_WRITE``)."""
EMBEDDINGS_WRITE_DEFERRED = "deferred"
"""A write stores no vector; a background thread of the process embeds the backlog moments later."""
EMBEDDINGS_WRITE_MODES = (EMBEDDINGS_WRITE_INLINE, EMBEDDINGS_WRITE_DEFERRED)
