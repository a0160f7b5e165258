"""The acceptance side of an A/B, as result types: what the *unprofiled* training logs say.

The seeds' workflow accepts a change on unprofiled steady iterations and explains it with a
matched profile. :class:`Acceptance` holds one log per side (one log: its summary; two: an A/B;
more: a ladder of changes, each rung against the one before and against the base), measured by
:mod:`nsysmoe.measure.acceptance`; :class:`ProfileLink` says how an A/B's profile relates to it
(profiling overhead, how much of the accepted change the profile explains, made by
:mod:`nsysmoe.ab.evidence`); :class:`AcceptedComparison` is the A/B of two traces with its
acceptance, the evidence bundle every report opens with. Frozen data with ``to_dict()`` (the
JSON ``acceptance`` block, schema ``nsysmoe.acceptance``) and ``to_polars()``; no rendering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from nsysmoe.results import Comparison

#: the ``acceptance`` block's own schema name and version (its JSON Schema:
#: nsysmoe/schemas/acceptance.schema.json); fields are only added within a version
ACCEPTANCE_SCHEMA = ("nsysmoe.acceptance", 1)

#: the seeds' rule: a winner is accepted on a run of at least this many iterations ...
ACCEPT_MIN_RUN = 50
#: ... and a window of fewer post-warm-up iterations than this is not even a screen
SCREEN_MIN_STEPS = 6
#: The run-to-run floor, in %: the bootstrap resamples one run's iterations, so its CI cannot
#: show run-to-run variation (another node, its thermal state, another data order), by which
#: two runs of one configuration differ by about a percent. A verdict accepts a change only
#: where the whole 95 % CI of the median step change lies beyond it (high < -1 % or low > +1 %);
#: a change whose CI excludes 0 but reaches within the floor is no measurable change
#: (Megatron-LM CI's dp-last-cp2 pair: -0.7 %, its CI -1.05 … -0.35 %). The profile A/B's
#: verdicts use the same 1 % at least (nsysmoe.ab.verdict.MIN_NOISE).
MIN_CHANGE_PCT = 1.0

#: "acceptance": the run reached ACCEPT_MIN_RUN iterations; "screening": a shorter run (its
#: verdicts screen candidates, they accept nothing); "too few": under SCREEN_MIN_STEPS steps
Grade = Literal["acceptance", "screening", "too few"]
WindowWhy = Literal["declared", "warm-up detected", "whole log"]
#: "accepted improvement" / "accepted regression" only where the whole CI of the change lies
#: beyond ±MIN_CHANGE_PCT on runs graded "acceptance"; "screened ..." on shorter runs;
#: otherwise no measurable change
ChangeVerdict = Literal["accepted improvement", "accepted regression", "screened improvement",
                        "screened regression", "no measurable change", "too few steps"]  # fmt: skip

#: The window's samples as :meth:`Acceptance.to_polars` and the per-side ``samples`` hold them.
SAMPLE_SCHEMA = {
    "iteration": pl.Int64,  # the last iteration the sample covers
    "iterations": pl.Int64,  # how many iterations it covers (its log interval)
    "step_s": pl.Float64,  # seconds per iteration (the sample's mean); null: not logged
    "tflops": pl.Float64,  # model TFLOP/s per GPU
    "tokens_per_s": pl.Float64,  # tokens/s per GPU
    "loss": pl.Float64,  # lm loss
}


@dataclass(frozen=True)
class LogWindow:
    """Which samples of a log were measured, and why: ``first``/``last`` iteration covered,
    ``steps`` (iterations the samples cover, a sample of a k-iteration log interval counting
    k), ``samples``, ``log_interval`` (iterations between samples), ``warmup_samples`` (samples left
    out before it as warm-up), ``run_iterations`` (the iterations the log's run covers, from its
    first logged sample's first iteration to its last: a run resumed at iteration 1001 that
    logged 10 lines is a 10-iteration run),
    ``grade`` and a ``description`` every report shows as it is."""

    first: int | None
    last: int | None
    steps: int
    samples: int
    log_interval: int
    why: WindowWhy
    warmup_samples: int
    run_iterations: int | None
    grade: Grade
    description: str

    def to_dict(self) -> dict[str, object]:
        return {"first": self.first, "last": self.last, "steps": self.steps,
                "samples": self.samples, "log_interval": self.log_interval, "why": self.why,
                "warmup_samples": self.warmup_samples, "run_iterations": self.run_iterations,
                "grade": self.grade, "description": self.description}  # fmt: skip


@dataclass(frozen=True)
class AcceptanceSide:
    """One log's steady window: step time (median, mean and the mean's bootstrap 95 % CI, in
    seconds), model TFLOP/s per GPU (median, mean and the mean's 95 % CI), health, and where
    the numbers came from (``rank``: whose lines were used where several ranks logged;
    ``notes``: what the reader skipped, counted).
    ``metric`` says what the step-time figures are: "step time" as logged, or "time per token"
    (1 / tokens per second, where only throughput is logged: proportional to step time at a
    fixed batch; ``median_step_s`` is then null and changes are still step-time changes)."""

    label: str
    path: str
    format: str
    rank: str | None
    window: LogWindow
    metric: Literal["step time", "time per token"]
    median_step_s: float | None
    mean_step_s: float | None
    ci95_mean_step_s: tuple[float, float] | None
    median_tflops: float | None
    median_tokens_per_s: float | None
    loss_finite: bool | None  # None: no loss logged in the window
    skipped_iterations: int | None  # None: not logged
    nan_iterations: int | None
    peak_memory_bytes: int | None  # max allocated, the largest the log reports
    config: tuple[tuple[str, str], ...]  # the training arguments the log recorded, sorted
    notes: tuple[str, ...]
    samples: pl.DataFrame  # the window's samples (SAMPLE_SCHEMA)
    mean_tflops: float | None = None  # None: no TFLOP/s logged in the window
    ci95_mean_tflops: tuple[float, float] | None = None  # None: fewer than 2 TFLOP/s samples
    #: run with forced load balancing (--moe-router-force-load-balancing): benchmark-only
    benchmark_only: bool = False

    def to_dict(self) -> dict[str, object]:
        ci, tci = self.ci95_mean_step_s, self.ci95_mean_tflops
        return {"label": self.label, "path": self.path, "format": self.format,
                "rank": self.rank, "window": self.window.to_dict(), "metric": self.metric,
                "median_step_s": self.median_step_s, "mean_step_s": self.mean_step_s,
                "ci95_mean_step_s": None if ci is None else list(ci),
                "median_tflops": self.median_tflops, "mean_tflops": self.mean_tflops,
                "ci95_mean_tflops": None if tci is None else list(tci),
                "median_tokens_per_s": self.median_tokens_per_s,
                "loss_finite": self.loss_finite, "skipped_iterations": self.skipped_iterations,
                "nan_iterations": self.nan_iterations,
                "peak_memory_bytes": self.peak_memory_bytes,
                "benchmark_only": self.benchmark_only,
                "config": dict(self.config), "notes": list(self.notes)}  # fmt: skip


@dataclass(frozen=True)
class Change:
    """Side ``to`` against side ``base`` (indices into :attr:`Acceptance.sides`): the relative
    difference of the median step times in % with its bootstrap 95 % CI, the median TFLOP/s
    change with its CI, the verdict, and — for a change declared training-equivalent — the
    largest per-iteration loss difference over the iterations both windows hold, flagged above
    the tolerance."""

    base: int
    to: int
    median_step_pct: float | None
    ci95_median_step_pct: tuple[float, float] | None
    median_tflops_pct: float | None
    verdict: ChangeVerdict
    max_loss_diff: float | None = None  # None: not declared equivalent, or no common loss
    loss_flagged: bool = False
    ci95_median_tflops_pct: tuple[float, float] | None = None
    #: the largest per-iteration loss difference relative to the base's loss there, in %
    max_loss_diff_pct: float | None = None

    @property
    def sentence(self) -> str:
        """The verdict with its figure: "accepted improvement: −15.1 % step time (95 % CI
        −15.9 … −14.3 %)", "no measurable change (±0.8 %)" where the CI includes 0, or "no
        measurable change (−1.2 %; its 95 % CI does not clear the 1 % run-to-run floor)"."""
        pct, ci = self.median_step_pct, self.ci95_median_step_pct
        if pct is None or ci is None:
            return self.verdict
        if self.verdict == "no measurable change" and ci[0] <= 0 <= ci[1]:
            return f"no measurable change (±{max(abs(ci[0]), abs(ci[1])):.1f} %)"
        if self.verdict == "no measurable change":  # the CI excludes 0, not the floor
            return (f"no measurable change ({pct:+.1f} %; its 95 % CI does not clear the "
                    f"{MIN_CHANGE_PCT:g} % run-to-run floor)")  # fmt: skip
        return (f"{self.verdict}: {pct:+.1f} % step time (95 % CI {ci[0]:+.1f} … "
                f"{ci[1]:+.1f} %)")  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        ci, tci = self.ci95_median_step_pct, self.ci95_median_tflops_pct
        return {"base": self.base, "to": self.to, "median_step_pct": self.median_step_pct,
                "ci95_median_step_pct": None if ci is None else list(ci),
                "median_tflops_pct": self.median_tflops_pct,
                "ci95_median_tflops_pct": None if tci is None else list(tci),
                "verdict": self.verdict,
                "sentence": self.sentence, "max_loss_diff": self.max_loss_diff,
                "max_loss_diff_pct": self.max_loss_diff_pct,
                "loss_flagged": self.loss_flagged}  # fmt: skip


