"""The acceptance measure: training logs' steady windows, their statistics and the changes
between them (issue 33).

Each log's window is declared (iterations ``first``–``last``) or found by the traces' warm-up
rule (:func:`nsysmoe.measure.window.warmup_count`) on its step-time samples, and graded by the
seeds' rule (a winner needs a run of 50 iterations; 6 or more post-warm-up steps only screen).
Statistics are over *samples*, each weighing once: a line averaging a log interval of k
iterations is one sample of k iterations, never k steps; a sample without a finite positive
metric is left out and counted. Confidence intervals are bootstraps over samples with a fixed
seed (the same logs give the same figures), made by :mod:`nsysmoe.measure.bootstrap`: percentile
intervals, and on a log of millions of samples the mean's normal one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from nsysmoe.acceptance import (
    ACCEPT_MIN_RUN,
    MIN_CHANGE_PCT,
    SAMPLE_SCHEMA,
    SCREEN_MIN_STEPS,
    Acceptance,
    AcceptanceSide,
    Change,
    ChangeVerdict,
    Grade,
    LogWindow,
)
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import TrainingLog
from nsysmoe.measure import bootstrap
from nsysmoe.measure.validity import is_true
from nsysmoe.measure.window import Warmup, warmup_count
from nsysmoe.text import noun

#: Relative per-iteration loss difference a change declared training-equivalent may show before
#: it is flagged. Reordered bf16 reductions (an overlapped or differently dispatched all-to-all,
#: another parallel mapping) move lm loss by well under 1 % in the first hundred iterations;
#: a different optimizer or routing moves it by several % (Megatron's CI pairs: muon vs adam
#: differ by up to 10 %, the a2a-overlap pair by 5 %, the dp-last mapping by 0).
LOSS_TOLERANCE = 0.01
#: bootstrap resamples and the fixed seed (numpy PCG64; side i draws from the seed's i-th spawned
#: stream, so the sides are resampled independently and each once for all its changes)
RESAMPLES = 2000
SEED = 0
#: a side's note where the logs share no steady iteration
APART = "the logs share no steady iterations: each is measured on its own window"
FORCED = "--moe-router-force-load-balancing"


@dataclass(frozen=True)
class _Measured:
    """One log's window rows (all rows inside it), its metric samples and their bootstrap
    medians (empty with fewer than 2 samples), drawn once for every change the side is in, and
    the same for its TFLOP/s samples."""

    side: AcceptanceSide
    rows: pl.DataFrame
    values: np.ndarray
    medians: np.ndarray
    tflops: np.ndarray = field(default_factory=lambda: np.empty(0))
    tflops_medians: np.ndarray = field(default_factory=lambda: np.empty(0))


def accept(logs: Sequence[TrainingLog], labels: Sequence[str], *,
           window: tuple[int, int] | None = None, equivalent: bool = False,
           loss_tolerance: float = LOSS_TOLERANCE, resamples: int = RESAMPLES,
           seed: int = SEED) -> Acceptance:  # fmt: skip
    """The logs measured on their steady windows: one side each, and for two or more each
    side's change against the one before and against the first (``window``: iterations
    declared for every log; ``equivalent``: the change is declared training-equivalent, so
    per-iteration losses are compared within ``loss_tolerance``, relative).

    Per side: the plain median and mean over the window's samples (each sample weighs once,
    whatever iterations it covers) and the mean's 95 % CI, for step time and TFLOP/s; per
    change: the relative change of the medians in % and its 95 % CI, both sides' samples
    resampled independently."""
    if not logs:
        raise NsysmoeError("no training logs given; pass one log per configuration")
    if len(labels) != len(logs):
        raise NsysmoeError(f"{len(labels)} labels for {len(logs)} logs; give one label per log")
    if not 0 < loss_tolerance < float("inf"):  # NaN fails too: it would flag nothing
        raise NsysmoeError(f"loss tolerance {loss_tolerance!r}: give a positive fraction of the "
                           "base's loss, e.g. 0.01")  # fmt: skip
    metrics = [_metric(log) for log in logs]
    for log, metric in zip(logs[1:], metrics[1:], strict=True):
        if metric != metrics[0]:
            raise NsysmoeError(
                f"{log.path}: logs {_what(metric)} while {logs[0].path} logs {_what(metrics[0])}; "
                "compare logs that record the same metric"
            )
    streams = np.random.SeedSequence(seed).spawn(len(logs))
    common = None if window is not None else _common(logs, metrics)
    apart = window is None and len(logs) > 1 and common is None
    measured = [_side(log, label, metric, window, resamples, stream, equivalent, common, apart)
                for log, label, metric, stream in zip(logs, labels, metrics, streams,
                                                      strict=True)]  # fmt: skip
    pairs = [(j, j + 1) for j in range(len(logs) - 1)]
    changes = tuple(_change(measured, b, t, equivalent, loss_tolerance) for b, t in pairs)
    vs_base = tuple(changes[0] if t == 1 else _change(measured, 0, t, equivalent, loss_tolerance)
                    for _, t in pairs)  # fmt: skip
    return Acceptance(tuple(m.side for m in measured), changes, vs_base, equivalent,
                      loss_tolerance, seed, resamples)  # fmt: skip


def _metric(log: TrainingLog) -> str:
    """"step time" where the log has finite positive step times, else "time per token"
    (1 / tokens/s) where it has finite positive tokens/s."""
    table = log.table
    for metric in ("step time", "time per token"):
        if _kept(table, metric).height:
            return metric
    logged = [(n, name) for column, name in (("step_s", "step times"),
                                             ("tokens_per_s", "tokens/s"))
              if (n := table.get_column(column).drop_nulls().len())]  # fmt: skip
    if not logged:  # the reader's notes say why, where it left values out (implausible ones)
        why = f" ({'; '.join(n.rstrip('.') for n in log.notes[:2])})" if log.notes else ""
        raise NsysmoeError(f"{log.path}: no step time or tokens/s in any of its {table.height} "
                           f"samples{why}; pass a log that records the iteration time")
    what = " and ".join(f"{n} logged {name}" for n, name in logged)
    raise NsysmoeError(
        f"{log.path}: no finite positive step time or tokens/s in any of its {table.height} "
        f"samples (its {what} are all inf, NaN, zero or negative); pass a log whose "
        "iterations were timed"
    )


def _what(metric: str) -> str:
    return "step times" if metric == "step time" else "only tokens/s"


def _values(frame: pl.DataFrame, metric: str) -> pl.Series:
    if metric == "step time":
        return frame.get_column("step_s")
    return 1.0 / frame.get_column("tokens_per_s")


def _kept(frame: pl.DataFrame, metric: str) -> pl.DataFrame:
    """The rows with a finite positive metric (inf, NaN, 0 and negative values are no time)."""
    values = _values(frame, metric)
    return frame.filter(values.is_finite() & (values > 0))


def _left_out(table: pl.DataFrame, metric: str) -> list[str]:
    """The notes counting samples left out for a non-finite or a zero or negative metric, in
    the log's own unit (tokens/s where the metric is time per token)."""
    stepped = metric == "step time"
    raw = table.get_column("step_s" if stepped else "tokens_per_s").drop_nulls()
    infinite = int((~raw.is_finite()).sum())
    negative = int((raw.is_finite() & (raw <= 0)).sum())
    notes = []
    if infinite:
        what = "a non-finite step time" if stepped else "non-finite tokens/s"
        notes.append(f"{infinite} {noun(infinite, 'sample')} with {what} left out")
    if negative:
        what = "a zero or negative step time" if stepped else "zero or negative tokens/s"
        notes.append(f"{negative} {noun(negative, 'sample')} with {what} left out")
    return notes


