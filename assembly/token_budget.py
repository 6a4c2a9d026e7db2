"""The selection policy's token budget over a prepare's content (pure Python, no Django).

Teaching units of ``vocabulary.tokens`` (the chapter's offline estimate), counted entry by entry as packing appends
them: an entry the byte budget admitted is taken whole by the token budget, or skipped.
"""

from __future__ import annotations

from vocabulary.tokens import estimate_context_tokens

from .memo import remembered
from .rendering import EntryForm

WRAPPER_MEMO_SIZE = 4096
"""How many wrapper texts' units a process keeps (emptied when full): headings, a citation's identity lines, the
shown lines, the content's prefix and suffix, each a few hundred bytes at most. The same entries come back prepare
after prepare, most of their texts as the same objects (``assembly.rendering`` keeps them), so a plain dict finds
them by identity: ``lru_cache``'s bookkeeping on every hit measured about a fifth of a token budget's cost."""
BODY_MEMO_SIZE = 4096
"""How many complete bodies' quoted units a process keeps (emptied when full): at most the 2,000-byte body cap each,
most of them the stored text itself, which its row holds anyway (8 MB at worst). At 1,024 a worker serving 1,000
entries missed a third of its lookups (emptied every few hundred prepares), and a miss estimates the whole body
again: ~40 ns a character for text that is not ASCII."""
_text_memo: dict[str, int] = {}
_quoted_body_memo: dict[str, int] = {}


def _text_units(text: str) -> int:
    """Units of a wrapper text (remembered)."""
    if (known := _text_memo.get(text)) is not None:
        return known
    return remembered(_text_memo, WRAPPER_MEMO_SIZE, text, estimate_context_tokens(text))


def _quoted_units(body: str) -> int:
    """Units of a body as quoted: its own, plus one per line for the quote prefixes."""
    return estimate_context_tokens(body) + body.count("\n") + 1


class TokenBudget:
    """The policy's token budget over the whole content: teaching units of ``vocabulary.tokens``.

    Entries start and end on a line break, as do the prefix and suffix, so no word spans two parts and the units
    of the content are the sum of its parts' (the wrappers count from the start). Within an entry likewise: the text
    around the body, and the body, whose quote prefixes (``>`` and spaces, after each line break) add one unit per
    line and split no word. An entry is atomic here: the byte budget chose its form (complete or truncated); the
    token budget takes that form whole or skips it.
    """

    __slots__ = ("most", "used")

    def __init__(self, most: int, prefix: str, suffix: str) -> None:
        self.most = most
        self.used = _text_units(prefix) + _text_units(suffix)

    def take(self, form: EntryForm, cut: int | None) -> bool:
        mid, after = form.complete if cut is None else form.truncated
        known_units = _text_memo.get  # without a call per text that the memo knows (most)
        units = 0
        for text in (*form.before_parts, mid, after):
            units += known if (known := known_units(text)) is not None else _text_units(text)
        if cut is not None:  # a truncated body: its cut depends on the room left, so it is estimated each time
            units += _quoted_units(form.body.unquoted(cut))
        elif (known := _quoted_body_memo.get(body := form.body.unquoted(None))) is not None:
            units += known
        else:
            units += remembered(_quoted_body_memo, BODY_MEMO_SIZE, body, _quoted_units(body))
        if self.used + units > self.most:
            return False
        self.used += units
        return True
