"""Readers: one per input format, all producing :class:`nsysmoe.model.Trace`."""

from __future__ import annotations

from pathlib import Path

from nsysmoe.io.nsys_rep import REPORT_SUFFIXES, export_report
from nsysmoe.io.nsys_sqlite import read_nsys_sqlite
from nsysmoe.model import Trace


def load_trace(path: str | Path) -> Trace:
    """Read a trace, detecting its format (``.nsys-rep``/``.qdrep`` go through ``nsys export``)."""
    path = Path(path)
    if path.suffix in REPORT_SUFFIXES and path.is_file():
        with export_report(path) as sqlite_path:
            trace = read_nsys_sqlite(sqlite_path)
        return trace
    return read_nsys_sqlite(path)
