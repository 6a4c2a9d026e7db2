"""The client's offline token estimate is the server's: a budget means the same on both sides."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from powercontext_client.tokens import estimate_context_tokens as client_estimate

from vocabulary.tokens import estimate_context_tokens as server_estimate


@given(st.text(max_size=400))
def test_the_client_and_the_server_count_the_same_units(text):
    assert client_estimate(text) == server_estimate(text)


def test_the_client_counts_the_chapter_example_like_the_server():
    example = "本轮指令：这次请用 Go 实现 (preference:automation-language)"
    assert client_estimate(example) == server_estimate(example) == 19
