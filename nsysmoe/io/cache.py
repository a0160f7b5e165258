"""Opt-in cache of read traces, so one side of several A/Bs is read once.

What the key covers: the file's fingerprint (:func:`nsysmoe.fingerprint.file_key`: its resolved
path, device, inode, size, mtime and content hash), the nsysmoe version and the cache format.

Entries are the canonical tables as Arrow IPC files (fast to map back), written to a temporary
folder and renamed into place atomically (:func:`nsysmoe.cache_entry.write`); folders and files
are created with the user's umask (a shared cache folder stays shared). The cache never stops an
analysis: a damaged entry is removed and rebuilt, a folder that cannot be used is reported
(:func:`prepare`) and skipped, and an entry that cannot be stored is a note (:func:`store`
returns it; the API raises it as a :class:`CacheWarning`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import polars as pl

from nsysmoe import cache_entry
from nsysmoe._version import __version__
from nsysmoe.fingerprint import file_key
from nsysmoe.model import Launch, Trace

FORMAT = 9  # bumped when the canonical tables or the key change (3: content hash, 4: graphs,
# 5: session start and launch, 6: the generator of a synthetic trace, 7: every metadata string
# redacted at load_trace: entries of 6 and older may hold secrets and are never served;
# 8: sync and event-record tables, sync call kinds; 9: blocking_copy calls, event sync id 0
# read as none)
TABLES = ("kernels", "memops", "runtime", "nvtx", "gpus", "memory_events", "syncs",
          "event_records")
META = tuple(f.name for f in fields(Trace) if f.name not in TABLES)


class CacheWarning(UserWarning):
    """The cache could not be used for one trace; the analysis went on without it."""


def prepare(cache_dir: Path) -> str | None:
    """Create ``cache_dir`` if needed and check that entries can be written there: None, or why
    not (one line) — the caller then goes on without the cache."""
    probe = cache_dir / f".probe-{uuid.uuid4().hex}"
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        what = "is not a folder" if cache_dir.exists() and not cache_dir.is_dir() else (
            f"cannot be written ({exc.strerror or exc})")  # fmt: skip
        return (f"--cache: {cache_dir} {what}; going on without the cache (set "
                "NSYSMOE_CACHE_DIR to a writable folder)")  # fmt: skip
    return None


def key(path: Path) -> str:
    """The entry name of ``path`` (see the module docstring for what it covers)."""
    return file_key(path, __version__, FORMAT)


def through(
    cache_dir: Path, path: Path, read: Callable[[Path], Trace]
) -> tuple[Trace, str | None]:
    """``path``'s trace from the cache, else ``read(path)`` stored there; with the note of
    :func:`store` (None when all went well). The key is computed once."""
    try:
        name = key(path)
    except OSError:
        return read(path), None  # the file itself cannot be read: the reader says so
    trace = load(cache_dir, path, name)
    if trace is not None:
        return trace, None
    trace = read(path)
    return trace, store(cache_dir, path, trace, name)


def load(cache_dir: Path, path: Path, name: str | None = None) -> Trace | None:
    """The cached trace of ``path`` (entry ``name``, default its :func:`key`), or None: no
    entry, or a damaged one (removed, to be rebuilt). Never raises for the cache's sake."""
    try:
        entry = cache_dir / (name or key(path))
    except OSError:
        return None  # the file itself cannot be read: the reader says so
    if not (entry / "meta.json").is_file():
        return None
    try:
        meta = json.loads((entry / "meta.json").read_text())
        if not isinstance(meta, dict) or set(meta) != set(META):
            raise ValueError("meta.json does not describe a trace")
        meta["path"] = str(path)
        meta["warnings"] = tuple(meta["warnings"])
        meta["launch"] = Launch.from_dict(meta["launch"])
        tables = {t: pl.read_ipc(entry / f"{t}.arrow") for t in TABLES}
        return Trace(**meta, **tables)
    except Exception:  # noqa: BLE001 - damaged in any way: rebuilt, never fatal
        cache_entry.remove(entry)
        return None


def store(cache_dir: Path, path: Path, trace: Trace, name: str | None = None) -> str | None:
    """Store ``trace`` as the entry of ``path`` (``name``, default its :func:`key`): None, or
    why it could not be (one line)."""

    def fill(folder: Path) -> None:
        for t in TABLES:
            getattr(trace, t).write_ipc(folder / f"{t}.arrow")
        meta = {name: getattr(trace, name) for name in META}
        meta["warnings"] = list(meta["warnings"])
        meta["launch"] = trace.launch.to_dict()
        (folder / "meta.json").write_text(json.dumps(meta))

    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        entry = cache_dir / (name or key(path))
        if (entry / "meta.json").is_file():
            return None
        cache_entry.write(entry, "meta.json", fill)
        return None
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is a note, not fatal
        reason = " ".join(str(getattr(exc, "strerror", None) or exc).split())
        return f"--cache: could not store {path} in {cache_dir} ({reason}); read without the cache"
