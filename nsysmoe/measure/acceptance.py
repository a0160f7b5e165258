"""The acceptance measure: training logs' steady windows, their statistics and the changes
between them (issue 33).

Each log's window is declared (iterations ``first``–``last``) or found by the traces' warm-up
rule (:func:`nsysmoe.measure.window.warmup_count`) on its step-time samples, and graded by the
seeds' rule (a winner needs a run of 50 iterations; 6 or more post-warm-up steps only screen).
Statistics are over *samples*, each weighing once: a line averaging a log interval of k
iterations is one sample of k iterations, never k steps. Confidence intervals are percentile
bootstraps over samples with a fixed seed (the same logs give the same figures), vectorised and
chunked so memory stays bounded on long logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from nsysmoe.measure.validity import is_true
from nsysmoe.measure.window import Warmup, warmup_count

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
#: elements of one resample chunk (indices and values): bounds the bootstrap's memory
CHUNK = 1 << 20
FORCED = "--moe-router-force-load-balancing"


@dataclass(frozen=True)
class _Measured:
    """One log's window rows (all rows inside it), its metric samples and their bootstrap
    medians (empty with fewer than 2 samples), drawn once for every change the side is in."""

    side: AcceptanceSide
    rows: pl.DataFrame
    values: np.ndarray
    medians: np.ndarray


def accept(logs: Sequence[TrainingLog], labels: Sequence[str], *,
           window: tuple[int, int] | None = None, equivalent: bool = False,
           loss_tolerance: float = LOSS_TOLERANCE, resamples: int = RESAMPLES,
           seed: int = SEED) -> Acceptance:  # fmt: skip
    """The logs measured on their steady windows: one side each, and for two or more each
    side's change against the one before and against the first (``window``: iterations
    declared for every log; ``equivalent``: the change is declared training-equivalent, so
    per-iteration losses are compared within ``loss_tolerance``, relative).

    Per side: the plain median and mean over the window's samples (each sample weighs once,
    whatever iterations it covers) and the mean's 95 % CI; per change: the relative change of
    the medians in % and its 95 % CI, both sides' samples resampled independently."""
    if not logs:
        raise NsysmoeError("no training logs given; pass one log per configuration")
    if len(labels) != len(logs):
        raise NsysmoeError(f"{len(labels)} labels for {len(logs)} logs; give one label per log")
    metrics = [_metric(log) for log in logs]
    for log, metric in zip(logs[1:], metrics[1:], strict=True):
        if metric != metrics[0]:
            raise NsysmoeError(
                f"{log.path}: logs {_what(metric)} while {logs[0].path} logs {_what(metrics[0])}; "
                "compare logs that record the same metric"
            )
    streams = np.random.SeedSequence(seed).spawn(len(logs))
    common = None if window is not None else _common(logs, metrics)
    measured = [_side(log, label, metric, window, resamples, stream, equivalent, common)
                for log, label, metric, stream in zip(logs, labels, metrics, streams,
                                                      strict=True)]  # fmt: skip
    pairs = [(j, j + 1) for j in range(len(logs) - 1)]
    changes = tuple(_change(measured, b, t, equivalent, loss_tolerance) for b, t in pairs)
    vs_base = tuple(changes[0] if t == 1 else _change(measured, 0, t, equivalent, loss_tolerance)
                    for _, t in pairs)  # fmt: skip
    return Acceptance(tuple(m.side for m in measured), changes, vs_base, equivalent,
                      loss_tolerance, seed, resamples)  # fmt: skip


def _metric(log: TrainingLog) -> str:
    """"step time" where the log has step times, else "time per token" (1 / tokens/s)."""
    table = log.table
    if table.get_column("step_s").drop_nulls().len():
        return "step time"
    if table.get_column("tokens_per_s").drop_nulls().len():
        return "time per token"
    raise NsysmoeError(f"{log.path}: no step time or tokens/s in any of its {table.height} "
                       "samples; pass a log that records the iteration time")  # fmt: skip


def _what(metric: str) -> str:
    return "step times" if metric == "step time" else "only tokens/s"


def _values(frame: pl.DataFrame, metric: str) -> pl.Series:
    if metric == "step time":
        return frame.get_column("step_s")
    return 1.0 / frame.get_column("tokens_per_s")