@dataclass(frozen=True)
class Acceptance:
    """Logs measured on their steady windows: one side per log, and for two or more sides each
    rung's change against the one before (``changes[j]``: side j+1 vs side j) and against the
    base (``vs_base[j]``: side j+1 vs side 0). ``equivalent``: the change was declared
    training-equivalent (losses compared within ``loss_tolerance``, relative)."""

    sides: tuple[AcceptanceSide, ...]
    changes: tuple[Change, ...]
    vs_base: tuple[Change, ...]
    equivalent: bool
    loss_tolerance: float
    seed: int  # the bootstrap's fixed seed: the same logs give the same CIs
    resamples: int

    @property
    def headline(self) -> Change | None:
        """The change a report leads with: the last rung against the one before."""
        return self.changes[-1] if self.changes else None

    def to_polars(self) -> pl.DataFrame:
        """One row per side: label, window, steps, samples, medians, means, CIs, health."""
        rows = []
        for s in self.sides:
            ci = s.ci95_mean_step_s or (None, None)
            tci = s.ci95_mean_tflops or (None, None)
            rows.append({"label": s.label, "first": s.window.first, "last": s.window.last,
                         "steps": s.window.steps, "samples": s.window.samples,
                         "grade": s.window.grade, "median_step_s": s.median_step_s,
                         "mean_step_s": s.mean_step_s, "ci95_low_s": ci[0],
                         "ci95_high_s": ci[1], "median_tflops": s.median_tflops,
                         "mean_tflops": s.mean_tflops, "ci95_low_tflops": tci[0],
                         "ci95_high_tflops": tci[1],
                         "loss_finite": s.loss_finite,
                         "skipped_iterations": s.skipped_iterations,
                         "nan_iterations": s.nan_iterations,
                         "peak_memory_bytes": s.peak_memory_bytes})  # fmt: skip
        return pl.DataFrame(rows, infer_schema_length=None)

    def changes_polars(self) -> pl.DataFrame:
        """One row per change (each rung against the one before, then against the base)."""
        rows = []
        for kind, changes in (("previous", self.changes), ("base", self.vs_base)):
            for c in changes:
                ci = c.ci95_median_step_pct or (None, None)
                tci = c.ci95_median_tflops_pct or (None, None)
                rows.append({"against": kind, "base": self.sides[c.base].label,
                             "to": self.sides[c.to].label, "median_step_pct": c.median_step_pct,
                             "ci95_low_pct": ci[0], "ci95_high_pct": ci[1],
                             "median_tflops_pct": c.median_tflops_pct,
                             "ci95_tflops_low_pct": tci[0], "ci95_tflops_high_pct": tci[1],
                             "verdict": c.verdict,
                             "max_loss_diff": c.max_loss_diff})  # fmt: skip
        return pl.DataFrame(rows, infer_schema_length=None)

    def to_dict(self) -> dict[str, object]:
        schema, version = ACCEPTANCE_SCHEMA
        changes = [c.to_dict() | {"vs_base": b.to_dict()}
                   for c, b in zip(self.changes, self.vs_base, strict=True)]  # fmt: skip
        return {"schema": schema, "version": version,
                "rule": {"accept_min_run": ACCEPT_MIN_RUN, "screen_min_steps": SCREEN_MIN_STEPS,
                         "min_change_pct": MIN_CHANGE_PCT,
                         "bootstrap": {"resamples": self.resamples, "seed": self.seed}},
                "equivalent": self.equivalent, "loss_tolerance": self.loss_tolerance,
                "sides": [s.to_dict() for s in self.sides], "changes": changes}  # fmt: skip


