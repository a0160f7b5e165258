"""A cache entry: a folder that is there whole or not at all. Both caches store theirs this way
(:mod:`nsysmoe.io.cache`: read traces; :mod:`nsysmoe.result_cache`: results and reports).
Stdlib only, so the cached-report fast path of the CLI never imports polars.

An entry is complete when its *marker* file is in it (``meta.json``, ``result.json``,
``report.txt``): the marker is the last thing a reader looks for and the rename makes it appear
together with everything else.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path


def write(entry: Path, marker: str, fill: Callable[[Path], object]) -> None:
    """Build ``entry`` in a temporary folder beside it (``fill(folder)`` writes its files) and
    rename that into place, atomically. The folders are created with the user's umask (mode
    0777 & ~umask, unlike :func:`tempfile.mkdtemp`'s 0700: a shared cache folder stays shared).
    An entry that holds ``marker`` already (another process stored it first) is kept; one
    without it (left half-deleted) is replaced. Raises what the file system or ``fill`` raises;
    the temporary folder never stays behind."""
    tmp = entry.with_name(f".tmp-{uuid.uuid4().hex}")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        fill(tmp)
        if entry.exists() or entry.is_symlink():
            if (entry / marker).is_file():
                return
            remove(entry)
        try:
            os.replace(tmp, entry)
        except OSError:
            if not (entry / marker).is_file():
                raise  # not another process's entry: a real failure
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def remove(entry: Path) -> None:
    """Remove ``entry`` (a damaged or half-deleted one) as far as it can; errors are ignored."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        try:
            entry.unlink()
        except OSError:
            pass
