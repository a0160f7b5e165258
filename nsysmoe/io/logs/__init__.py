"""Training-log readers: one per format, all producing :class:`TrainingLog` (:data:`LOG_SCHEMA`).

:func:`read_log` sniffs the format by content, not by suffix, and turns every bad input into one
line (:class:`nsysmoe.errors.NsysmoeError`). Files are opened read-only and never changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs.megatron_json import NO_ITERATIONS, looks_like_metrics_json, read_megatron_json
from nsysmoe.io.logs.schema import LOG_SCHEMA, LogFormat, Sampling, TrainingLog

__all__ = ["LOG_SCHEMA", "LogFormat", "Sampling", "TrainingLog", "read_log"]

#: how much of a file the sniffing reads
HEAD_BYTES = 64 * 1024
_NOT_A_FILE = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def read_log(path: str | os.PathLike[str]) -> TrainingLog:
    """Read a training log of any supported format, sniffed from its first bytes: a Megatron
    metrics JSON, a Megatron-LM / Megatron-Bridge console log, torchtitan step lines, or a
    CSV / JSONL of ``step, step_time_s``. Raises :class:`NsysmoeError` (one line, path first)
    for a missing, unreadable, empty or binary file and for one with no training iterations."""
    file = Path(path)
    head = _head(file)
    text = head.decode("utf-8", errors="replace")
    if looks_like_metrics_json(text):
        return read_megatron_json(file)
    raise NsysmoeError(f"{file}: {NO_ITERATIONS}")


def _head(path: Path) -> bytes:
    """The file's first bytes, after the checks every reader needs: it exists, is a regular
    readable file (a FIFO or device is refused before any open), not empty, not binary."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        what = "a Megatron console log, a metrics JSON, torchtitan output or a CSV/JSONL"
        raise NsysmoeError(f"{path}: no such file; pass a training log ({what})") from None
    except OSError as err:
        raise NsysmoeError(f"{path}: cannot be read ({err.strerror}); check the path") from None
    if stat.S_ISDIR(mode):
        raise NsysmoeError(f"{path}: is a directory; pass a training log file, e.g. the "
                           "golden_values.json or the console log inside it")  # fmt: skip
    for test, what in _NOT_A_FILE:
        if test(mode):
            raise NsysmoeError(f"{path}: is {what}, not a file; save the log to a file first")
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError as err:
        why = err.strerror
        raise NsysmoeError(f"{path}: cannot be read ({why}); check its permissions") from None
    if not head.strip():
        raise NsysmoeError(f"{path}: the file is empty; pass the log the training run wrote")
    if b"\x00" in head:
        raise NsysmoeError(f"{path}: binary data, not a text training log; {NO_ITERATIONS}")
    return head
