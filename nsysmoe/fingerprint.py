"""Content fingerprints for the caches (stdlib only, so a cached report is served without
importing polars): of an input file (:func:`file_key`), of nsysmoe's own source
(:func:`source_hash`), and of any parts together (:func:`digest`).

A file's key covers its resolved path, device, inode, size and mtime (ns), and a hash of its
content — all of it for a file of up to 64 MiB (``FULL_HASH_BYTES``; one extra read of the file,
far cheaper than parsing it), and for a larger file 64 blocks of 64 KiB spread evenly from its
first byte to its last (4 MiB read). So editing, replacing or re-exporting a file changes the key,
and so does an in-place edit that keeps the size and restores the mtime — except, in a file over
64 MiB, one that touches only bytes outside the sampled blocks: that edit is not seen.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

FULL_HASH_BYTES = 64 << 20  # files up to this size are hashed whole
SAMPLES, SAMPLE_BYTES = 64, 64 << 10  # larger files: this many blocks, evenly spread
PACKAGE = Path(__file__).resolve().parent
SOURCE_SUFFIXES = (".py", ".toml")
#: the libraries whose versions can change a result or its text
LIBRARIES = ("polars", "numpy", "rich", "click")


def digest(*parts: object) -> str:
    """A 32-hex-digit hash of ``parts``' reprs (str, bytes, numbers, tuples of them)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


def file_key(path: Path, *extra: object) -> str:
    """The fingerprint of ``path`` (see the module docstring), with ``extra`` parts mixed in.
    Raises OSError when the file cannot be read."""
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
