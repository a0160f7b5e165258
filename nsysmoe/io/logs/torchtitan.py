"""torchtitan's step lines (``MetricsProcessor.log`` in ``torchtitan/components/metrics.py``)::

    [rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - step: 10  loss:  7.8765
    grad_norm:  1.2345  memory: 38.12GiB(40.13%)  tps: 7,123  tflops: 321.56  mfu: 32.51%

(one line, ANSI colours around each field). The line has no step time: ``step_s`` is null and
``tokens_per_s`` carries the speed (tokens/s per GPU over the ``log_freq`` steps since the line
before, so a line is a mean of those steps). ``memory`` is torchtitan's *max reserved* since the
line before, not max allocated: it is used as the peak memory, and a note says so. Validation
lines (``validate step:``) are left out.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import console
from nsysmoe.io.logs.console import NUM
from nsysmoe.io.logs.schema import (
    BAD_UTF8,
    CUT_LAST_LINE,
    NO_ITERATIONS,
    TrainingLog,
    common_gap,
    drop_nonpositive,
    memory_note,
    memory_out_of_range,
    sampling_of,
    to_schema,
)

#: a step line, with what comes before it (the launcher prefix and the logger's own)
RECORD = r"^(.*?)\bstep:\s*(\d+)\s+loss:"
HEADER = r"\bstep:\s*\d+\s+loss:"
FIELDS: dict[str, str] = {
    "loss": r"\bloss:\s*" + NUM,
    "grad_norm": r"\bgrad_norm:\s*" + NUM,
    "memory_gib": r"\bmemory:\s*" + NUM + r"\s*GiB",
    "tokens_per_s": r"\btps:\s*" + NUM,
    "tflops": r"\btflops:\s*" + NUM,
}
GIB = 1024.0**3
MEMORY_NOTE = ("memory is torchtitan's max reserved (not max allocated) since the line before: "
               "used as the peak memory.")  # fmt: skip


def read_torchtitan(path: Path, chunk_bytes: int = console.CHUNK_BYTES) -> TrainingLog:
    """Read torchtitan's step lines, streamed like the Megatron console reader."""
    parts: list[pl.DataFrame] = []
    malformed = truncated = 0
    bad_utf8 = False
    for chunk in console.chunks(path, chunk_bytes):
        bad_utf8 |= chunk.bad_utf8
        lines = chunk.lines.filter(pl.col("line").str.contains("step:", literal=True))
        if lines.height == 0:
            continue
        lines = lines.with_columns(pl.col("line").str.replace_all(console.ANSI, ""))
        lines = lines.filter(pl.col("line").str.contains(HEADER))
        record = pl.col("line").str.extract_groups(RECORD)
        validation = pl.col("record").struct.field("1").str.contains(r"validate\s*$")
        parsed = lines.with_columns(record.alias("record")).filter(~validation)
        parsed = parsed.with_columns(
            console.launcher_expr(pl.col("record").struct.field("1")).alias("rank"),
            pl.col("record").struct.field("2").cast(pl.Int64, strict=False).alias("iteration"),
            *(pl.col("line").str.extract(pattern, 1).str.replace_all(",", "")
              .cast(pl.Float64, strict=False).alias(name) for name, pattern in FIELDS.items()),
        )  # fmt: skip
        if chunk.unterminated_last:
            cut = (pl.col("n") == chunk.lines.item(-1, "n")) & ~pl.col("line").str.contains(
                r"mfu:\s*\S"
            )
            truncated += parsed.filter(cut).height
            parsed = parsed.filter(~cut)
        good = (pl.col("iteration") >= 1) & pl.col("tokens_per_s").is_not_null()
        malformed += parsed.filter(~good).height
        parts.append(parsed.filter(good).drop("line", "record"))
    table = pl.concat(parts) if parts else pl.DataFrame()
    if table.height == 0:
        raise NsysmoeError(f"{path}: {NO_ITERATIONS}")
    table, rank, ranks, notes = console.pick_rank(table, "step")
    table, restarts = console.last_run(table)
    notes += restarts
    absurd = memory_out_of_range(pl.col("memory_gib") * GIB)
    left_out = int(table.select(absurd.sum()).item())
    table = table.with_columns(pl.when(absurd).then(None).otherwise(pl.col("memory_gib"))
                               .alias("memory_gib"))  # fmt: skip
    peak = table.get_column("memory_gib").max()
    if peak is not None:
        notes.append(MEMORY_NOTE)
    if left_out:
        notes.append(memory_note(left_out))
    if truncated:
        notes.append(CUT_LAST_LINE)
    if malformed:
        notes.append(f"{malformed} malformed step line(s) left out.")
    if bad_utf8:
        notes.append(BAD_UTF8)
    log_interval = common_gap(table.get_column("iteration"))
    table, nonpositive = drop_nonpositive(to_schema(
        table.with_columns(console.iterations_covered(table.get_column("iteration"), log_interval))
    ))  # fmt: skip
    notes += nonpositive
    return TrainingLog(
        path=str(path), format="torchtitan", table=table, rank=rank, ranks=ranks,
        log_interval=log_interval, sampling=sampling_of(table, log_interval),
        peak_memory_bytes=None if peak is None else round(float(peak) * GIB),  # type: ignore[arg-type]
        config={}, notes=tuple(notes),
    )  # fmt: skip
