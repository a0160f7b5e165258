"""Which part of a trace is measured, chosen once: the steady iterations (warm-up detected by one
rule), iterations asked for, a time window, or the whole trace.

The choice is one record, :class:`~nsysmoe.model.WindowChoice` — kind, windows, iterations kept
and skipped, why, what the capture cut short, and a sentence saying all of it — which the
analysis, its JSON and every report carry: reports format its fields and never read the
sentence back. Warm-up is judged here only, by :func:`still_warm`: the detection
(:func:`warmup_count`; :func:`warmup` for a trace's iterations, measure.acceptance for a
training log's samples) and the hint that warm-up may remain in a window (``slow_first``) apply
the same rule, with the same tolerance where the detection decided.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.steps import step_windows
from nsysmoe.model import (
    INT64_MAX,
    Iterations,
    Span,
    Window,
    WindowChoice,
    WindowWhy,
    iterations_phrase,
)
from nsysmoe.results import Steps

#: an iteration is warm-up while its period is more than this much over the steady median
WARMUP_TOLERANCE = 0.10


def still_warm(period: float, median: float, tolerance: float = WARMUP_TOLERANCE) -> bool:
    """The one warm-up rule: a period more than ``tolerance`` over the steady ``median``."""
    return period > (1 + tolerance) * median


@dataclass(frozen=True)
class Warmup:
    """Leading iterations judged warm-up: how many, and the rule's tolerance (a fraction) and
    steady median where it decided (None with fewer than 3 iterations). ``median`` is in the
    periods' unit: nanoseconds for a trace's iterations, seconds (or seconds per token) for a
    training log's samples."""

    skipped: int
    tolerance: float | None = None
    median: float | None = None