def _inside(frame: pl.DataFrame, first: int, last: int) -> pl.DataFrame:
    """The rows whose every covered iteration lies in [first, last]."""
    start = pl.col("iteration") - pl.col("iterations").fill_null(1) + 1
    return frame.filter((start >= first) & (pl.col("iteration") <= last))


def _steady(log: TrainingLog, metric: str) -> tuple[pl.DataFrame, pl.DataFrame, Warmup]:
    """A log's samples with a finite metric, those after its detected warm-up, and the rule's
    decision."""
    sampled = log.table.filter(_values(log.table, metric).is_finite())
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
          common: tuple[int, int] | None = None) -> _Measured:  # fmt: skip
    table = log.table
    sampled = table.filter(_values(table, metric).is_finite())
    notes = list(log.notes)
    if bad := _values(table, metric).drop_nulls().len() - sampled.height:
        notes.append(f"{bad} {_plural(bad, 'sample')} with a non-finite {metric} left out")
    run = table.get_column("iteration").max()
    run_iterations = None if run is None else int(run)  # type: ignore[arg-type]
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
        if warm.median_ns is None or warm.tolerance is None:
            why, how = "whole log", "whole log: fewer than 3 samples, no warm-up detected"
        else:
            why = "warm-up detected"
            median = (f"{warm.median_ns * 1e3:,.3f} ms" if metric == "step time"
                      else f"{1 / warm.median_ns:,.0f} tokens/s")  # fmt: skip
            how = (f"{skipped} {_plural(skipped, 'sample')} skipped as warm-up (until within "
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
                            grade, run_iterations)  # fmt: skip
    lw = LogWindow(first, last, steps, samples.height, log.log_interval, why,  # type: ignore[arg-type]
                   skipped, run_iterations, grade, description)  # fmt: skip
    values = _values(samples, metric).to_numpy().astype(np.float64)
    if metric == "time per token":
        notes.append("only tokens/s logged: step-time figures are time per token (1 / tokens/s), "
                     "the step time itself is not known")  # fmt: skip
    if len(values) < 2:
        notes.append(f"{len(values)} sample in the window: no confidence interval")
    if equivalent and _forced(log.config):
        notes.append(f"{FORCED} true: benchmark-only, its losses are not compared")
    mean_ci, medians = None, np.empty(0)
    if len(values) >= 2:
        means, medians = _bootstrap(values, np.random.Generator(np.random.PCG64(stream)),
                                    resamples)  # fmt: skip
        mean_ci = _percentiles(means)
    stepped = metric == "step time"
    side = AcceptanceSide(
        label=label, path=log.path, format=log.format, rank=log.rank, window=lw, metric=metric,  # type: ignore[arg-type]
        median_step_s=float(np.median(values)) if stepped else None,
        mean_step_s=float(np.mean(values)) if stepped else None,
        ci95_mean_step_s=mean_ci if stepped else None,
        median_tflops=_median(rows, "tflops"), median_tokens_per_s=_median(rows, "tokens_per_s"),
        loss_finite=_finite(rows), skipped_iterations=_sum(rows, "skipped"),
        nan_iterations=_sum(rows, "nan"), peak_memory_bytes=_peak(log),
        config=tuple(sorted(log.config.items())), notes=tuple(notes),
        samples=samples.select([pl.col(c).cast(t) for c, t in SAMPLE_SCHEMA.items()]),
    )  # fmt: skip
    return _Measured(side, rows, values, medians)


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


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _describe(log: TrainingLog, first: int, last: int, declared: tuple[int, int] | None,
              samples: int, steps: int, why: str, how: str, grade: Grade,
              run: int | None) -> str:  # fmt: skip
    """The window in one sentence: which iterations, why, how many steps in how many samples
    (and what a sample is), and the grade the seeds' rule gives it."""
    if declared is None:
        where = f"iterations {first}–{last}"
    elif (first, last) == declared:
        where = f"iterations {first}–{last} (declared)"
    else:
        where = f"iterations {first}–{last} (declared {declared[0]}–{declared[1]})"
    count = f"{steps} {_plural(steps, 'step')} in {samples} {_plural(samples, 'sample')}"
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
    if grade == "acceptance":
        rule = f"acceptance: {steps} steps of a {run}-iteration run"
    elif grade == "screening":
        rule = (f"screening: {steps} steps (the run reached {run} iterations; acceptance "
                f"needs {ACCEPT_MIN_RUN})")  # fmt: skip
    else:
        rule = f"too few: {steps} {_plural(steps, 'step')} (screening needs {SCREEN_MIN_STEPS})"
    return f"{where}: {count}; {rule}"


