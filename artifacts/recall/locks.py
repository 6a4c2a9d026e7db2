"""A machine-wide lock held through a file: one index builder at a time on a machine (the lexical engine's and the
dense index's)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold the lock of ``directory`` (its ``.writer.lock``, created with the directory if need be), blocking until
    no other process holds it."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".writer.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
