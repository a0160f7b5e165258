"""A plain table of steps: CSV (header required) or JSONL, columns ``step, step_time_s`` and,
where known, ``tflops``, ``loss`` (and any other :data:`LOG_SCHEMA` column by its name, e.g.
``tokens_per_s``, ``iterations``). A row is one iteration unless an ``iterations`` column says
how many it averages. The file is scanned lazily (only those columns are materialised)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import console
from nsysmoe.io.logs.schema import LOG_SCHEMA, TrainingLog, common_gap, sampling_of, to_schema

EXPECTED = "a header line 'step,step_time_s[,tflops,loss]'"
RENAME = {"step": "iteration", "step_time_s": "step_s"}


def first_line(text: str) -> str:
    """The first line that is neither empty nor a ``#`` comment."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return ""


def looks_like_jsonl(text: str) -> bool:
    """Whether the first line is a JSON object with a ``step``."""
    try:
        row = json.loads(first_line(text))
    except ValueError:
        return False
    return isinstance(row, dict) and "step" in row


def looks_like_csv(text: str) -> bool:
    """Whether the first line is a CSV header naming ``step`` (or a header-less CSV of numbers,
    which :func:`read_table` refuses with what it expects)."""
    line = first_line(text)
    fields = [field.strip().strip('"').lower() for field in line.split(",")]
    return len(fields) >= 2 and ("step" in fields or all(_is_number(f) for f in fields))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(path: Path, kind: str) -> TrainingLog:
    """Read a CSV (``kind`` "csv") or JSONL ("jsonl") of steps."""
    with path.open("rb") as handle:
        head = handle.read(65536).decode("utf-8", errors="replace")
    if kind == "csv":
        fields = [f.strip().strip('"').lower() for f in first_line(head).split(",")]
        if "step" not in fields or "step_time_s" not in fields:
            raise NsysmoeError(f"{path}: a CSV needs {EXPECTED}; its first line is "
                               f"{first_line(head)[:80]!r}")  # fmt: skip
        frame = pl.scan_csv(
            path, comment_prefix="#", infer_schema=False, truncate_ragged_lines=True
        )
    else:
        frame = pl.scan_ndjson(path, infer_schema_length=None, ignore_errors=True)
    names = frame.collect_schema().names()
    if "step" not in names or "step_time_s" not in names:
        raise NsysmoeError(f"{path}: JSONL rows need 'step' and 'step_time_s' keys; found "
                           f"{', '.join(names[:8]) or 'none'}")  # fmt: skip
    wanted = [n for n in names if RENAME.get(n, n) in LOG_SCHEMA]
    try:
        table = frame.select(
            pl.col(n).cast(pl.String).alias(RENAME.get(n, n)) for n in wanted
        ).collect()
    except pl.exceptions.PolarsError as err:
        first = str(err).splitlines()[0][:120]
        raise NsysmoeError(f"{path}: not a readable {kind.upper()} ({first})") from None
    table = table.with_columns(pl.col(c).str.strip_chars().cast(LOG_SCHEMA[c], strict=False)
                               for c in table.columns)  # fmt: skip
    table = table.with_row_index("n", offset=2 if kind == "csv" else 1).with_columns(
        pl.col("n").cast(pl.Int64)
    )
    malformed = table.filter(pl.col("iteration").is_null()).height
    table = table.filter(pl.col("iteration").is_not_null())
    if table.height == 0:
        raise NsysmoeError(f"{path}: no rows with a step; expected {EXPECTED} and rows of numbers")
    table, notes = console.last_run(table)
    if malformed:
        notes.append(f"{malformed} row(s) without a step number left out.")
    if "iterations" not in table.columns:
        table = table.with_columns(pl.lit(1, dtype=pl.Int64).alias("iterations"))
    table = to_schema(table.with_columns(pl.col("iterations").fill_null(1)))
    log_interval = common_gap(table.get_column("iteration"))
    peak = table.get_column("mem_max_allocated_bytes").max()
    return TrainingLog(
        path=str(path), format="csv" if kind == "csv" else "jsonl", table=table, rank=None,
        ranks=(), log_interval=log_interval, sampling=sampling_of(table, log_interval),
        peak_memory_bytes=None if peak is None else int(peak),  # type: ignore[arg-type]
        config={}, notes=tuple(notes),
    )  # fmt: skip
