"""What prepare shows of a topic memory: Title, Summary and the first detail line matching the query."""

from __future__ import annotations

from artifacts.recall import tokenize
from vocabulary.text import sha256_text

TOPIC_MATCH_SNIPPET_CHARACTERS = 240


def _snippet(line: str) -> str:
    line = line.strip()
    if len(line) > TOPIC_MATCH_SNIPPET_CHARACTERS:
        line = line[: TOPIC_MATCH_SNIPPET_CHARACTERS - 1] + "…"
    return line


def topic_match_snippet(*, detail: str | None, query: str) -> str | None:
    """The first line of the detail body that shares a term with the query, or None."""
    if not detail:
        return None
    wanted = set(tokenize.query_terms(query))
    for line in detail.splitlines():
        if wanted.intersection(tokenize.tokenize(line)):
            return _snippet(line)
    return None


def _projection(title: str, summary: str, snippet: str | None) -> str:
    body = f"Title: {title}\nSummary: {summary}"
    return body if snippet is None else f"{body}\nMatch: {snippet}"


def topic_memory_projection(*, title: str, summary: str, detail: str | None, query: str) -> str:
    """The body prepare shows for a topic memory: Title, Summary and an optional Match line."""
    return _projection(title, summary, topic_match_snippet(detail=detail, query=query))


def projection_digest(body: str) -> str:
    """What the prepare log keeps of a topic memory's shown body when it does not keep the query (64 bits)."""
    return sha256_text(body)[:16]


def topic_memory_projection_by_digest(
    *, title: str, summary: str, detail: str | None, digest: str | None
) -> str | None:
    """The projection (no Match line, or one detail line's) whose ``projection_digest`` is ``digest``, or None.

    Replays a logged prepare whose query was not kept: the Match line depended only on the query, and the
    digest names which of the few possible bodies was shown; the content's SHA-256 then proves the whole. No
    digest (None) matches none.
    """
    for snippet in (None, *(_snippet(line) for line in (detail or "").splitlines())):
        body = _projection(title, summary, snippet)
        if projection_digest(body) == digest:
            return body
    return None
