"""Lexical recall: BM25 over an inverted index of the live heads, identical on SQLite and PostgreSQL.

The modules import one way, each from its own layer or those before it in this list, never from a later one
(``tests/unit/recall/test_layering.py`` reads every import, function-level ones included, and fails otherwise):

1. Plumbing and the contract, importing no other layer:

   - ``sql``: which engine, running a statement, values bound as literals
   - ``tables``: the index tables' names
   - ``tokenize``: one tokenizer for indexing and querying (NFKC, casefold, Snowball, CJK bigrams)
   - ``documents``: ``DocumentRow`` and ``RankedDocument``, a ranked document as the sources receive it
   - ``base``: the contract every ranker answers ("rank these (family, scope) pairs for this query, or leave out the
     pairs you cannot prove"), its types and the ranking order (score desc, document id)
   - ``index_files``: what the engine's index and the dense index share (a build's progress and result), so that
     neither ranker imports the other

2. Shared by what follows, on plumbing alone:

   - ``bm25``: the BM25 query of each pair from the index statistics (one statement for all pairs) and its exact
     score, in SQL and in Python: what every lexical ranker computes
   - ``index``: index maintenance, called by the write services inside their transactions
   - ``generation``: the corpus generation's triggers (frozen into migrations under this module's name)
   - ``projection``: the body prepare shows for a topic memory
   - ``fusion`` and ``learned``: how a lexical and a dense ranking become one (pure): the abstention floors, the
     hand rules and the learned ranker (its model files in ``rankers/``)

3. Rankers, side by side, none importing another (a dense ranker is one more sibling):

   - ``ranking``: exact BM25 in SQL, with exact pruning; answers every pair
   - ``resident``: the same ranking from this process's copies of small pairs' postings
   - ``engine/``: tantivy for large scopes, its candidates rescored exactly in SQL and proven, or left to SQL

4. ``planner``: per pair, which ranker ranks it; every pair's documents read in one statement

5. ``sources``: the recall sources prepare calls per family (``POWERCONTEXT_RECALL_SOURCES``), the only importer of
   the planner
"""