def warmup_count(periods: np.ndarray) -> Warmup:
    """How many leading ``periods`` (in order) are warm-up: the first always (setup,
    autotuning, allocator growth), then each next one while it is :func:`still_warm` against
    the median of the second half, the tolerance 10 % or 3 robust SDs of that half, whichever
    is larger. At least 2 are kept; with fewer than 3, none is skipped. One rule for a trace's
    iterations (:func:`warmup`) and a training log's samples (measure.acceptance)."""
    periods = np.asarray(periods, dtype=np.float64)
    n = len(periods)
    if n < 3:
        return Warmup(0)
    steady = periods[n // 2 :]
    median = float(np.median(steady))
    spread = 1.4826 * float(np.median(np.abs(steady - median)))
    tolerance = max(WARMUP_TOLERANCE, 3 * spread / median if median else 0.0)
    k = 1
    while k < n - 2 and still_warm(periods[k], median, tolerance):
        k += 1
    return Warmup(k, tolerance, median)


def warmup(steps: Steps) -> Warmup:
    """How many leading complete iterations are warm-up, by :func:`warmup_count` on their
    periods (each iteration's slowest process's)."""
    numbers = steps.numbers
    if len(numbers) < 3:
        return Warmup(0)
    periods = (
        steps.table.filter(pl.col("step").is_in(numbers))
        .group_by("step").agg(pl.col("step_ns").max()).sort("step")["step_ns"]
        .to_numpy().astype(np.float64)
    )  # fmt: skip
    return warmup_count(periods)


def choose(steps: Steps, span: Span, origin: int = 0) -> WindowChoice:
    """The window ``span`` asks for on a trace with these iterations; ``origin`` (its first GPU
    activity) anchors a relative time window."""
    if isinstance(span, Iterations):
        return _iterations(steps, span, _skip(steps, span), None)
    return _time(steps, span, origin) if isinstance(span, Window) and span.bounded else (
        _whole(steps, "asked"))  # fmt: skip


def choose_common(
    off: Steps, on: Steps, span: Span, origins: tuple[int, int] = (0, 0)
) -> tuple[WindowChoice, WindowChoice]:
    """An A/B's two windows: iterations keep only the numbers both traces have after each one's
    warm-up (each keeps its own where they share none: the contract reports the mismatch)."""
    if not isinstance(span, Iterations):
        return choose(off, span, origins[0]), choose(on, span, origins[1])
    warm = _skip(off, span), _skip(on, span)
    theirs = set(on.numbers[warm[1].skipped :])
    common = tuple(n for n in off.numbers[warm[0].skipped :] if n in theirs) or None
    return _iterations(off, span, warm[0], common), _iterations(on, span, warm[1], common)


def _skip(steps: Steps, span: Iterations) -> Warmup:
    return warmup(steps) if span.skip == "detected" else Warmup(span.skip)


def _whole(steps: Steps, why: WindowWhy) -> WindowChoice:
    if why == "no iterations":
        text = "whole trace (no iteration ranges found; name them with --step-range REGEX)"
        return WindowChoice("whole", why, description=text, timeline=steps.timeline)
    return WindowChoice("whole", why, kept=tuple(steps.numbers), found=len(steps.numbers),
                        timeline=steps.timeline, description="whole trace")  # fmt: skip


def _time(steps: Steps, span: Window, origin: int) -> WindowChoice:
    w = span.anchored(origin)
    if span.relative and span.start_ns is not None and w.start_ns == INT64_MAX:
        raise NsysmoeError(
            f"--window starts {span.start_ns:,} ns after the first GPU activity (at {origin:,} "
            "ns), at or past the end of the trace timeline (2^63-1 ns); use a start within the "
            "trace"
        )
    lo, hi = w.bounds()
    kept = tuple(s for s, sw in step_windows(steps, steps.numbers)
                 if sw.start_ns is not None and sw.start_ns >= lo and (sw.end_ns or 0) <= hi)
    text = "time window" + (f" from the first GPU activity at {origin:,} ns"
                             if span.relative else "")  # fmt: skip
    return WindowChoice("time", "asked", w, w, kept, len(steps.numbers), timeline=steps.timeline,
                        origin_ns=origin if span.relative else None,
                        slow_first=_slow_first(steps, kept, WARMUP_TOLERANCE),
                        description=text)  # fmt: skip


def _iterations(steps: Steps, span: Iterations, warm: Warmup,
                only: Collection[int] | None) -> WindowChoice:  # fmt: skip
    """Skip the warm-up, then keep the numbers in [first, last] and, for an A/B, in ``only``
    (the iterations both traces have); no iterations at all is the whole trace unless they
    were asked for."""
    numbers = steps.numbers
    if not numbers and not span.required:
        return _whole(steps, "no iterations")
    if not numbers:
        raise NsysmoeError(
            f"no complete iteration ranges found (pattern {steps.pattern!r}); "
            "name them with --step-range REGEX or use a time --window"
        )
    first, last = span.first, span.last
    kept = [n for n in numbers[warm.skipped :]
            if (first is None or n >= first) and (last is None or n <= last)
            and (only is None or n in only)]  # fmt: skip
    if not kept:
        asked = (f"; {iterations_phrase(first, last)} asked"
                 if first is not None or last is not None else "")  # fmt: skip
        raise NsysmoeError(
            f"no iterations left in the window (found {numbers[0]}–{numbers[-1]}, "
            f"{warm.skipped} skipped{asked}); adjust --skip or --window"
        )
    chosen = steps.table.filter(pl.col("step").is_in(kept))
    ends = chosen["gpu_start_ns"] + chosen["step_ns"]  # each process's end of its last step
    window = Window(int(chosen["gpu_start_ns"].min()), int(ends.cast(pl.Int64).max()))
    cpu_window = Window(int(chosen["cpu_start_ns"].min()), int(chosen["cpu_end_ns"].max()))
    asked = (first, last) if first is not None or last is not None else None
    why: WindowWhy = ("asked" if asked else "warm-up detected" if span.skip == "detected"
                      else "warm-up given")  # fmt: skip
    choice = WindowChoice(
        "iterations", why, window, cpu_window, tuple(kept), len(numbers), warm.skipped,
        warm.tolerance, warm.median, asked, only is not None, tuple(steps.truncated),
        steps.timeline, slow_first=_slow_first(steps, kept, warm.tolerance or WARMUP_TOLERANCE),
    )  # fmt: skip
    return _described(choice)


def _described(c: WindowChoice) -> WindowChoice:
    """The iterations' sentence: which, how many of how many, why, what was cut, on which
    timeline ("iterations 2–7 (6 of 8 complete iterations; 2 skipped as warm-up: …), on the
    GPU timeline")."""
    if c.asked is not None:
        how = f"{iterations_phrase(*c.asked)} asked"
    elif c.why == "warm-up given":
        how = f"{c.skipped} skipped as warm-up"
    elif c.tolerance is None or c.median_ns is None:
        how = "none skipped as warm-up: fewer than 3 iterations"
    else:
        how = (f"{c.skipped} skipped as warm-up: until the step period is within "
               f"{100 * c.tolerance:.0f} % of the steady median, {c.median_ns / 1e6:,.3f} ms")
    if c.common:
        how += "; only iterations both traces have"
    cut = ""
    if c.truncated:
        cut = f"; iteration {', '.join(map(str, c.truncated))} left out: cut short by the end " \
              "of the capture"  # fmt: skip
    where = "GPU timeline" if c.timeline == "gpu" else "CPU timeline (no CUDA API rows)"
    text = f"{c.which} ({len(c.kept)} of {c.found} complete iterations; {how}{cut}), on the {where}"
    return replace(c, description=text)


def _slow_first(steps: Steps, kept: Collection[int],
                tolerance: float) -> tuple[int, float] | None:  # fmt: skip
    """The first kept iteration and how much slower (%) than the kept ones' median it is, when
    it is :func:`still_warm` against that median by ``tolerance`` — the detection's own where
    it decided, so an iteration it judged steady is not hinted as warm-up (at least 3 kept; the
    step time of an iteration is the median of its processes' periods, as the iteration table
    has it)."""
    if len(kept) < 3:
        return None
    periods = (
        steps.table.filter(pl.col("step").is_in(list(kept)))
        .group_by("step").agg(pl.col("step_ns").median()).sort("step")["step_ns"]
        .cast(pl.Int64)
    )  # fmt: skip
    first, median = int(periods[0]), float(periods.median())  # type: ignore[arg-type]
    if not still_warm(first, median, tolerance):
        return None
    return int(sorted(kept)[0]), 100.0 * (first / median - 1)

