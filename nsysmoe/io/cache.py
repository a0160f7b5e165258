"""Opt-in cache of read traces, so one side of several A/Bs is read once.

The key is the file's identity — resolved path, device, inode, size, mtime in ns — plus a hash
of its first and last 1 MiB and the nsysmoe version: editing, replacing or re-exporting the file
changes the key, so a stale entry is never served. Entries are the canonical tables as Arrow IPC
files (fast to map back), written to a temporary folder and renamed into place atomically.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import fields
from pathlib import Path

import polars as pl

from nsysmoe._version import __version__
from nsysmoe.model import Trace

EDGE_BYTES = 1 << 20
FORMAT = 2  # bumped when the canonical tables change (2: total_memory_bytes)
TABLES = ("kernels", "memops", "runtime", "nvtx", "gpus", "memory_events")


def default_dir() -> Path:
    """$NSYSMOE_CACHE_DIR, else $XDG_CACHE_HOME/nsysmoe, else ~/.cache/nsysmoe."""
    if explicit := os.environ.get("NSYSMOE_CACHE_DIR"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nsysmoe"


def key(path: Path) -> str:
    st = path.stat()
    h = hashlib.sha256()
    ident = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, __version__,
             FORMAT)  # fmt: skip
    h.update(repr(ident).encode())
    with path.open("rb") as fh:
        h.update(fh.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            fh.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            h.update(fh.read(EDGE_BYTES))
    return h.hexdigest()[:32]


def load(cache_dir: Path, path: Path) -> Trace | None:
    entry = cache_dir / key(path)
    meta_file = entry / "meta.json"
    if not meta_file.exists():
        return None
    try:
        meta = json.loads(meta_file.read_text())
        tables = {t: pl.read_ipc(entry / f"{t}.arrow") for t in TABLES}
    except (OSError, ValueError, pl.exceptions.PolarsError):
        shutil.rmtree(entry, ignore_errors=True)  # a damaged entry is rebuilt, never fatal
        return None
    meta["path"] = str(path)
    meta["warnings"] = tuple(meta["warnings"])
    return Trace(**meta, **tables)


def store(cache_dir: Path, path: Path, trace: Trace) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    entry = cache_dir / key(path)
    if entry.exists():
        return
    tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".tmp-"))
    try:
        for t in TABLES:
            getattr(trace, t).write_ipc(tmp / f"{t}.arrow")
        meta = {f.name: getattr(trace, f.name) for f in fields(trace) if f.name not in TABLES}
        meta["warnings"] = list(meta["warnings"])
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.replace(tmp, entry)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
