"""The text a document becomes in the recall index (``tokenize.term_frequencies``): its first
RECALL_MAX_DOCUMENT_TOKENS terms, their frequencies and their number as its length.

No database: the tokenizer is pure Python, shared by indexing and querying on every engine.
"""

from __future__ import annotations

from collections import Counter

from artifacts.recall import tokenize
from vocabulary.limits import RECALL_MAX_DOCUMENT_TOKENS as CAP


def test_a_document_within_the_limit_is_indexed_whole():
    text = "Deploys freeze on Fridays; the deploy needs a reviewer. 发布需要审核"

    frequencies, length = tokenize.term_frequencies(text)

    terms = tokenize.tokenize(text)
    assert (frequencies, length) == (Counter(terms), len(terms))
    assert frequencies["deploy"] == 2 and frequencies["审核"] == 1


def test_only_the_first_terms_up_to_the_limit_are_counted_and_the_length_is_theirs():
    words = [f"w{n}x" for n in range(CAP + 50)]  # each one term, all distinct

    frequencies, length = tokenize.term_frequencies(" ".join(words))

    assert length == CAP == sum(frequencies.values())
    assert set(frequencies) == set(words[:CAP])
    assert words[CAP - 1] in frequencies and words[CAP] not in frequencies


def test_repeats_past_the_limit_do_not_raise_a_frequency():
    text = "alpha " * 10 + "beta " * (CAP - 10) + "alpha " * 100

    frequencies, length = tokenize.term_frequencies(text)

    assert frequencies == Counter({"alpha": 10, "beta": CAP - 10})
    assert length == CAP


def test_a_cjk_run_across_the_limit_is_cut_between_two_bigrams():
    # CAP - 1 Latin terms, then one CJK run of three bigrams: only its first bigram is in the prefix.
    text = "word " * (CAP - 1) + "发布审核"

    frequencies, length = tokenize.term_frequencies(text)

    assert tokenize.tokenize(text)[-3:] == ["发布", "布审", "审核"]
    assert frequencies == Counter({"word": CAP - 1, "发布": 1})
    assert length == CAP


def test_queries_are_not_cut_by_the_document_limit():
    query = " ".join(f"q{n}x" for n in range(CAP + 10))

    assert len(tokenize.query_terms(query)) == CAP + 10
