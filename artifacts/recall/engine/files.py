"""The files of an engine index (``store``) as the operating system sees them: sealed against writes once
committed, and opened through private links where the index's own directory is read-only.

Each worker maps an index's segment files into its memory. A file truncated under a mapping kills the worker with
SIGBUS, which no Python code can catch; one written over in place changes what the worker reads. Neither happens
through the builder: tantivy writes each segment file once and never again, replaces ``meta.json`` by renaming a new
file over it and removes files by unlinking them (a mapped file's data lives until its last mapping goes), and
``ids.bin`` is renamed into place too. ``seal`` then removes the write permission of every committed file, so that
a copy or truncation over a live index by the service user fails instead of crashing the workers that map it
(docs/deployment.md, section 12, "Files and mmap").
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

META_LOCK = ".tantivy-meta.lock"
"""The lock file tantivy creates in an index's directory (and writes) to open a searcher there."""


def lock_refused(path: Path) -> bool:
    """Whether this process may not create or write the lock file tantivy takes to open the index in ``path``."""
    try:
        os.close(os.open(path / META_LOCK, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError as exc:
        return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
    return False


def read_only_view(path: Path) -> tempfile.TemporaryDirectory:
    """A private directory of links to the index files in ``path`` (its lock files left out), removed with the
    Reader that searches it."""
    view = tempfile.TemporaryDirectory(prefix="powercontext-search-")
    for name in os.listdir(path):
        if not name.endswith(".lock"):
            os.symlink(path / name, os.path.join(view.name, name))
    return view


def seal(path: Path) -> None:
    """Remove the write permission of every file of the index in ``path`` but its lock files (the builder, after each
    commit): tantivy never writes a file again once committed and replaces its metadata by renaming, so nothing
    legitimate needs it, and a copy or truncation over a live index by the service user fails instead of crashing
    the workers that map it. Read permissions are kept as they are."""
    for entry in os.scandir(path):
        if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock"):
            mode = entry.stat(follow_symlinks=False).st_mode
            if mode & 0o222:
                os.chmod(entry.path, stat.S_IMODE(mode) & ~0o222)
