"""Writing a report: whole or not at all, and never over what it should not replace."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from nsysmoe.errors import NsysmoeError


def write_report(path: Path, text: str) -> None:
    """``text`` to ``path`` atomically; a failure is one line saying so."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise NsysmoeError(f"-o {path}: cannot write the report ({exc.strerror or exc}); "
                           "write it elsewhere") from None  # fmt: skip


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file in the same folder,
    renamed over the target (a link is followed: the file it names is replaced). A target that
    is not a regular file (``/dev/stdout``, a FIFO) is written directly."""
    target = Path(os.path.realpath(path))
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
