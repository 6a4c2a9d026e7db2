"""Dense (semantic) recall: embedding providers, the stored vectors (``RecallVector``) and their ranking.

- ``providers``: the ``EmbeddingProvider`` seam, its packaged and OpenAI-compatible endpoint providers, and the one
  chosen by settings (``configured_provider``).
- ``ranking``: pure numpy: the stored encoding and cosine top-k, exact (``dense_rank``) or in two passes over an int8
  quantization (``quantize``, ``quantized_rank``).
- ``selectors``: a pair's vectors (``vectors_for_pair``), the documents to embed, the lag.
- ``services``: storing vectors (``recall_vectors_store``) and embedding the documents without one.
"""
