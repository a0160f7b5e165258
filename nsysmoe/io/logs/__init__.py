"""Training-log readers: one per format, all producing :class:`TrainingLog` (:data:`LOG_SCHEMA`).

:func:`read_log` sniffs the format by content, not by suffix, and turns every bad input into one
line (:class:`nsysmoe.errors.NsysmoeError`). Files are opened read-only and never changed.
Every log passes one gate on its way out, :func:`redacted`, as every trace passes
:func:`nsysmoe.io.redact.redact_trace`: a log's arguments can hold credentials (``--hf-token``,
a ``s3://user:pass@`` data path) and a report is pasted into public reviews.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import replace
from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs.console import ANSI, chunks
from nsysmoe.io.logs.megatron import HEADER as MEGATRON_HEADER
from nsysmoe.io.logs.megatron import read_megatron
from nsysmoe.io.logs.megatron_json import looks_like_metrics_json, read_megatron_json
from nsysmoe.io.logs.schema import LOG_SCHEMA, NO_ITERATIONS, LogFormat, Sampling, TrainingLog
from nsysmoe.io.logs.table import looks_like_csv, looks_like_jsonl, read_table
from nsysmoe.io.logs.torchtitan import HEADER as TORCHTITAN_HEADER
from nsysmoe.io.logs.torchtitan import read_torchtitan
from nsysmoe.io.redact import redact, redact_text

__all__ = ["LOG_SCHEMA", "LogFormat", "Sampling", "TrainingLog", "read_log", "redacted"]

#: how much of a file the sniffing reads
HEAD_BYTES = 64 * 1024
#: any console format's record, for the streamed sniff
SNIFF = f"{MEGATRON_HEADER}|{TORCHTITAN_HEADER}|step:"
_NOT_A_FILE = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip


def read_log(path: str | os.PathLike[str]) -> TrainingLog:
    """Read a training log of any supported format, sniffed from its first bytes: a Megatron
    metrics JSON, a Megatron-LM / Megatron-Bridge console log, torchtitan step lines, or a
    CSV / JSONL of ``step, step_time_s``. Raises :class:`NsysmoeError` (one line, path first)
    for a missing, unreadable, empty or binary file and for one with no training iterations.
    Secrets in the log's arguments and notes are redacted (:func:`redacted`)."""
    return redacted(_read(Path(path)))


def redacted(log: TrainingLog) -> TrainingLog:
    """``log`` with every secret its arguments and notes can be seen to hold redacted, by the
    rules traces follow (:mod:`nsysmoe.io.redact`): the value of an argument named like a
    credential (``--hf-token``, ``--db-password``), and inside any value or note a URL's user
    info, a token's shape, a ``Bearer`` value, a ``key=value`` pair named like a credential.
    Ordinary arguments (``--moe-token-dispatcher-type``, ``--tokenizer-model``) stay readable."""
    config = {redact_text(key): redact(key, value) for key, value in log.config.items()}
    return replace(log, config=config, notes=tuple(redact_text(note) for note in log.notes))


def _read(file: Path) -> TrainingLog:
    """The log read by the reader its first bytes name."""
    head = _head(file)
    text = head.decode("utf-8", errors="replace")
    if looks_like_metrics_json(text):
        return read_megatron_json(file)
    if looks_like_jsonl(text):
        return read_table(file, "jsonl")
    if looks_like_csv(text):
        return read_table(file, "csv")
    kind = _console_kind(text) or _console_kind_streamed(file)
    if kind == "megatron":
        return read_megatron(file)
    if kind == "torchtitan":
        return read_torchtitan(file)
    raise NsysmoeError(f"{file}: {NO_ITERATIONS}")


def _console_kind(text: str) -> LogFormat | None:
    """Which console format's record text holds first (by line position), if any."""
    plain = re.sub(ANSI, "", text)
    found = {"megatron": re.search(MEGATRON_HEADER, plain),
             "torchtitan": re.search(TORCHTITAN_HEADER, plain)}  # fmt: skip
    hits = {kind: match.start() for kind, match in found.items() if match}
    return min(hits, key=hits.__getitem__) if hits else None  # type: ignore[return-value]


def _console_kind_streamed(path: Path) -> LogFormat | None:
    """The console format of a log whose first lines hold no record (startup output can run to
    megabytes): the first chunk that holds one decides. Bounded like the readers."""
    for chunk in chunks(path):
        lines = chunk.lines.filter(pl.col("line").str.contains(SNIFF))
        if lines.height:
            kind = _console_kind("\n".join(lines.get_column("line").head(1000).to_list()))
            if kind:
                return kind
    return None


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
