"""The chain hash has one definition: migration 0011's frozen copy (which backfilled existing revisions) computes
exactly what vocabulary.history does, on entries, none, and text that JSON escapes."""

import importlib
from types import SimpleNamespace

import pytest

from vocabulary.history import revision_chain_sha256

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
    code = revision_chain_sha256(
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
    hashes = {revision_chain_sha256(**kwargs) for kwargs in [base, *changed]}
    one = SimpleNamespace(entry_id="e", version_id="e-v1", content_sha256="1" * 64)
    hashes |= {revision_chain_sha256(**base, born=[one]), revision_chain_sha256(**base, retired=[one])}
    assert len(hashes) == len(changed) + 3
