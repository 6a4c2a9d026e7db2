"""``GET /metrics`` answers the whole token alone, compared in constant time (issue 51, item 7b).

A prefix of the token (down to ``Bearer s``, its first character), the token with more after it, or the token with one
character changed is refused like any other wrong token: 404, as to a client that sent none. A prefix comparison
would answer the first and let a client recover the token a character at a time. Whatever the length sent, the
comparison is ``hmac.compare_digest`` over two values of one fixed length.
"""

import hmac

import pytest

from infrastructure import metrics

pytestmark = pytest.mark.django_db
TOKEN = "s3cret-metrics-token-0123456789"


def _status(client, authorization: str) -> int:
    return client.get("/metrics", HTTP_AUTHORIZATION=authorization).status_code


@pytest.fixture
def token(settings):
    settings.POWERCONTEXT_METRICS_TOKEN = TOKEN
    settings.POWERCONTEXT_METRICS_LOOPBACK = False
    return TOKEN


def test_only_the_whole_token_is_answered(client, token):
    assert _status(client, f"Bearer {token}") == 200
    assert _status(client, "Bearer s") == 404
    prefixes = [token[:length] for length in range(len(token))]
    assert {prefix: _status(client, f"Bearer {prefix}") for prefix in prefixes} == dict.fromkeys(prefixes, 404)
    longer = [token + "x", token + token, token + "\u00e9", "x" + token]
    assert {value: _status(client, f"Bearer {value}") for value in longer} == dict.fromkeys(longer, 404)
    changed = token[:-1] + chr(ord(token[-1]) + 1)
    assert _status(client, f"Bearer {changed}") == 404
    assert _status(client, f"Bearer {token.upper()}") == 404


def test_a_refused_token_is_answered_as_no_token_at_all(client, token):
    nothing = client.get("/metrics")
    prefix = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token[:3]}")
    assert nothing.status_code == 404
    assert (prefix.status_code, prefix.json()) == (nothing.status_code, nothing.json())


@pytest.mark.parametrize(
    "sent", ["", "s", TOKEN[:-1], TOKEN, TOKEN + "x", TOKEN * 8], ids=lambda sent: f"{len(sent)}-characters"
)
def test_the_comparison_is_constant_time_whatever_the_length_sent(client, token, monkeypatch, sent):
    compared: list[tuple[int, int]] = []
    compare_digest = hmac.compare_digest

    def spy(a, b):
        compared.append((len(a), len(b)))
        return compare_digest(a, b)

    monkeypatch.setattr(metrics.hmac, "compare_digest", spy)
    status = _status(client, f"Bearer {sent}")
    assert status == (200 if sent == token else 404)
    assert compared == [(32, 32)], "one comparison of two fixed-length digests, whatever was sent"