def _run(log: TrainingLog) -> tuple[int, int]:
    """The first iteration the log's run covers and how many it covers to its last sample: a
    mean sample covers its ``iterations``; a point sample, one logged every ``log_interval``,
    stands for the iterations since the one before, so a first point sample at iteration 5 of a
    5-interval log is a run from iteration 1 (never before 1)."""
    table = log.table
    span = (pl.col("iterations").fill_null(1) if log.sampling == "mean"
            else pl.lit(log.log_interval))  # fmt: skip
    first = table.select((pl.col("iteration") - span + 1).min()).item()
    first = max(1, int(first))
    return first, int(table.get_column("iteration").max()) - first + 1  # type: ignore[arg-type]


def _inside(frame: pl.DataFrame, first: int, last: int) -> pl.DataFrame:
    """The rows whose every covered iteration lies in [first, last]."""
    start = pl.col("iteration") - pl.col("iterations").fill_null(1) + 1
    return frame.filter((start >= first) & (pl.col("iteration") <= last))


def _steady(log: TrainingLog, metric: str) -> tuple[pl.DataFrame, pl.DataFrame, Warmup]:
    """A log's samples with a finite positive metric, those after its detected warm-up, and the
    rule's decision."""
    sampled = _kept(log.table, metric)
    warm = warmup_count(_values(sampled, metric).to_numpy())
    return sampled, sampled.slice(warm.skipped), warm


