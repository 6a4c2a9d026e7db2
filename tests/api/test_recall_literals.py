"""Rows bound as literals (``sql.literal_relation``, ``sql.pg_array``) read back exactly on both engines.

Prepare joins ranked rows, query weights and terms to its statements this way; a value that came back changed
(a term with a quote or a backslash, a double rounded) would rank or cite wrongly.
"""

from __future__ import annotations

import pytest

from artifacts.recall import bm25, sql

AWKWARD_TEXTS = [
    "",
    "plain",
    "NULL",
    "null",
    'say "hi"',
    "back\\slash",
    "\\",
    '\\"',
    "{a,b}",
    "comma, and space",
    "  leading and trailing  ",
    "tab\there",
    "line\nbreak",
    "'single'",
    "ünïcødé 漢字 🙂",
    "$1 %s %(x)s",
]
DOUBLES = [0.0, 0.1, 1 / 3, 1e-300, 2.5e300, 123456789.123456789, 5e-324]
BIGINTS = [0, 1, -1, 2**53 + 1, 2**62, -(2**63), 2**63 - 1]


def test_array_literals_quote_every_text_and_spell_numbers_as_python_does():
    assert sql.pg_array(['a"b', "c\\d", "", "NULL"], "text") == '{"a\\"b","c\\\\d","","NULL"}'
    assert sql.pg_array([1, -(2**63)], "bigint") == "{1,-9223372036854775808}"
    assert sql.pg_array([0.1, 1e-300], "float8") == "{0.1,1e-300}"
    assert sql.pg_array([], "int") == "{}"


def test_an_array_literal_of_another_kind_is_refused():
    with pytest.raises(ValueError, match="no array literal for 'bool'"):
        sql.pg_array([True], "bool")


def _round_trip(columns, rows):
    relation, params = sql.literal_relation("r", columns, rows)
    names = ", ".join(name for name, _ in columns)
    return sql.fetch(f"SELECT {names} FROM {relation}", params)


@pytest.mark.django_db
def test_texts_of_any_characters_come_back_unchanged():
    rows = [(index, text) for index, text in enumerate(AWKWARD_TEXTS)]
    assert sorted(_round_trip((("i", "int"), ("t", "text")), rows)) == rows


@pytest.mark.django_db
def test_doubles_and_64_bit_integers_come_back_as_the_same_numbers():
    rows = [(bigint, double) for bigint, double in zip(BIGINTS, DOUBLES, strict=True)]
    back = _round_trip((("n", "bigint"), ("x", "float8")), rows)
    assert sorted(back) == sorted(rows)
    assert all(isinstance(x, float) for _, x in back)


@pytest.mark.django_db
def test_a_single_integer_column_comes_back_as_the_same_integers_in_one_parameter():
    rows = [(bigint,) for bigint in BIGINTS]
    assert sorted(_round_trip((("n", "bigint"),), rows)) == sorted(rows)
    few, many = (
        sql.literal_relation("r", (("n", "bigint"),), rows[:1]),
        sql.literal_relation("r", (("n", "bigint"),), rows),
    )
    assert few[0] == many[0] and len(many[1]) == 1
    assert _round_trip((("n", "int"),), []) == []


@pytest.mark.django_db
def test_terms_bound_as_one_parameter_match_exactly():
    condition, params = sql.one_of("t", AWKWARD_TEXTS[1:4], "text")
    relation, relation_params = sql.literal_relation("r", (("t", "text"),), [(t,) for t in AWKWARD_TEXTS])
    found = sql.fetch(f"SELECT t FROM {relation} WHERE {condition}", [*relation_params, *params])
    assert sorted(row[0] for row in found) == sorted(AWKWARD_TEXTS[1:4])


@pytest.mark.django_db
def test_integers_bound_as_one_parameter_match_exactly():
    condition, params = sql.one_of("n", BIGINTS[2:5], "bigint")
    relation, relation_params = sql.literal_relation("r", (("n", "bigint"),), [(n,) for n in BIGINTS])
    found = sql.fetch(f"SELECT n FROM {relation} WHERE {condition}", [*relation_params, *params])
    assert sorted(row[0] for row in found) == sorted(BIGINTS[2:5])
    few, many = sql.one_of("n", BIGINTS[:1], "bigint"), sql.one_of("n", BIGINTS, "bigint")
    assert few[0] == many[0] and len(many[1]) == 1


def _query_of(terms: list[str]) -> bm25.Bm25Query:
    return bm25.Bm25Query(
        weights={term: 1.5 for term in terms},
        frequencies={term: 1 for term in terms},
        length_constant=0.3,
        length_factor=0.1,
        average_length=9.0,
        documents=10,
    )


@pytest.mark.django_db
def test_queries_of_up_to_eight_terms_share_one_weights_text_and_read_back_only_their_terms():
    one, five = _query_of(["alpha"]), _query_of(["alpha", "beta", "gamma", "delta", "omega"])
    (one_sql, _), (five_sql, five_params) = one.weights_sql_and_params(), five.weights_sql_and_params()

    assert one_sql == five_sql
    rows = sql.fetch(f"SELECT term, weight FROM {five_sql} WHERE w.term IS NOT NULL", five_params)
    assert sorted(rows) == sorted((term, 1.5) for term in five.weights)
