"""Interleaved rounds: every measure and its reference once per round, in a fixed order.

A noisy (shared) machine drifts over minutes; running the two sides of a ratio next to each
other in every round, and taking the ratio of each round's pair, cancels most of that drift.
A measure's statistics are its min and median over the rounds; a ratio's are the min and the
median of the per-round ratios, and its verdict is read on the median.
"""

from __future__ import annotations

import math
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from procs import Run


@dataclass
class Sample:
    seconds: float
    cpu_seconds: float
    rss_bytes: int  # wait4 ru_maxrss: the largest single process
    tree_rss_bytes: int  # polled sum over the process tree (0 when not polled)


@dataclass
class Measure:
    key: str
    label: str
    what: str  # the command, in words
    samples: dict[int, Sample] = field(default_factory=dict)  # round -> sample
    errors: list[str] = field(default_factory=list)

    def values(self, attr: str = "seconds") -> list[float]:
        return [getattr(s, attr) for _, s in sorted(self.samples.items())]

    def min(self) -> float | None:
        return min(self.values()) if self.samples else None

    def median(self, attr: str = "seconds") -> float | None:
        return statistics.median(self.values(attr)) if self.samples else None

    def peak_rss(self) -> int | None:
        return max(s.rss_bytes for s in self.samples.values()) if self.samples else None

    def peak_tree_rss(self) -> int:
        return max((s.tree_rss_bytes for s in self.samples.values()), default=0)


Outcome = Run | str  # a run, or why there is none
#: one step of a round: runs its commands and returns {measure key: outcome}
Step = Callable[[int], dict[str, Outcome]]


@dataclass
class Ratio:
    label: str
    num: str  # measure key
    den: str
    target: str = ""  # as printed ("≤ 2.5"); empty: information only
    limit: float | None = None
    at_least: bool = False
    #: nsysmoe's side of the ratio (``cpu_side``: "num" or "den") as its CPU seconds over this
    #: many cores: the least wall time it could take with every core busy every instant (a
    #: bound, not a measure of its own)
    cpu_over_cores: int | None = None
    cpu_side: Literal["num", "den"] = "num"
    #: what each side's sample gives the ratio: wall seconds, CPU seconds or peak RSS
    attr: Literal["seconds", "cpu_seconds", "rss_bytes"] = "seconds"
    #: each per-round ratio is multiplied by this: den's kernels / num's kernels turns a ratio of
    #: times into a ratio of times per kernel
    scale: float = 1.0
    #: a ratio of differences, (num − num_minus) / (den − den_minus), per round: what one change
    #: saved over what another could save (analyze SQLite − analyze Parquet over the floors')
    num_minus: str | None = None
    den_minus: str | None = None
    values: list[float] = field(default_factory=list)  # one per round with both sides

    def verdict(self) -> str:
        if not self.values:
            return "n/a"
        if self.limit is None:
            return "info"
        med = statistics.median(self.values)
        ok = med >= self.limit if self.at_least else med <= self.limit
        return "PASS" if ok else "FAIL"


def failure(run: Run) -> str:
    tail = run.stderr.strip().splitlines()[-1:] or [""]
    return f"exit {run.rc}: {tail[0][:300]}"


def run_rounds(measures: dict[str, Measure], steps: list[tuple[str, Step]], rounds: int) -> int:
    """Run every step once per round, in order; file each outcome under its measure. Returns
    the rounds begun (the last may be partial: Ctrl-C or SIGTERM stops the rounds, and what was
    measured so far is reported)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    r = 0
    try:
        for r in range(1, rounds + 1):
            run_round(measures, steps, r, rounds)
    except KeyboardInterrupt:
        print(f"interrupted in round {r}: reporting what was measured", file=sys.stderr)
    return r


def run_round(measures: dict[str, Measure], steps: list[tuple[str, Step]], r: int, of: int) -> None:
    for name, step in steps:
        t = time.perf_counter()
        for key, outcome in step(r).items():
            m = measures[key]
            if isinstance(outcome, str):
                m.errors.append(f"round {r}: {outcome}")
                continue
            m.samples[r] = Sample(
                outcome.seconds, outcome.cpu_seconds, outcome.max_rss_bytes, outcome.tree_rss_bytes
            )
        print(
            f"  round {r}/{of} {name}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True
        )


def fill_ratio(ratio: Ratio, measures: dict[str, Measure]) -> Ratio:
    """The per-round ratios of ``ratio`` from the rounds where both sides have a sample."""
    num, den = measures[ratio.num].samples, measures[ratio.den].samples
    cores = ratio.cpu_over_cores

    def value(side: str, sample: Sample) -> float:
        if cores and ratio.cpu_side == side:
            return sample.cpu_seconds / cores
        return float(getattr(sample, ratio.attr))

    rounds = [r for r in sorted(num) if r in den]
    if ratio.num_minus and ratio.den_minus:
        nm, dm = measures[ratio.num_minus].samples, measures[ratio.den_minus].samples
        rounds = [r for r in rounds if r in nm and r in dm]
        ratio.values = [(value("num", num[r]) - value("num", nm[r]))
                        / (value("den", den[r]) - value("den", dm[r])) for r in rounds]  # fmt: skip
        return ratio
    ratio.values = [ratio.scale * value("num", num[r]) / value("den", den[r]) for r in rounds]
    return ratio


def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y on log x: y ∝ x^slope."""
    if len(xs) < 2:
        return None
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sxx if sxx else None