def _common(logs: Sequence[TrainingLog], metrics: Sequence[str]) -> tuple[int, int] | None:
    """The iterations every log has after its own warm-up, as for an A/B of traces (each side
    keeps its own window where they share none, or a side would keep no sample)."""
    if len(logs) < 2:
        return None
    spans = []
    for log, metric in zip(logs, metrics, strict=True):
        steady = _steady(log, metric)[1]
        if steady.height == 0:
            return None
        start = steady.get_column("iteration") - steady.get_column("iterations").fill_null(1) + 1
        spans.append((int(start.min()), int(steady.get_column("iteration").max())))  # type: ignore[arg-type]
    lo, hi = max(f for f, _ in spans), min(last for _, last in spans)
    if lo > hi:
        return None
    for log, metric in zip(logs, metrics, strict=True):
        if _inside(_steady(log, metric)[1], lo, hi).height == 0:
            return None
    return lo, hi


def _side(log: TrainingLog, label: str, metric: str, declared: tuple[int, int] | None,
          resamples: int, stream: np.random.SeedSequence, equivalent: bool,
          common: tuple[int, int] | None = None, apart: bool = False) -> _Measured:  # fmt: skip
    table = log.table
    sampled = _kept(table, metric)
    notes = list(log.notes) + _left_out(table, metric)
    if apart:
        notes.append(APART)
    run_first, run_iterations = _run(log)
    if declared is not None:
        samples = _inside(sampled, *declared)
        if samples.height == 0:
            raise NsysmoeError(
                f"{log.path}: no samples inside the declared window iterations "
                f"{declared[0]}–{declared[1]} (the log has {_has(sampled, log)}); "
                "declare a window within them"
            )
        skipped, why, how = 0, "declared", "declared"
    else:
        _, samples, warm = _steady(log, metric)
        skipped = warm.skipped
        if warm.median is None or warm.tolerance is None:
            why, how = "whole log", "whole log: fewer than 3 samples, no warm-up detected"
        else:
            why = "warm-up detected"
            median = (f"{warm.median * 1e3:,.3f} ms" if metric == "step time"
                      else f"{1 / warm.median:,.0f} tokens/s")  # fmt: skip
            how = (f"{skipped} {noun(skipped, 'sample')} skipped as warm-up (until within "
                   f"{100 * warm.tolerance:.0f} % of the steady median {median})")  # fmt: skip
        if common is not None and (kept := _inside(samples, *common)).height < samples.height:
            samples = kept  # said only where it left samples out
            how += f"; only iterations every log has ({common[0]}–{common[1]})"
    start = samples.get_column("iteration") - samples.get_column("iterations").fill_null(1) + 1
    first, last = int(start.min()), int(samples.get_column("iteration").max())  # type: ignore[arg-type]
    rows = _inside(table, first, last)
    steps = int(samples.get_column("iterations").fill_null(1).sum())
    grade = _grade(steps, run_iterations)
    description = _describe(log, first, last, declared, samples.height, steps, why, how,
                            grade, run_iterations, run_first)  # fmt: skip
    lw = LogWindow(first, last, steps, samples.height, log.log_interval, why,  # type: ignore[arg-type]
                   skipped, run_iterations, grade, description)  # fmt: skip
    values = _values(samples, metric).to_numpy().astype(np.float64)
    if metric == "time per token":
        notes.append("only tokens/s logged: step-time figures are time per token (1 / tokens/s), "
                     "the step time itself is not known")  # fmt: skip
    if len(values) < 2:
        notes.append(f"{len(values)} sample in the window: no confidence interval")
    forced = _forced(log.config)
    if equivalent and forced:
        notes.append(f"{FORCED} true: benchmark-only, its losses are not compared")
    rng = np.random.Generator(np.random.PCG64(stream))
    mean_ci, medians = bootstrap.draw(values, rng, resamples)  # the step times' draws first
    tflops = _positive(rows, "tflops")
    tflops_ci, tflops_medians = bootstrap.draw(tflops, rng, resamples)
    stepped = metric == "step time"
    side = AcceptanceSide(
        label=label, path=log.path, format=log.format, rank=log.rank, window=lw, metric=metric,  # type: ignore[arg-type]
        median_step_s=float(np.median(values)) if stepped else None,
        mean_step_s=float(np.mean(values)) if stepped else None,
        ci95_mean_step_s=mean_ci if stepped else None,
        median_tflops=_median_of(tflops),
        median_tokens_per_s=_median_of(_positive(rows, "tokens_per_s")),
        loss_finite=_finite(rows), skipped_iterations=_sum(rows, "skipped"),
        nan_iterations=_sum(rows, "nan"), peak_memory_bytes=_peak(log),
        config=tuple(sorted(log.config.items())), notes=tuple(notes),
        samples=samples.select([pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()]),
        mean_tflops=float(np.mean(tflops)) if len(tflops) else None, ci95_mean_tflops=tflops_ci,
        benchmark_only=forced,
    )  # fmt: skip
    return _Measured(side, rows, values, medians, tflops, tflops_medians)


