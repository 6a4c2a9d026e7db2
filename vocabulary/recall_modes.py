"""How prepare recalls (``POWERCONTEXT_RECALL_MODE``): one constant per mode, read by the settings, recall, the
prepare log and the operator pages alike."""

RECALL_MODE_HYBRID = "hybrid"
"""BM25 fused with the dense (semantic) ranking where a scope's documents have vectors (the default)."""
RECALL_MODE_LEXICAL = "lexical"
"""BM25 alone."""
RECALL_MODES = (RECALL_MODE_HYBRID, RECALL_MODE_LEXICAL)
