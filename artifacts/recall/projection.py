"""What prepare shows of a topic memory: Title, Summary and the first detail line matching the query."""

from __future__ import annotations

from artifacts.recall import tokenize

TOPIC_MATCH_SNIPPET_CHARACTERS = 240


def topic_match_snippet(*, detail: str | None, query: str) -> str | None:
    """The first line of the detail body that shares a term with the query, or None."""
    if not detail:
        return None
    wanted = set(tokenize.query_terms(query))
    for line in detail.splitlines():
        if wanted.intersection(tokenize.tokenize(line)):
            line = line.strip()
            if len(line) > TOPIC_MATCH_SNIPPET_CHARACTERS:
                line = line[: TOPIC_MATCH_SNIPPET_CHARACTERS - 1] + "…"
            return line
    return None


def topic_memory_projection(*, title: str, summary: str, detail: str | None, query: str) -> str:
    """The body prepare shows for a topic memory: Title, Summary and an optional Match line."""
    body = f"Title: {title}\nSummary: {summary}"
    snippet = topic_match_snippet(detail=detail, query=query)
    return body if snippet is None else f"{body}\nMatch: {snippet}"
