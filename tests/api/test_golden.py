"""Every golden case of tests/golden, byte for byte, through POST /v1/context/prepare."""

import json

import pytest

from tests.conftest import GOLDEN, GOLDEN_CASES, golden_prepare


def _content_file(case: str):
    for suffix in (".content.md", ".content.txt"):
        path = GOLDEN / f"{case}{suffix}"
        if path.exists():
            return path
    return None


def test_every_golden_case_is_collected():
    assert len(GOLDEN_CASES) == 10


@pytest.mark.django_db
@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_golden_response_matches_byte_for_byte(client, case):
    response = golden_prepare(client, case)

    assert response.status_code == 200
    expected = json.loads((GOLDEN / f"{case}.response.json").read_text(encoding="utf-8"))
    body = response.json()
    assert list(body) == ["schema", "status", "content", "content_bytes"]
    assert body == expected
    content_file = _content_file(case)
    if content_file is not None:
        assert body["content"].encode("utf-8") == content_file.read_bytes()
        assert body["content_bytes"] == len(content_file.read_bytes())
