"""Text analysis for lexical recall: one tokenizer for indexing and querying, on every engine.

Pure Python (no ORM) so that SQLite and PostgreSQL index exactly the same terms and recall
returns the same ranking on both. Latin-script words are NFKC-normalized, case-folded and
Snowball-stemmed; CJK runs, which have no spaces, become overlapping character bigrams.
"""

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from itertools import islice

import snowballstemmer

from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS, RECALL_MAX_PREPARE_TERMS

MAX_TERM_LENGTH = 64
BM25_K1 = 1.2
BM25_B = 0.75
# Scores are summed as whole micro-units so that every engine adds exactly the same numbers in any
# order: ties then break on the stable key, never on floating-point summation order.
SCORE_SCALE = 1_000_000

_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\U00020000-\U0003134f"  # CJK extensions B–H
)
_TOKEN = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")
_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)[:MAX_TERM_LENGTH]


def _terms(text: str) -> Iterator[str]:
    normalized = unicodedata.normalize("NFKC", text).casefold()
    for match in _TOKEN.finditer(normalized):
        run = match.group("cjk")
        if run is None:
            yield _stem(match.group("word"))
        elif len(run) == 1:
            yield run
        else:
            yield from (run[i : i + 2] for i in range(len(run) - 1))


def tokenize(text: str) -> list[str]:
    """Return the terms of ``text`` in order (with repeats): a query's, a line's; a document's index holds only its
    first RECALL_MAX_DOCUMENT_TOKENS (``term_frequencies``)."""
    return list(_terms(text))


def term_frequencies(text: str) -> tuple[Counter[str], int]:
    """The term counts of a document's indexed terms and their number, the document's length in BM25.

    The one place a text becomes what the recall index holds of it: its first RECALL_MAX_DOCUMENT_TOKENS terms
    (vocabulary/limits.py), frequencies and length both counted over that prefix, so every ranking path (SQL, copies
    in memory, the search engine built from the postings) sees one consistent document. A word that occurs only
    past the prefix does not find the document. Terms are produced lazily: a long text is not tokenized past it.
    """
    terms = list(islice(_terms(text), RECALL_MAX_DOCUMENT_TOKENS))
    return Counter(terms), len(terms)


def query_terms(query: str) -> list[str]:
    """Distinct query terms in first-seen order (a repeated query word does not count twice)."""
    return list(dict.fromkeys(tokenize(query)))


def recall_terms(query: str) -> list[str]:
    """The query terms one prepare ranks with: the first RECALL_MAX_PREPARE_TERMS distinct ones, in first-seen order.

    Each is looked up in every scope and family of the prepare, so their number bounds its statistics and ranking
    (an 8192-character CJK query holds thousands of distinct bigrams, 64 references multiplied them). The choice
    depends on the query's text alone: the same on every engine and path (SQL, copies in memory, search index).
    """
    return query_terms(query)[:RECALL_MAX_PREPARE_TERMS]


def idf(documents: int, documents_with_term: int) -> float:
    """BM25 inverse document frequency (the Lucene variant, never negative)."""
    return math.log(1 + (documents - documents_with_term + 0.5) / (documents_with_term + 0.5))