@dataclass(frozen=True)
class ProfileLink:
    """How a matched profile relates to the accepted change of an A/B.

    ``overhead_pct``: per side, the profiled steady step over the unprofiled median, − 1, in %;
    ``overhead_warning`` when the two differ by more than 5 points (the profile slowed one side
    more: its A/B is skewed) or a profile is more than 5 % faster than its log (a profiler
    slows a run: the log is likely of another run). ``predicted_pct``: the step change the
    profile's mechanism accounts for — exposed communication plus compute inflation, per
    iteration, relative to the profiled off step; ``explains_pct``: that as a share of the
    accepted (or, on a shorter run, screened) change (None where the signs differ or the change
    is not measurable); ``sentence`` says which. ``overhead_gap_pp``: the two overheads apart,
    in points; ``profiled_step_pct``: the profile's own median step change, relative to its off
    step."""

    overhead_pct: tuple[float | None, float | None]
    overhead_warning: str | None
    predicted_pct: float | None
    explains_pct: float | None
    sentence: str
    overhead_gap_pp: float | None = None
    profiled_step_pct: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"overhead_pct": list(self.overhead_pct), "overhead_gap_pp": self.overhead_gap_pp,
                "overhead_warning": self.overhead_warning, "predicted_pct": self.predicted_pct,
                "profiled_step_pct": self.profiled_step_pct, "explains_pct": self.explains_pct,
                "sentence": self.sentence}  # fmt: skip


@dataclass(frozen=True)
class AcceptedComparison:
    """An A/B of two traces with the unprofiled logs of the same two configurations: the
    evidence bundle (acceptance first, then the profile that explains it)."""

    comparison: Comparison
    acceptance: Acceptance
    link: ProfileLink

    def to_polars(self) -> pl.DataFrame:
        return self.comparison.to_polars()

    def to_dict(self) -> dict[str, object]:
        return self.comparison.to_dict() | {
            "acceptance": self.acceptance.to_dict() | {"profile": self.link.to_dict()}}
