"""Training iterations from NVTX ranges, mapped onto the GPU timeline (the window measured is
chosen from them in :mod:`nsysmoe.measure.window`).

The CPU runs ahead of the GPU (hundreds of ms in real traces), so a step's CPU range is not its GPU
time. A step's GPU work is every kernel/copy whose launching API call (any thread of the process)
started inside the step's CPU range; step *i* owns the GPU timeline from its first op's start to
the next step's first op's start (the last step: to its last op's end). Without CUDA API rows the
CPU times are used, and the report says so.
"""

from __future__ import annotations

import polars as pl

from nsysmoe.errors import NsysmoeError, UsageError
from nsysmoe.measure.launch_calls import launches_of
from nsysmoe.model import Trace, Window
from nsysmoe.results import Steps

#: ``iteration 12``, ``iter_3``, ``step 7``, ``train_step 2``, ``ProfilerStep#551``
DEFAULT_STEP_PATTERN = (
    r"(?i)^\s*(?:iteration|iter|train_step|step|ProfilerStep)\s*[#:_ ]?\s*(\d+)\s*$"
)

STEP_SCHEMA = {
    "pid": pl.Int64,
    "step": pl.Int64,
    "cpu_start_ns": pl.Int64,
    "cpu_end_ns": pl.Int64,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
    "step_ns": pl.Int64,  # GPU period: next step's GPU start − this step's (last: its GPU span)
    "complete": pl.Boolean,  # False: the last step, cut short by the end of the capture
}
#: the last step counts as complete when its GPU span reaches this share of the median period
COMPLETE_FRACTION = 0.9


def detect_steps(trace: Trace, pattern: str | None = None) -> Steps:
    """Find iteration ranges by name; capture group 1 of the pattern gives the step number.

    A number is ASCII digits 0-9 within int64; a range whose group 1 holds other digits (``\\d``
    matches every script's) or a larger number is skipped and counted in ``Steps.warnings``.
    Group 1 capturing anything but digits (or the pattern having none) is a usage error."""
    pattern = pattern or DEFAULT_STEP_PATTERN
    ranges = numbered(matched_ranges(trace.nvtx, pattern))
    warnings = number_notes(ranges, pattern)
    return steps_from(ranges, launched_ops(trace), pattern, warnings)


