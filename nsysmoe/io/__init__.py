"""Readers: one per input format, all producing :class:`nsysmoe.model.Trace`."""

from __future__ import annotations

from pathlib import Path

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.kineto import is_kineto, read_kineto
from nsysmoe.io.nsys_rep import REPORT_SUFFIXES, export_report
from nsysmoe.io.nsys_sqlite import SQLITE_MAGIC, read_nsys_sqlite
from nsysmoe.model import Trace


def load_trace(path: str | Path) -> Trace:
    """Read a trace, detecting its format by content, not suffix: SQLite magic → nsys export; gzip
    magic or JSON text (``{``, ``[``) → PyTorch profiler (Kineto) trace; ``.nsys-rep``/``.qdrep``
    go through ``nsys export``. Anything else goes to the nsys reader, whose errors say what to
    pass."""
    path = Path(path)
    if path.suffix in REPORT_SUFFIXES and path.is_file():
        with export_report(path) as sqlite_path:
            trace = read_nsys_sqlite(sqlite_path)
        return trace
    if path.is_file():
        with path.open("rb") as fh:
            head = fh.read(64)
        if not head.strip():
            raise NsysmoeError(f"{path}: file is empty; pass an nsys SQLite export or a PyTorch "
                               "profiler trace")  # fmt: skip
        if not head.startswith(SQLITE_MAGIC) and is_kineto(head):
            return read_kineto(path)
    return read_nsys_sqlite(path)