def _median(rows: pl.DataFrame, column: str) -> float | None:
    values = rows.get_column(column).drop_nulls().drop_nans()
    return float(values.median()) if values.len() else None  # type: ignore[arg-type]


def _sum(rows: pl.DataFrame, column: str) -> int | None:
    values = rows.get_column(column).drop_nulls()
    return int(values.sum()) if values.len() else None


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


def _bootstrap(values: np.ndarray, rng: np.random.Generator,
               resamples: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The means and medians of ``resamples`` resamples (with replacement) of ``values``, both
    from the same draws, made in chunks of at most :data:`CHUNK` elements."""
    n = len(values)
    rows = max(1, CHUNK // n)
    means = np.empty(resamples, dtype=np.float64)
    medians = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows):
        m = min(rows, resamples - start)
        drawn = values[rng.integers(0, n, size=(m, n))]
        means[start : start + m] = drawn.mean(axis=1)
        medians[start : start + m] = row_medians(drawn)
    return means, medians


def row_medians(drawn: np.ndarray) -> np.ndarray:
    """Each row's median (the middle value, or the mean of the middle two), by a partial sort:
    half the time of ``np.median`` on the bootstrap's wide rows."""
    n = drawn.shape[1]
    k = n // 2
    if n % 2:
        return np.partition(drawn, k, axis=1)[:, k]
    middle = np.partition(drawn, (k - 1, k), axis=1)
    return (middle[:, k - 1] + middle[:, k]) / 2


def _percentiles(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def _change(measured: list[_Measured], base: int, to: int, equivalent: bool,
            tolerance: float) -> Change:  # fmt: skip
    """Side ``to`` against side ``base``: the medians' relative change with its bootstrap CI
    (each side resampled independently: its own stream of the seed), the verdict and, for a
    declared-equivalent change, the largest per-iteration loss difference."""
    b, t = measured[base], measured[to]
    pct = ci = None
    if len(b.values) and len(t.values):
        pct = 100.0 * (float(np.median(t.values)) / float(np.median(b.values)) - 1)
    if len(b.medians) and len(t.medians):
        ci = _percentiles(100.0 * (t.medians / b.medians - 1))
    tb, tt = b.side.median_tflops, t.side.median_tflops
    tflops_pct = 100.0 * (tt / tb - 1) if tb and tt is not None else None
    grades = (b.side.window.grade, t.side.window.grade)
    diff, flagged = None, False
    if equivalent and not (_forced(dict(b.side.config)) or _forced(dict(t.side.config))):
        diff, flagged = _loss_diff(b.rows, t.rows, tolerance)
    return Change(base, to, pct, ci, tflops_pct, _verdict(pct, ci, grades), diff, flagged)


def _verdict(pct: float | None, ci: tuple[float, float] | None,
             grades: tuple[Grade, Grade]) -> ChangeVerdict:  # fmt: skip
    if "too few" in grades or pct is None or ci is None:
        return "too few steps"
    if ci[0] <= 0 <= ci[1] or abs(pct) <= MIN_CHANGE_PCT:
        return "no measurable change"
    better = ci[1] < 0
    if grades == ("acceptance", "acceptance"):
        return "accepted improvement" if better else "accepted regression"
    return "screened improvement" if better else "screened regression"


def _loss_diff(base: pl.DataFrame, to: pl.DataFrame,
               tolerance: float) -> tuple[float | None, bool]:  # fmt: skip
    """The largest |loss_to − loss_base| over the iterations both windows hold with finite
    losses, and whether any exceeds ``tolerance`` × |loss_base| at its iteration."""
    both = (
        base.select("iteration", pl.col("loss").alias("b"))
        .join(to.select("iteration", pl.col("loss").alias("t")), on="iteration")
        .drop_nulls()
    )  # fmt: skip
    lb, lt = both.get_column("b").to_numpy(), both.get_column("t").to_numpy()
    keep = np.isfinite(lb) & np.isfinite(lt)
    if not keep.any():
        return None, False
    diff = np.abs(lt[keep] - lb[keep])
    return float(diff.max()), bool((diff > tolerance * np.abs(lb[keep])).any())