def _has(sampled: pl.DataFrame, log: TrainingLog) -> str:
    """The iterations a log's samples span, in words."""
    if sampled.height == 0:
        return "no samples"
    its = sampled.get_column("iteration")
    every = f", one every {log.log_interval}" if log.log_interval > 1 else ""
    return f"iterations {its.min()}–{its.max()} ({sampled.height} samples{every})"


def _grade(steps: int, run: int | None) -> Grade:
    if steps < SCREEN_MIN_STEPS:
        return "too few"
    return "acceptance" if run is not None and run >= ACCEPT_MIN_RUN else "screening"


def _describe(log: TrainingLog, first: int, last: int, declared: tuple[int, int] | None,
              samples: int, steps: int, why: str, how: str, grade: Grade,
              run: int, run_first: int = 1) -> str:  # fmt: skip
    """The window in one sentence: which iterations, why, how many steps in how many samples
    (and what a sample is), and the grade the seeds' rule gives it (and where a resumed run
    began: its length is what the rule grades)."""
    if declared is None:
        where = f"iterations {first}–{last}"
    elif (first, last) == declared:
        where = f"iterations {first}–{last} (declared)"
    else:
        where = f"iterations {first}–{last} (declared {declared[0]}–{declared[1]})"
    count = f"{steps} {noun(steps, 'step')} in {samples} {noun(samples, 'sample')}"
    k = log.log_interval
    if k > 1 and log.sampling == "point":
        count += (f", one iteration every {k} (point samples; the window spans "
                  f"{last - first + 1} iterations)")  # fmt: skip
    elif k > 1:
        count += f" of {k} iterations (each a mean)"
    if why == "warm-up detected":
        count += f", {how}"
    elif why == "whole log":
        where += f" ({how})"
    resumed = f"resumed at iteration {run_first}" if run_first > 1 else ""
    if grade == "acceptance":
        rule = f"acceptance: {steps} steps of a {run}-iteration run" + (
            f" {resumed}" if resumed else "")
    elif grade == "screening":
        reach = (f"the run covers {run} iterations, {resumed}" if resumed
                 else f"the run reached {run} iterations")  # fmt: skip
        rule = f"screening: {steps} steps ({reach}; acceptance needs {ACCEPT_MIN_RUN})"
    else:
        rule = f"too few: {steps} {noun(steps, 'step')} (screening needs {SCREEN_MIN_STEPS}"
        rule += f"; the run {resumed})" if resumed else ")"
    return f"{where}: {count}; {rule}"


def _positive(rows: pl.DataFrame, column: str) -> np.ndarray:
    """The column's finite positive values, in order (a 0 or negative rate measures nothing)."""
    values = rows.get_column(column).drop_nulls().to_numpy().astype(np.float64)
    return values[np.isfinite(values) & (values > 0)]


def _median_of(values: np.ndarray) -> float | None:
    return float(np.median(values)) if len(values) else None


def _sum(rows: pl.DataFrame, column: str) -> int | None:
    """The column's exact sum (Python integers: an int64 sum of huge counts would wrap)."""
    values = rows.get_column(column).drop_nulls()
    return sum(values.to_list()) if values.len() else None


