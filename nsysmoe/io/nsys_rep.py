"""``.nsys-rep``/``.qdrep`` input, read through the fastest export at hand (issue 37):

1. a ``<report>_pqtdir/`` beside the report (what ``nsys recipe`` leaves there, or the user's
   own ``nsys export --type parquetdir``) that is newer than the report and holds the tables the
   measurements come from (:data:`BESIDE_NEEDS`) is read as it is — no ``nsys`` needed;
2. else the user's own ``nsys`` exports it to a temporary folder, probed once per process for
   what it supports (:func:`probe`): only the tables nsysmoe reads
   (:data:`~nsysmoe.io.nsys_sqlite.TABLES_READ`, ``--tables``), to Parquet where it can (nsys
   2023 and later), else to SQLite as before, under a time limit (``NSYSMOE_NSYS_TIMEOUT``
   seconds, default 600).

Either way the report is only read, and :class:`Exported` says which path was taken (the
report's source line: ``via``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nsysmoe import env
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.nsys_columnar import Columnar, table_files
from nsysmoe.io.nsys_sqlite import KERNEL_TABLE, NVTX_TABLE, RUNTIME_TABLE, TABLES_READ

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
NSYS_TIMEOUT_S = 600.0
#: the tables a Parquet export beside a report must hold to be read instead of exporting (a
#: recipe's cache holds these and the memory-op tables)
BESIDE_NEEDS = ("StringIds", KERNEL_TABLE, RUNTIME_TABLE, NVTX_TABLE)


def nsys_timeout() -> float:
    return env.seconds("NSYSMOE_NSYS_TIMEOUT", NSYS_TIMEOUT_S, upper=1e7, example="1200")


@dataclass(frozen=True)
class Exported:
    """The export a report is read from: its path, its kind (``sqlite``, ``parquet``) and how
    it was come by, in words for the report's source line."""

    path: Path
    kind: str
    via: str | None  # None: the path given was the export itself
    #: made for this read and deleted after it: its errors are said of the report
    temporary: bool = False


@dataclass(frozen=True)
class Caps:
    """What an ``nsys export`` supports, from its ``--help``."""

    parquet: bool  # --type parquetdir (nsys 2023 and later)
    tables: bool  # --tables PATTERNS


def beside(report: Path) -> Path | None:
    """The ``<report>_pqtdir/`` next to ``report`` when it can be read instead of exporting:
    a Parquet export whose every table file is newer than the report and that holds
    :data:`BESIDE_NEEDS`, each readable as Parquet; else None."""
    folder = report.with_name(report.name[: -len(report.suffix)] + "_pqtdir")
    if not folder.is_dir():
        return None
    try:
        files = {p.stem: p for p in table_files(folder) if p.suffix == ".parquet"}
        made = report.stat().st_mtime_ns
        fresh = all(p.stat().st_mtime_ns >= made for p in files.values())
    except (OSError, NsysmoeError):
        return None
    if not (fresh and set(BESIDE_NEEDS) <= set(files)):
        return None
    try:  # each needed table's footer read: a damaged folder is exported afresh instead
        export = Columnar(folder, "parquet")
        for table in BESIDE_NEEDS:
            export.schema(table)
    except NsysmoeError:
        return None
    return folder


@lru_cache(maxsize=8)
def probe(nsys: str, identity: tuple[int, int, int]) -> Caps:
    """What the ``nsys`` at this path (and ``identity``: its inode, size and mtime, so a
    replaced binary is probed again) supports, from ``nsys export --help``; nothing where the
    help cannot be had in the time limit."""
    try:
        returncode, output = _run([nsys, "export", "--help"], min(nsys_timeout(), 30.0),
                                  Path(nsys), help_text=True)  # fmt: skip
    except NsysmoeError:
        return Caps(False, False)
    if returncode != 0:
        return Caps(False, False)
    return Caps(parquet="parquetdir" in output, tables="--tables" in output)


def _caps(nsys: str) -> Caps:
    st = os.stat(nsys)
    return probe(os.path.realpath(nsys), (st.st_ino, st.st_size, st.st_mtime_ns))


@contextmanager
def export_report(path: Path, columnar: bool = True) -> Iterator[Exported]:
    """The export to read for ``path`` (see the module docstring); a temporary one is deleted
    afterwards, the report itself is only read. ``columnar=False``: SQLite only (the reader
    that splits by process reads SQLite)."""
    if columnar and (folder := beside(path)) is not None:
        yield Exported(folder, "parquet", f"read from {folder.name}/ beside it (newer than the "
                                          "report; not exported again)")  # fmt: skip
        return
    nsys = shutil.which("nsys")
    if nsys is None:
        raise NsysmoeError(
            f"{path}: reading a report needs `nsys` on PATH; or export it yourself: "
            f"nsys export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}"
        )
    caps = _caps(nsys)
    kind = "parquet" if columnar and caps.parquet else "sqlite"
    timeout = nsys_timeout()
    with tempfile.TemporaryDirectory(prefix="nsysmoe-") as tmp:
        out = Path(tmp) / (path.stem + ("_pqtdir" if kind == "parquet" else ".sqlite"))
        # an absolute path: a report named "-x.nsys-rep" is a file to nsys, never an option
        tables = ["--tables", ",".join(f"^{t}$" for t in TABLES_READ)] if caps.tables else []
        cmd = [nsys, "export", "--type", "parquetdir" if kind == "parquet" else "sqlite",
               *tables, "--force-overwrite", "true", "--output", str(out),
               os.path.abspath(path)]  # fmt: skip
        start = time.monotonic()
        returncode, output = _run(cmd, timeout, path)
        took = time.monotonic() - start
        made = out.is_dir() if kind == "parquet" else out.is_file()
        if returncode != 0 or not made:
            last = output.strip().splitlines()[-1:] or ["no output"]
            raise NsysmoeError(f"{path}: `nsys export` failed: {' '.join(last[0].split())}")
        only = f", the {len(TABLES_READ)} tables nsysmoe reads" if caps.tables else ""
        what = "Parquet" if kind == "parquet" else "SQLite"
        yield Exported(out, kind, f"exported to {what} by {nsys}{only} in {took:.2f} s", True)


def _run(cmd: list[str], timeout: float, path: Path,
         help_text: bool = False) -> tuple[int, str]:  # fmt: skip
    """Run ``cmd`` in its own process group (nsys starts helpers) with no stdin: its exit code
    and its stderr (else stdout; with ``help_text``, its stdout). Past ``timeout`` the whole
    group is killed and the user told how to go on."""
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)  # fmt: skip
    except OSError as exc:
        raise NsysmoeError(f"{path}: cannot run `nsys` ({exc.strerror or exc}); check the "
                           "nsys on PATH") from None  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise NsysmoeError(
            f"{path}: `nsys export` did not finish in {timeout:g} s; export it yourself (nsys "
            f"export --type sqlite -o {path.with_suffix('.sqlite').name} {path.name}) and pass "
            "the .sqlite, or raise NSYSMOE_NSYS_TIMEOUT"
        ) from None
    except BaseException:  # an interrupt: no nsys left behind
        _kill_group(proc)
        raise
    if help_text:
        return proc.returncode, stdout or ""
    return proc.returncode, stderr or stdout or ""


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with suppress(OSError, subprocess.TimeoutExpired):
        proc.communicate(timeout=5)
