"""The chain hash has one definition: migration 0011's frozen copy (which backfilled existing revisions) computes
exactly what vocabulary.history's encoding 1 does, on entries, none, and text that JSON escapes."""

import datetime
import importlib
from types import SimpleNamespace

import pytest

from vocabulary.history import (
    history_time_text,
    memory_revision_sha256,
    revision_chain_sha256,
    revision_chain_v1_sha256,
    revision_texts_sha256,
    topic_memory_sha256,
)

MIGRATION = importlib.import_module("artifacts.migrations.0011_history_chain")

SAMPLES = [
    {"previous_chain": "", "scope_id": "project:a", "family": "experience", "artifact_id": "x", "revision": 1},
    {
        "previous_chain": "ab" * 32,
        "scope_id": 'équipe:\u202ex"\\',
        "family": "memory",
        "artifact_id": "m",
        "revision": 7,
    },
]
ENTRIES = [
    ([], []),
    ([("e2", "e2-v1", "2" * 64), ("e1", "e1-v3", "1" * 64)], [("e1", "e1-v2")]),
    ([("日本", "日本-v1", "3" * 64)], [("z", "z-v1"), ("a", "a-v9")]),
]


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize(("born", "retired"), ENTRIES)
def test_the_migration_s_frozen_chain_hash_equals_the_code_s(sample, born, retired):
    common = {**sample, "content_sha256": "c" * 64, "author": "api-key:agent"}
    code = revision_chain_v1_sha256(
        **common,
        born=[SimpleNamespace(entry_id=e, version_id=v, content_sha256=s) for e, v, s in born],
        retired=[SimpleNamespace(entry_id=e, version_id=v, content_sha256="") for e, v in retired],
    )
    assert MIGRATION._chain_sha256(**common, born=born, retired=retired) == code


def test_the_chain_hash_covers_each_of_its_parts():
    base = {**SAMPLES[0], "content_sha256": "c" * 64, "author": "a"}
    changed = [
        {**base, key: value}
        for key, value in (("scope_id", "b"), ("family", "skill"), ("artifact_id", "y"), ("revision", 2))
    ] + [{**base, "previous_chain": "x"}, {**base, "content_sha256": "d" * 64}, {**base, "author": "b"}]
    hashes = {revision_chain_v1_sha256(**kwargs) for kwargs in [base, *changed]}
    one = SimpleNamespace(entry_id="e", version_id="e-v1", content_sha256="1" * 64)
    hashes |= {revision_chain_v1_sha256(**base, born=[one]), revision_chain_v1_sha256(**base, retired=[one])}
    assert len(hashes) == len(changed) + 3


# --- conflict slots (seeds/003): covered when present, invisible when absent -----------------------------------


def _version(slot=..., **fields):
    record = {"entry_id": "e", "version_id": "e-v1", "content_sha256": "1" * 64, **fields}
    return SimpleNamespace(**record) if slot is ... else SimpleNamespace(**record, conflict_key=slot)


def test_a_version_without_a_slot_hashes_as_it_did_before_slots_existed():
    # Every stored history (written before slots, or without them) keeps its hashes: no backfill, encoding 1.
    common = {**SAMPLES[1], "content_sha256": "c" * 64, "author": "a"}
    frozen = MIGRATION._chain_sha256(**common, born=[("e", "e-v1", "1" * 64)], retired=[])
    assert revision_chain_v1_sha256(**common, born=[_version(None)]) == frozen
    assert revision_chain_v1_sha256(**common, born=[_version()]) == frozen
    assert memory_revision_sha256("", [_version(None)], []) == memory_revision_sha256("", [_version()], [])


def test_both_hashes_cover_a_version_s_slot():
    common = {**SAMPLES[1], "content_sha256": "c" * 64, "author": "a"}
    slots = [None, "preference:automation-language", "preference:automation-languagE", "preference:other"]
    assert len({revision_chain_v1_sha256(**common, born=[_version(slot)]) for slot in slots}) == len(slots)
    assert len({memory_revision_sha256("p", [_version(slot)], []) for slot in slots}) == len(slots)


def test_a_retired_version_is_named_by_its_ids_whatever_its_slot():
    # Its slot was covered by the revision that bore it.
    retired = [memory_revision_sha256("p", [], [_version(slot)]) for slot in (None, "preference:x")]
    assert retired[0] == retired[1]


# --- encoding 2 (migration 0022): every column a read serves or the selection policy uses -------------------------

WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC)


def _v2(**changed):
    base = {
        **SAMPLES[0],
        "content_sha256": "c" * 64,
        "texts_sha256": "t" * 64,
        "author": "a",
        "created_at": WHEN,
    }
    return revision_chain_sha256(**{**base, **changed})


def test_encoding_2_covers_the_time_the_texts_and_each_born_version_s_time_and_slot():
    later = WHEN + datetime.timedelta(microseconds=1)
    version = _version("preference:x", created_at=WHEN)
    hashes = {
        _v2(),
        _v2(created_at=later),
        _v2(texts_sha256="u" * 64),
        _v2(texts_sha256=None),
        _v2(author="b"),
        _v2(born=[version]),
        _v2(born=[_version("preference:x", created_at=later)]),
        _v2(born=[_version(None, created_at=WHEN)]),
        _v2(retired=[version]),
    }
    assert len(hashes) == 9


def test_encoding_2_reads_a_time_as_the_same_instant_in_any_zone():
    elsewhere = WHEN.astimezone(datetime.timezone(datetime.timedelta(hours=8)))
    assert _v2(created_at=elsewhere) == _v2()
    assert history_time_text(WHEN) == "2026-01-02T03:04:05.678901Z"


def test_each_encoding_is_frozen_by_its_number():
    # Migration 0022 verifies encoding 1 and writes encoding 2 with these functions: neither may ever change.
    born = [_version("preference:x", created_at=WHEN)]
    v1 = {**SAMPLES[1], "content_sha256": "c" * 64, "author": "a"}
    assert revision_chain_v1_sha256(**v1, born=born) == (
        "40b7fe23104789a468749bc7e17ac1ac925bec04304e4af451a93c69dc636f02"
    )
    assert _v2(born=born) == "cb9580aa95da961008042f92b6b5ab05dafd7f0a2eaf6b0129500b2ad91c7903"
    assert revision_texts_sha256(title="T", summary=None, body="b") == topic_memory_sha256(
        title="T", summary=None, body="b"
    )
