"""Readers: one per input format, all producing :class:`nsysmoe.model.Trace`."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from nsysmoe.errors import NsysmoeError

if TYPE_CHECKING:
    from nsysmoe.io.nsys_rep import Exported
    from nsysmoe.io.processes import ByProcess
    from nsysmoe.model import Trace

_NOT_A_FILE = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def load_trace(path: str | Path) -> Trace:
    """Read a trace (:func:`_read`), every secret its metadata holds redacted
    (:func:`nsysmoe.io.redact.redact_trace`): the one gate between a file and everything else —
    the caches store what passed it, the analyses and every output see nothing else."""
    from nsysmoe.io.redact import redact_trace

    return redact_trace(_read(Path(path)))


def load_by_process(path: str | Path, spill_dir: str | Path) -> ByProcess:
    """A trace read one process at a time (:class:`~nsysmoe.io.processes.ByProcess`), through
    the same gate as :func:`load_trace`: the same formats, errors and redaction. An nsys export
    (or report) is split while it is read (:func:`~nsysmoe.io.nsys_split.read_by_process`: the
    processes' rows wait in a new folder in ``spill_dir``, which the caller removes); a Kineto
    trace is read whole and split in memory."""
    from nsysmoe.io.nsys_split import read_by_process
    from nsysmoe.io.processes import ByProcess
    from nsysmoe.io.redact import redact_trace

    path = Path(path)
    if _format(path) == "kineto":
        return ByProcess.of(load_trace(path))
    with _nsys_export(path) as export:
        by = read_by_process(export.path, spill_dir)
    return _with_shared(by, redact_trace(replace(by.shared, path=str(path))))


def several_processes(path: str | Path) -> bool:
    """Whether ``path`` is an nsys SQLite export whose kernels ran in two or more processes,
    told from 64 blocks of rows spread over its kernel table (rowid seeks, not a scan: a
    fraction of a second on any size). It only chooses how a big file is read (by process or
    whole: the same figures), so anything unreadable or unsure is False; a process with too
    few kernels to be sampled is missed the same way."""
    from nsysmoe.io.nsys_db import SQLITE_MAGIC, connect_readonly, read_head
    from nsysmoe.io.nsys_sqlite import KERNEL_TABLE

    path = Path(path)
    try:
        if not path.is_file() or read_head(path, len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            return False
        conn, _ = connect_readonly(path)
    except (OSError, NsysmoeError):
        return False
    try:
        lo, hi = conn.execute(f"SELECT min(rowid), max(rowid) FROM {KERNEL_TABLE}").fetchone()
        if lo is None:
            return False
        seen: set[object] = set()
        for i in range(64):
            at = lo + (hi - lo) * i // 64
            seen.update(g for (g,) in conn.execute(
                f"SELECT globalPid FROM {KERNEL_TABLE} WHERE rowid >= ? AND rowid < ?",
                (at, at + 64)))  # fmt: skip
            if len(seen) > 1:
                return True
        return False
    except sqlite3.Error:  # no such table or column, or damaged: the reader says so
        return False
    finally:
        conn.close()


def _with_shared(by: ByProcess, shared: Trace) -> ByProcess:
    """``by`` with ``shared`` for its shared tables, each process's small tables taken from it
    (a GPU name redacted, a report's path)."""
    from nsysmoe.io.processes import BIG_TABLES, Process

    def load(pid: int) -> Process:
        got = by.load(pid)
        big = {t: getattr(got.trace, t) for t in BIG_TABLES}
        return Process(pid, replace(shared.only_processes([pid]), **big), got.order)

    return replace(by, shared=shared, _load=load)


def _read(path: Path) -> Trace:
    """Read a trace (:func:`_format` says which reader)."""
    from nsysmoe.io.kineto import read_kineto
    from nsysmoe.io.nsys_columnar import read_nsys_columnar
    from nsysmoe.io.nsys_sqlite import read_nsys_sqlite

    kind = _format(path)
    if kind == "kineto":
        return read_kineto(path)
    if kind in ("parquet", "arrow", "arrows"):
        return read_nsys_columnar(path, kind)
    with _nsys_export(path, columnar=True) as export:
        if export.kind == "parquet":
            trace = read_nsys_columnar(export.path, "parquet")
        else:
            trace = read_nsys_sqlite(export.path)
    # a report's path, not its (deleted) export's, and how it was read
    return replace(trace, path=str(path), via=export.via)


@contextmanager
def _nsys_export(path: Path, columnar: bool = False) -> Iterator[Exported]:
    """The nsys export to read for ``path``: itself, or the export of a report
    (``.nsys-rep``/``.qdrep``: :func:`~nsysmoe.io.nsys_rep.export_report`; ``columnar``: a
    Parquet export where that is the fastest), whose errors are said of the report."""
    from nsysmoe.io.nsys_rep import REPORT_SUFFIXES, Exported, export_report

    if not (path.suffix in REPORT_SUFFIXES and path.is_file()):
        yield Exported(path, "sqlite", None)
        return
    with export_report(path, columnar) as export:
        if not export.temporary:  # a folder beside the report: its errors name its files
            yield export
            return
        try:
            yield export
        except NsysmoeError as exc:  # said of the user's report, not of the deleted export
            raise NsysmoeError(str(exc).replace(str(export.path), str(path))) from None


def _format(path: Path) -> str:
    """``"kineto"``, ``"parquet"``, ``"arrow"``, ``"arrows"`` or ``"nsys"``, by content, not
    suffix: a folder holding ``<TABLE>.parquet`` / ``<TABLE>.arrow`` files → that columnar export
    (:func:`~nsysmoe.io.nsys_columnar.columnar_kind`); an Arrow IPC message → the one-file Arrow
    export (``nsys export --type arrow``, ``.arrows``); SQLite magic → nsys export; gzip magic or
    JSON text (``{``, ``[``) → PyTorch profiler (Kineto) trace; ``.nsys-rep``/``.qdrep`` go
    through ``nsys export``. Anything else goes to the nsys reader, whose errors say what to
    pass. Only regular files are opened: a FIFO, device or socket is refused before any read (an
    open of a FIFO would block, ``/dev/zero`` never ends)."""
    # the readers (and polars) are imported here, not with the package: a module of it such as
    # nsysmoe.io.output serves a cached report without them
    from nsysmoe.io.arrow_streams import CONTINUATION
    from nsysmoe.io.kineto import is_kineto
    from nsysmoe.io.nsys_columnar import columnar_kind
    from nsysmoe.io.nsys_rep import REPORT_SUFFIXES
    from nsysmoe.io.nsys_sqlite import SQLITE_MAGIC

    _check_regular(path)
    if path.is_dir() and (kind := columnar_kind(path)):
        return kind
    if path.suffix in REPORT_SUFFIXES and path.is_file():
        return "nsys"
    if path.is_file():
        try:
            with path.open("rb") as fh:
                head = fh.read(64)
        except OSError as exc:
            raise NsysmoeError(f"{path}: cannot read it ({exc.strerror or exc}); check its "
                               "permissions") from None  # fmt: skip
        if not head.strip():
            raise NsysmoeError(f"{path}: file is empty; pass an nsys SQLite export or a PyTorch "
                               "profiler trace")  # fmt: skip
        if head.startswith(CONTINUATION):  # nsys export --type arrow: IPC streams
            return "arrows"
        if not head.startswith(SQLITE_MAGIC) and is_kineto(head):
            return "kineto"
    return "nsys"


def _check_regular(path: Path) -> None:
    """Refuse what is not a regular file or a folder (those the readers name), without opening
    it; a path the user may not look up is said here too."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return  # the reader says "no such file" (a dangling link too)
    except ValueError:  # an embedded NUL byte
        raise NsysmoeError(f"{str(path)!r}: not a valid path; check the argument") from None
    except OSError as exc:
        raise NsysmoeError(f"{path}: cannot look it up ({exc.strerror or exc}); check the path "
                           "and the permissions of its folders") from None  # fmt: skip
    for test, what in _NOT_A_FILE:
        if test(mode):
            raise NsysmoeError(f"{path}: is {what}, not a trace file; pass an nsys SQLite export "
                               "or a PyTorch profiler trace")  # fmt: skip
