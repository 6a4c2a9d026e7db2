"""Helpers of the search-index tests (tests/api/test_recall_engine*.py): building the index, and reading what its
metrics counted. Their fixtures are in tests/api/conftest.py."""

import io

from django.core.management import call_command

from artifacts.recall.engine import store
from infrastructure import metrics


def build(*args: str) -> tuple[str, str]:
    """``manage.py recall_index_build`` with ``args`` (no PostgreSQL wait unless given); its stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    settle = () if "--settle" in args else ("--settle", "0")
    call_command("recall_index_build", *args, *settle, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def answers() -> float:
    """Scope rankings the index answered so far in this process."""
    return metrics.RECALL_INDEX_ANSWERS._value.get()


def fallbacks(reason: str) -> float:
    """Scope rankings SQL answered for ``reason`` so far in this process."""
    return metrics.RECALL_INDEX_FALLBACKS.labels(reason)._value.get()


def all_fallbacks() -> float:
    return sum(fallbacks(reason) for reason in store.FALLBACK_REASONS)


def index_uses() -> dict[str, float]:
    """The index's answers and its fallbacks by reason, as counted so far in this process."""
    return {"answers": answers(), **{reason: fallbacks(reason) for reason in store.FALLBACK_REASONS}}


def counted_since(before: dict[str, float]) -> dict[str, float]:
    """What ``index_uses`` counted since ``before``, zero counts left out."""
    return {name: count - before[name] for name, count in index_uses().items() if count != before[name]}
