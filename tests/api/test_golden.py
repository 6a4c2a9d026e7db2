"""Every golden case of tests/golden, byte for byte, through POST /v1/context/prepare."""

import json

import pytest
from django.core.management import call_command

from tests.conftest import GOLDEN

CASES = sorted(p.name.removesuffix(".request.json") for p in GOLDEN.glob("*.request.json"))
GOLDEN_KEY = "pc_golden_0123456789abcdef0123456789abcdef"


def _content_file(case: str):
    for suffix in (".content.md", ".content.txt"):
        path = GOLDEN / f"{case}{suffix}"
        if path.exists():
            return path
    return None


def test_every_golden_case_is_collected():
    assert len(CASES) == 10


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES)
def test_golden_response_matches_byte_for_byte(client, case):
    language = case.rsplit("-", 1)[1]
    call_command("load_context_fixtures", str(GOLDEN / f"fixture-{language}.json"), verbosity=0)

    response = client.post(
        "/v1/context/prepare",
        data=(GOLDEN / f"{case}.request.json").read_bytes(),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {GOLDEN_KEY}",
    )

    assert response.status_code == 200
    expected = json.loads((GOLDEN / f"{case}.response.json").read_text(encoding="utf-8"))
    body = response.json()
    assert list(body) == ["schema", "status", "content", "content_bytes"]
    assert body == expected
    content_file = _content_file(case)
    if content_file is not None:
        assert body["content"].encode("utf-8") == content_file.read_bytes()
        assert body["content_bytes"] == len(content_file.read_bytes())
