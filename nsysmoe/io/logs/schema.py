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

LogFormat = Literal["megatron", "megatron-json", "torchtitan", "csv", "jsonl", "profile"]
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


#: the step times that can be measurements, in seconds (1e-320 s or 1e308 s is a corrupt value:
#: it made a change of +inf % and a NaN interval)
STEP_RANGE = (1e-9, 1e7)
#: the largest tokens/s per GPU that can be a measurement
MAX_TOKENS_PER_S = 1e13
#: the largest memory reading that can be one, in bytes (8 PiB; also where a float stops
#: holding every whole number)
MAX_MEMORY_BYTES = 2**53
#: the largest iteration number (Int64)
MAX_ITERATION = 2**63 - 1


def memory_out_of_range(value: pl.Expr) -> pl.Expr:
    """Whether a memory reading in bytes (not null) is no measurement: NaN, infinite, negative
    or over :data:`MAX_MEMORY_BYTES` (a float column; a whole-number one is cast)."""
    number = value.cast(pl.Float64)
    inside = number.is_finite() & (number >= 0) & (number <= MAX_MEMORY_BYTES)
    return value.is_not_null() & ~inside


def memory_note(count: int) -> str:
    """The note for ``count`` memory readings left out as no measurement."""
    return (f"{count} memory reading(s) that are not finite or not 0 to 2**53 bytes left out "
            "(not a measurement).")  # fmt: skip


def drop_nonpositive(table: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``table`` with values that cannot be measurements set to null, one note per column that
    had any; the samples stay (their loss and memory are still read). Zero and negative step
    times and tokens/s (a clock glitch or a placeholder); finite step times outside
    :data:`STEP_RANGE` and tokens/s over :data:`MAX_TOKENS_PER_S` (a corrupt value makes the
    change infinite); memory outside 0 to :data:`MAX_MEMORY_BYTES`; skipped and NaN counts
    under 0 or over the iterations the sample covers. NaN and infinite step times and tokens/s
    are left to the measure, which counts them."""
    notes: list[str] = []
    low, high = STEP_RANGE
    step, tokens = pl.col("step_s"), pl.col("tokens_per_s")
    checks = (
        (step, step <= 0, "step time", "a zero or negative step time"),
        (tokens, tokens <= 0, "tokens/s", "a zero or negative tokens/s"),
        (step, step.is_finite() & (step > 0) & ((step < low) | (step > high)), "step time",
         f"a step time outside {low:g} to {high:g} s (not a measurement)"),
        (tokens, tokens.is_finite() & (tokens > MAX_TOKENS_PER_S), "tokens/s",
         f"tokens/s over {MAX_TOKENS_PER_S:g} (not a measurement)"),
    )  # fmt: skip
    for column, bad, what, why in checks:
        table, count = _null_where(table, column, bad)
        if count:
            notes.append(f"{count} sample(s) with {why} left out (the {what} read as not logged).")
    table, count = _null_where(table, pl.col("mem_max_allocated_bytes"),
                               memory_out_of_range(pl.col("mem_max_allocated_bytes")))  # fmt: skip
    if count:
        notes.append(memory_note(count))
    for name, what in (("skipped", "skipped"), ("nan", "NaN")):
        count_of = pl.col(name)
        over = (count_of < 0) | (count_of > pl.col("iterations").fill_null(1))
        table, count = _null_where(table, count_of, count_of.is_not_null() & over)
        if count:
            notes.append(f"{count} sample(s) with a {what} count under 0 or over the iterations "
                         f"the sample covers: read as not logged.")  # fmt: skip
    return table, notes


def _null_where(table: pl.DataFrame, column: pl.Expr, bad: pl.Expr) -> tuple[pl.DataFrame, int]:
    """``table`` with ``column`` null where ``bad``, and how many rows that was."""
    bad = bad.fill_null(False)
    count = int(table.select(bad.sum()).item())
    if count:
        table = table.with_columns(pl.when(bad).then(None).otherwise(column).alias(
            column.meta.output_name()))  # fmt: skip
    return table, count


def sampling_of(table: pl.DataFrame, log_interval: int) -> Sampling:
    """The sampling: "point" where the samples leave iterations out (each covers fewer
    iterations than the gap between samples), else "mean"."""
    if table.height == 0 or log_interval <= 1:
        return "mean"
    covered = table.get_column("iterations").drop_nulls()
    return "point" if covered.len() and int(covered.max()) < log_interval else "mean"  # type: ignore[arg-type]