def _finite(rows: pl.DataFrame) -> bool | None:
    losses = rows.get_column("loss").drop_nulls().to_numpy()
    return bool(np.isfinite(losses).all()) if len(losses) else None


def _peak(log: TrainingLog) -> int | None:
    if log.peak_memory_bytes is not None:
        return int(log.peak_memory_bytes)
    peak = log.table.get_column("mem_max_allocated_bytes").max()
    return None if peak is None else int(peak)  # type: ignore[arg-type]


def _forced(config: dict[str, str]) -> bool:
    value = config.get(FORCED)
    return value is not None and (value.strip() == "" or is_true(value))


def _change(measured: list[_Measured], base: int, to: int, equivalent: bool,
            tolerance: float) -> Change:  # fmt: skip
    """Side ``to`` against side ``base``: the medians' relative change with its bootstrap CI
    (each side resampled independently: its own stream of the seed), the verdict and, for a
    declared-equivalent change, the largest per-iteration loss difference."""
    b, t = measured[base], measured[to]
    pct = _relative(t.values, b.values)
    ci = _relative_ci(t.medians, b.medians)
    tflops_pct = _relative(t.tflops, b.tflops)
    tflops_ci = _relative_ci(t.tflops_medians, b.tflops_medians)
    grades = (b.side.window.grade, t.side.window.grade)
    diff = diff_pct = None
    flagged = False
    if equivalent and not (b.side.benchmark_only or t.side.benchmark_only):
        diff, diff_pct, flagged = _loss_diff(b.rows, t.rows, tolerance)
    return Change(base, to, pct, ci, tflops_pct, _verdict(pct, ci, grades), diff, flagged,
                  tflops_ci, diff_pct)  # fmt: skip


def _relative(to: np.ndarray, base: np.ndarray) -> float | None:
    """The medians' relative change in %; None without samples or with a base median of 0."""
    if not len(to) or not len(base) or not (b := float(np.median(base))):
        return None
    pct = 100.0 * (float(np.median(to)) / b - 1)
    return pct if np.isfinite(pct) else None


def _relative_ci(to: np.ndarray, base: np.ndarray) -> tuple[float, float] | None:
    """The 95 % CI of the bootstrap medians' relative change in %; None without draws or where a
    base draw is 0."""
    if not len(to) or not len(base) or not base.all():
        return None
    with np.errstate(all="ignore"):  # an overflowing ratio has no interval: None, unsaid
        low, high = bootstrap.percentiles(100.0 * (to / base - 1))
    return (low, high) if np.isfinite(low) and np.isfinite(high) else None


def _verdict(pct: float | None, ci: tuple[float, float] | None,
             grades: tuple[Grade, Grade]) -> ChangeVerdict:  # fmt: skip
    """Accepted (or screened) only where the whole CI lies beyond the run-to-run floor."""
    if "too few" in grades or pct is None or ci is None:
        return "too few steps"
    if not (ci[1] < -MIN_CHANGE_PCT or ci[0] > MIN_CHANGE_PCT):
        return "no measurable change"
    better = ci[1] < 0
    if grades == ("acceptance", "acceptance"):
        return "accepted improvement" if better else "accepted regression"
    return "screened improvement" if better else "screened regression"


def _loss_diff(base: pl.DataFrame, to: pl.DataFrame,
               tolerance: float) -> tuple[float | None, float | None, bool]:  # fmt: skip
    """Over the iterations both windows hold with finite losses: the largest |loss_to −
    loss_base|, the largest |loss_to − loss_base| / |loss_base| in % (None where every base
    loss is 0), and whether any exceeds ``tolerance`` × |loss_base| at its iteration."""
    both = (
        base.select("iteration", pl.col("loss").alias("b"))
        .join(to.select("iteration", pl.col("loss").alias("t")), on="iteration")
        .drop_nulls()
    )  # fmt: skip
    lb, lt = both.get_column("b").to_numpy(), both.get_column("t").to_numpy()
    keep = np.isfinite(lb) & np.isfinite(lt)
    if not keep.any():
        return None, None, False
    diff, scale = np.abs(lt[keep] - lb[keep]), np.abs(lb[keep])
    nonzero = scale > 0
    pct = float(100.0 * (diff[nonzero] / scale[nonzero]).max()) if nonzero.any() else None
    return float(diff.max()), pct, bool((diff > tolerance * scale).any())

