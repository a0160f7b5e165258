"""Content fingerprints for the caches (stdlib only, so a cached report is served without
importing polars): of an input file (:func:`file_key`), of nsysmoe's own source
(:func:`source_hash`), and of any parts together (:func:`digest`).

A file's key covers its resolved path, device, inode, size and mtime (ns), and a hash of its
content — all of it for a file of up to 64 MiB (``FULL_HASH_BYTES``; one extra read of the file,
far cheaper than parsing it), and for a larger file 64 blocks of 64 KiB spread evenly from its
first byte to its last (4 MiB read). So editing, replacing or re-exporting a file changes the key,
and so does an in-place edit that keeps the size and restores the mtime — except, in a file over
64 MiB, one that touches only bytes outside the sampled blocks: that edit is not seen.

A Parquet/Arrow export folder's key (:func:`folder_key`) is its table files' keys together.

A file with changes pending beside it (:func:`pending_writes`: an un-checkpointed ``-wal``, a
live rollback ``-journal``) has no key: its content is not what a reader would see, so no cache
serves it, and the reader refuses it with the reason.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
from functools import lru_cache
from pathlib import Path

FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole
SAMPLES, SAMPLE_BYTES = 64, 64 << 10  # larger files: this many blocks, evenly spread
PACKAGE = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".py", ".toml")
#: the libraries whose versions can change a result or its text
LIBRARIES = ("polars", "numpy", "rich", "click")


#: the first bytes of a live rollback journal (SQLite's file format, "the rollback journal")
JOURNAL_MAGIC = b"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7"


class PendingWrites(OSError):
    """A file whose sidecar holds changes not yet in it: no fingerprint describes what it holds."""


def pending_writes(path: Path) -> tuple[Path, str] | None:
    """The sidecar of ``path`` that holds changes not yet in it, and which kind (``"wal"``, a
    non-empty write-ahead log; ``"journal"``, a live rollback journal), or None."""
    wal = path.with_name(path.name + "-wal")
    if _size(wal):
        return wal, "wal"
    journal = path.with_name(path.name + "-journal")
    if _size(journal):
        try:
            with journal.open("rb") as fh:
                if fh.read(len(JOURNAL_MAGIC)) == JOURNAL_MAGIC:
                    return journal, "journal"
        except OSError:  # a journal that cannot be read may be live: taken as one
            return journal, "journal"
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def digest(*parts: object) -> str:
    """A 32-hex-digit hash of ``parts``' reprs (str, bytes, numbers, tuples of them)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


def file_key(path: Path, *extra: object) -> str:
    """The fingerprint of ``path`` (see the module docstring), with ``extra`` parts mixed in.
    Raises OSError when the file cannot be read, :class:`PendingWrites` when changes are pending
    beside it."""
    if (pending := pending_writes(path)) is not None:
        raise PendingWrites(f"{pending[0]} holds changes not yet in {path}")
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    ident = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, *extra)
    h.update(repr(ident).encode())
    with path.open("rb") as fh:
        if st.st_size <= FULL_HASH_BYTES:
            while block := fh.read(1 << 20):
                h.update(block)
        else:
            last = st.st_size - SAMPLE_BYTES
            for i in range(SAMPLES):
                fh.seek(last * i // (SAMPLES - 1))
                h.update(fh.read(SAMPLE_BYTES))
    return h.hexdigest()


#: the table files of a Parquet/Arrow export folder (as nsysmoe.io.nsys_columnar reads them)
TABLE_SUFFIXES = (".parquet", ".arrow")


def folder_key(path: Path, *extra: object) -> str:
    """The fingerprint of a Parquet/Arrow export folder: its resolved path and each table
    file's :func:`file_key` with its name, so adding, removing or changing a table changes it.
    Raises OSError when the folder holds no table file (a folder of ranks is not one input) or
    one cannot be read."""
    tables = sorted(p for p in path.iterdir() if p.suffix in TABLE_SUFFIXES)
    if not tables:
        raise OSError(f"{path}: not an export folder")
    if not all(stat.S_ISREG(os.stat(p).st_mode) for p in tables):  # a FIFO would block an open
        raise OSError(f"{path}: a table file is not a regular file")
    prints = tuple((p.name, file_key(p)) for p in tables)
    return digest("folder", str(path.resolve()), prints, *extra)


@lru_cache(maxsize=1)
def source_hash() -> str:
    """A hash of every ``.py`` and ``.toml`` file of the nsysmoe package (names and contents), so
    an edited checkout never serves a result an older code computed (~1 MB read: a few ms)."""
    h = hashlib.blake2b(digest_size=16)
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, PACKAGE).encode() + b"\0")
                with open(path, "rb") as fh:
                    h.update(fh.read())
                h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def libraries() -> tuple[object, ...]:
    """Where each of :data:`LIBRARIES` is installed and its ``__init__``'s size and mtime (an
    upgrade replaces it), found without importing them."""
    found: list[object] = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec else None
        try:
            st = os.stat(origin) if origin else None
        except OSError:
            st = None
        found.append((name, origin, st and st.st_size, st and st.st_mtime_ns))
    return tuple(found)