def matched_ranges(nvtx: pl.DataFrame, pattern: str, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """The NVTX ranges whose name matches the iteration pattern (one thread's ranges only), with
    group 1 as ``num`` (and the columns ``keep``); a pattern without group 1, or one polars
    refuses, is a usage error."""
    try:  # checks the pattern even without NVTX rows
        if not pl.Series([""]).str.extract_groups(pattern).struct.fields:
            raise UsageError(f"--step-range {_shown(pattern)} has no capture group; {_GROUP_1}")
        # lazily: only the matching ranges' columns are ever materialised, not a copy of all
        return (
            nvtx.lazy()
            .select("pid", "start", "end", "cross_thread",
                    pl.col("name").str.extract(pattern, 1).alias("num"), *keep)
            .filter(pl.col("num").is_not_null() & ~pl.col("cross_thread"))
            .collect()
        )  # fmt: skip
    except pl.exceptions.PolarsError as exc:
        reason = " ".join(str(exc).split())
        raise NsysmoeError(f"bad --step-range pattern {pattern!r}: {reason}") from None


def steps_from(ranges: pl.DataFrame, ops: pl.DataFrame, pattern: str,
               warnings: tuple[str, ...]) -> Steps:  # fmt: skip
    """The iterations of the numbered ranges (:func:`numbered`, the rows without a number left
    out here) on the GPU timeline of ``ops`` (:func:`launched_ops`); each process's steps
    depend on its own ranges and ops only."""
    ranges = ranges.filter(pl.col("step").is_not_null())
    if ranges.is_empty():
        return Steps(pl.DataFrame(schema=STEP_SCHEMA), pattern, "none", warnings)
    ranges = (
        ranges.select("pid", "step", "start", "end")
        .rename({"start": "cpu_start_ns", "end": "cpu_end_ns"})
        .unique(["pid", "step"], keep="first")
        .sort("pid", "cpu_start_ns")
    )
    if ops.is_empty():
        table = ranges.with_columns(
            gpu_start_ns=pl.col("cpu_start_ns"), gpu_end_ns=pl.col("cpu_end_ns")
        )
        return Steps(_with_periods(table), pattern, "cpu", warnings)
    owned = (
        ops.join_asof(
            ranges, left_on="api_start", right_on="cpu_start_ns", by="pid", check_sortedness=False
        )
        .filter(pl.col("step").is_not_null() & (pl.col("api_start") < pl.col("cpu_end_ns")))
        .group_by("pid", "step")
        .agg(pl.col("start").min().alias("gpu_start_ns"), pl.col("end").max().alias("gpu_end_ns"))
    )
    table = ranges.join(owned, on=["pid", "step"], how="inner")
    return Steps(_with_periods(table), pattern, "gpu", warnings)


_GROUP_1 = "group 1 must capture the iteration number, digits 0-9, e.g. 'iteration ([0-9]+)'"


def _shown(text: str, most: int = 40) -> str:
    return repr(text if len(text) <= most else text[: most - 1] + "…")


def numbered(ranges: pl.DataFrame) -> pl.DataFrame:
    """The matched ranges with their number as ``step`` (null where group 1 holds no number
    within int64) and ``digits`` (group 1 is digits of any script): row by row, so the ranges
    of several processes numbered apart are the rows numbered together."""
    num = pl.col("num")
    return ranges.with_columns(
        pl.when(num.str.contains(r"^[0-9]+$")).then(num.cast(pl.Int64, strict=False))
        .alias("step"),
        num.str.contains(r"^\d+$").alias("digits"),  # of any script: the trace's doing
    )  # fmt: skip


def number_notes(ranges: pl.DataFrame, pattern: str) -> tuple[str, ...]:
    """What the numbering of all the ranges (:func:`numbered`, in the trace's order) says: a
    usage error where group 1 captured more than digits (the pattern's fault, not the trace's),
    and a warning counting the ranges whose number is not digits 0-9 within int64."""
    not_digits = ranges.filter(~pl.col("digits"))["num"]
    if len(not_digits):
        more = len(not_digits) - 1
        also = f", and non-numbers in {more:,} more NVTX range{'s' if more > 1 else ''}"
        raise UsageError(
            f"--step-range {_shown(pattern)}: group 1 captured {_shown(not_digits[0])}, which is "
            f"not a number{also if more else ''}; {_GROUP_1}"
        )
    skipped = ranges.filter(pl.col("step").is_null())["num"]
    if skipped.is_empty():
        return ()
    n = len(skipped)
    its, they = ("their", "they count") if n > 1 else ("its", "it counts")
    note = (f"{n:,} NVTX range{'s' if n > 1 else ''} matching the iteration pattern skipped: "
            f"{its} number is not digits 0-9 within int64 (e.g. {_shown(skipped[0])}); "
            f"{they} in no iteration")  # fmt: skip
    return (note,)


def launched_ops(trace: Trace) -> pl.DataFrame:
    """GPU ops with their launching API call's start (the trace's shared launch join), sorted
    for an as-of join; ops without a launch row are left out."""
    ops = launches_of(trace).ops.select("pid", "start", "end", "api_start")
    # by launch time alone: sorted within each pid too, as the as-of join by pid needs, and a
    # one-key sort is several times cheaper than a two-key one
    return ops.filter(pl.col("api_start").is_not_null()).sort("api_start")


def _with_periods(table: pl.DataFrame) -> pl.DataFrame:
    """GPU period of each step; a last step much shorter than the others is marked incomplete
    (the capture stopped inside it), so it cannot skew medians, spreads or verdicts."""
    table = table.sort("pid", "step")
    nxt = pl.col("gpu_start_ns").shift(-1).over("pid")
    has_next = nxt.is_not_null() & (nxt > pl.col("gpu_start_ns"))
    table = table.with_columns(
        pl.when(has_next).then(nxt - pl.col("gpu_start_ns"))
        .otherwise(pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("step_ns"),
        has_next.alias("has_next"),
    )  # fmt: skip
    typical = pl.col("step_ns").filter(pl.col("has_next")).median().over("pid")
    complete = (
        pl.col("has_next") | typical.is_null() | (pl.col("step_ns") >= COMPLETE_FRACTION * typical)
    )
    return (
        table.with_columns(complete.alias("complete")).select(list(STEP_SCHEMA)).cast(STEP_SCHEMA)
    )


def process_windows(steps: Steps, kept: list[int]) -> pl.DataFrame:
    """Each process's own GPU window of each kept step (pid, step, start_ns, end_ns): ranks
    skewed in time must not share one window, or kernels would count in two iterations."""
    return (
        steps.table.filter(pl.col("step").is_in(kept))
        .select("pid", "step", pl.col("gpu_start_ns").alias("start_ns"),
                (pl.col("gpu_start_ns") + pl.col("step_ns")).alias("end_ns"))
        .sort("pid", "step")
    )  # fmt: skip


def step_windows(steps: Steps, kept: list[int]) -> list[tuple[int, Window]]:
    """Per kept step number, the GPU window it owns (across processes: earliest start, latest
    end)."""
    rows = steps.table.filter(pl.col("step").is_in(kept)).with_columns(
        (pl.col("gpu_start_ns") + pl.col("step_ns")).alias("owned_end")
    )
    agg = (
        rows.group_by("step")
        .agg(pl.col("gpu_start_ns").min(), pl.col("owned_end").max())
        .sort("step")
    )
    return [(s, Window(int(a), int(b))) for s, a, b in agg.iter_rows()]
