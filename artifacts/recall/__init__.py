"""Lexical recall: BM25 over an inverted index of the live heads, identical on SQLite and PostgreSQL.

- ``tokenize``: one tokenizer for indexing and querying (NFKC, casefold, Snowball, CJK bigrams)
- ``index``: index maintenance, called by the write services inside their transactions
- ``ranking``: BM25 scoring in SQL with exact pruning
- ``projection``: the body prepare shows for a topic memory
- ``sources``: the recall sources prepare calls per family (``POWERCONTEXT_RECALL_SOURCES``)
"""
