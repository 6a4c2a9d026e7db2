"""The selection policy's token budget over a prepare's content (pure Python, no Django).

Teaching units of ``vocabulary.tokens`` (the chapter's offline estimate), counted entry by entry as packing appends
them: an entry the byte budget admitted is taken whole by the token budget, or skipped.
"""

from __future__ import annotations

import functools

from vocabulary.tokens import estimate_context_tokens

from .rendering import EntryForm

_text_units = functools.lru_cache(maxsize=4096)(estimate_context_tokens)
"""Units of an entry's wrapper texts (its heading, its metadata with the citation, its closing lines) and of the
content's prefix and suffix, by the text: the same entries come back prepare after prepare, so each is estimated once
per process (hashing the text is a fraction of estimating it). The metadata is kept apart from the numbered heading:
one text per citation rather than one per citation and place. Bounded: 4,096 texts of at most a few hundred bytes."""


def _quoted_units(body: str) -> int:
    """Units of a body as quoted: its own, plus one per line for the quote prefixes."""
    return estimate_context_tokens(body) + body.count("\n") + 1


_quoted_body_units = functools.lru_cache(maxsize=1024)(_quoted_units)
"""``_quoted_units`` of a complete body: most are the stored text itself, estimated once per process. Bounded: a
complete body is at most the 2,000-byte body cap (a truncated one is estimated each time)."""


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
        body = form.body.unquoted(cut)
        units = sum(map(_text_units, form.before_parts)) + _text_units(mid) + _text_units(after)
        units += _quoted_body_units(body) if cut is None else _quoted_units(body)
        if self.used + units > self.most:
            return False
        self.used += units
        return True
