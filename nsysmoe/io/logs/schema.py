"""The canonical per-sample log table and the :class:`TrainingLog` every log reader returns.

One table for every training-log format, so the acceptance measure (``nsysmoe.measure``) reads
one shape whatever wrote the log. Kept apart from the readers so each reader imports it without
importing the others; with it, the messages every reader words the same way (written once
here, so a user sees one sentence for one thing whatever the format).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

LOG_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "iteration": pl.Int64,  # the last iteration the sample covers
    "iterations": pl.Int64,  # how many iterations the sample covers: 1, or k for a k-interval mean
    "step_s": pl.Float64,  # seconds per iteration (the sample's mean); null where not logged
    "tflops": pl.Float64,  # model TFLOP/s per GPU
    "tokens_per_s": pl.Float64,  # tokens/s per GPU
    "loss": pl.Float64,  # lm loss
    "loss_scale": pl.Float64,
    "grad_norm": pl.Float64,
    "skipped": pl.Int64,  # skipped iterations within this sample
    "nan": pl.Int64,  # NaN iterations within this sample
    "global_batch": pl.Int64,
    "mem_max_allocated_bytes": pl.Int64,  # where logged per sample (metrics JSON), else null
}

#: the one line for a file with no training iteration in it (every reader and the sniffing)
NO_ITERATIONS = (
    "no training iterations found: expected Megatron 'iteration N/ M |' lines, a Megatron "
    "metrics JSON, torchtitan 'step: N' lines or a CSV/JSONL with step and step_time_s"
)
#: the note for a last line without a line end (a writer cut off mid-line), left out
CUT_LAST_LINE = "the last line is cut off (no line end): left out."
#: the note for bytes that are not UTF-8 (each read as a replacement character)
BAD_UTF8 = "bytes that are not UTF-8 were read as replacement characters."

LogFormat = Literal["megatron", "megatron-json", "torchtitan", "csv", "jsonl"]
Sampling = Literal["mean", "point"]


@dataclass(frozen=True)
class TrainingLog:
    """One training log as samples (``table``: :data:`LOG_SCHEMA`, sorted by iteration, one row
    per sample, only the last run's samples after a restart) and what the log says about them.

    ``sampling`` is "mean" where the samples cover every iteration (each value averages
    ``iterations`` iterations, ``iterations == log_interval``) and "point" where one iteration
    is sampled every ``log_interval`` (the metrics JSON's ``step_interval`` > 1 under
    ``--log-interval 1``). ``config`` maps "--key" to the value as text (booleans and None as
    Python writes them, as Megatron's arguments block prints them). ``notes``: one sentence per
    thing skipped or assumed."""

    path: str
    format: LogFormat
    table: pl.DataFrame
    rank: str | None
    ranks: tuple[str, ...]
    log_interval: int
    sampling: Sampling
    peak_memory_bytes: int | None
    config: dict[str, str]
    notes: tuple[str, ...]


def to_schema(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``'s columns cast to :data:`LOG_SCHEMA`, the missing ones null, sorted by
    iteration; columns outside the schema dropped."""
    columns = [
        (pl.col(name).cast(dtype, strict=False) if name in frame.columns
         else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in LOG_SCHEMA.items()
    ]  # fmt: skip
    return frame.select(columns).sort("iteration", maintain_order=True)


def common_gap(iterations: list[int] | pl.Series) -> int:
    """The most common gap between consecutive sample iterations (ties: the smallest); 1 for
    fewer than two samples. A first sample off the grid (iteration 1, then 5, 10, ...) does
    not change it."""
    gaps = pl.Series("gap", iterations, dtype=pl.Int64).diff().drop_nulls()
    counts = gaps.filter(gaps > 0).value_counts(name="count")
    if counts.height == 0:
        return 1
    top = counts.filter(pl.col("count") == pl.col("count").max())
    return int(top.get_column("gap").min())  # type: ignore[arg-type]


def drop_nonpositive(table: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``table`` with zero and negative step times and tokens/s set to null (not measurements:
    a clock glitch or a placeholder), one note per column that had any. The samples stay (their
    loss and memory are still read); NaN is left to the measure, which counts it."""
    notes: list[str] = []
    for column, what in (("step_s", "step time"), ("tokens_per_s", "tokens/s")):
        bad = pl.col(column) <= 0
        count = table.select(bad.sum()).item()
        if count:
            table = table.with_columns(pl.when(bad).then(None).otherwise(pl.col(column))
                                       .alias(column))  # fmt: skip
            notes.append(f"{count} sample(s) with a zero or negative {what} left out "
                         f"(the {what} read as not logged).")  # fmt: skip
    return table, notes


def sampling_of(table: pl.DataFrame, log_interval: int) -> Sampling:
    """The sampling: "point" where the samples leave iterations out (each covers fewer
    iterations than the gap between samples), else "mean"."""
    if table.height == 0 or log_interval <= 1:
        return "mean"
    covered = table.get_column("iterations").drop_nulls()
    return "point" if covered.len() and int(covered.max()) < log_interval else "mean"  # type: ignore[arg-type]
