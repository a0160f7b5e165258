"""``--fail-if``: the flat values of any result that CI can test, and which conditions fail it.

A condition whose value does not exist for this input (no communication, no iterations) fails
too: CI must not pass on a missing number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch

import polars as pl

from nsysmoe.ab.metrics import CHANNEL_METRIC_ROWS, flat_values
from nsysmoe.ab.verdict import Condition, failing, parse_condition
from nsysmoe.acceptance import Acceptance, AcceptanceSide, AcceptedComparison
from nsysmoe.measure.channels import CHANNEL_ORDER
from nsysmoe.measure.overlap import hidden_pct
from nsysmoe.results import (
    Collectives,
    Comparison,
    CriticalPath,
    Graphs,
    RanksAnalysis,
    RanksComparison,
    SmBudget,
    TraceAnalysis,
)
from nsysmoe.sweeps import Sweep


@singledispatch
def values(result: object) -> dict[str, float | None]:
    """The ``--fail-if`` values of ``result`` (one trace, an A/B, many ranks or their A/B)."""
    raise TypeError(f"--fail-if has no values for a {type(result).__name__}")


def _gpu_values(g: pl.DataFrame) -> dict[str, float | None]:
    """All GPUs of the rows together: sums, and the worst GPU's hidden %."""
    comm, span = int(g["comm_ns"].sum()), int(g["span_ns"].sum())
    exposed = int(g["exposed_ns"].sum())
    return {
        "hidden_pct": hidden_pct(int(g["hidden_ns"].sum()), comm),
        "min_gpu_hidden_pct": g["hidden_pct"].min(),
        "exposed_ns": float(exposed),
        "exposed_pct_of_span": 100.0 * exposed / span if span else None,
        "idle_pct_of_span": 100.0 * int(g["idle_ns"].sum()) / span if span else None,
        "comm_gemm_attn_ns": float(g["comm_gemm_attn_ns"].sum()),
        "kernels": float(g["kernels"].sum()),
    }


def _graph_values(g: Graphs, active_ns: int) -> dict[str, float | None]:
    """Whole-graph time nobody can see inside (``--fail-if 'graph_unknown_pct>0'`` refuses a
    run whose communication may hide in graphs)."""
    return {
        "graph_unknown_ns": float(g.unknown_ns),
        "graph_unknown_pct": 100.0 * g.unknown_ns / active_ns if active_ns else None,
    }


#: per-channel ``--fail-if`` values: ``ep.combine.hidden_pct<50``
CHANNEL_VALUES = ("hidden_pct", "comm_ns", "hidden_ns", "exposed_ns", "exposed_only_ns",
                  "comm_gemm_attn_ns")  # fmt: skip


def _channel_values(totals: pl.DataFrame) -> dict[str, float | None]:
    """``CHANNEL.METRIC`` for every channel of the vocabulary (None where the trace has none of
    it, so a condition on it fails instead of passing) and every channel present."""
    out: dict[str, float | None] = {f"{ch}.{m}": None for ch in CHANNEL_ORDER
                                    for m in CHANNEL_VALUES}  # fmt: skip
    for r in totals.iter_rows(named=True):
        out |= {f"{r['channel']}.{m}": None if r[m] is None else float(r[m])
                for m in CHANNEL_VALUES}  # fmt: skip
    return out


#: per-rank collective totals (each rank's union over its channels) whose worst rank
#: ``--fail-if`` tests: ``max_rank_exposed_wait_ns>5e6``
RANK_WAIT_VALUES = ("wait_ns", "exposed_wait_ns", "transfer_ns", "exposed_transfer_ns")


def _wait_values(c: Collectives, suffix: str = "") -> dict[str, float | None]:
    """``max_rank_METRIC``: the largest rank total (None where no collective matched across
    ranks, so a condition on it fails rather than passes)."""
    t = c.rank_totals
    return {f"max_rank_{m}{suffix}": None if t.is_empty() else float(t[m].max())
            for m in RANK_WAIT_VALUES}  # fmt: skip


def _path_values(cp: CriticalPath | None, suffix: str = "") -> dict[str, float | None]:
    """What bounds the step: the critical path's unexplained and communication shares (%) and
    the best what-if gain (% of the step); None without a path (a condition on it fails)."""
    if cp is None:
        return {f"{k}{suffix}": None for k in PATH_VALUES}
    return {f"path_unexplained_pct{suffix}": cp.unexplained_pct,
            f"path_comm_pct{suffix}": cp.comm_share_pct,
            f"what_if_best_gain_pct{suffix}": cp.best_gain_pct}  # fmt: skip


#: the SM budget's ``--fail-if`` values (:func:`_sm_values`), and per channel ``CHANNEL.sms_held``
SM_VALUES = ("comm_sms_avg", "min_sms_left", "max_comm_sm_pct", "inflation_extra_ns",
             "inflation_gemm_attn_extra_ns")  # fmt: skip


def _sm_values(sm: SmBudget, suffix: str = "") -> dict[str, float | None]:
    """The SMs communication held (the mean over GPUs of its average while it ran, the fewest
    left on any GPU, the largest share of a GPU's SM-time), the compute time overlap added,
    and ``CHANNEL.sms_held`` (the most on any GPU) for every channel of the vocabulary; None
    where unknown (no SM count, no communication), so a condition on it fails."""
    out: dict[str, float | None] = {f"{k}{suffix}": None for k in SM_VALUES}
    out |= {f"{ch}.sms_held{suffix}": None for ch in CHANNEL_ORDER}
    for key, ns in (("inflation_extra_ns", sm.extra_ns),
                    ("inflation_gemm_attn_extra_ns", sm.gemm_attn_extra_ns)):
        out[f"{key}{suffix}"] = None if ns is None else float(ns)
    known = sm.gpus.filter(pl.col("comm_sms_avg").is_not_null()) if not sm.gpus.is_empty() \
        else sm.gpus  # fmt: skip
    if not known.is_empty():
        out[f"comm_sms_avg{suffix}"] = float(known["comm_sms_avg"].mean())
        out[f"min_sms_left{suffix}"] = float(known["sms_left"].min())
        pct = known["comm_sm_pct"].drop_nulls()
        out[f"max_comm_sm_pct{suffix}"] = float(pct.max()) if len(pct) else None
    if not sm.channels.is_empty():
        held = sm.channels.group_by("channel").agg(pl.col("sms_held").max())
        out |= {f"{r['channel']}.sms_held{suffix}": None if r["sms_held"] is None
                else float(r["sms_held"]) for r in held.iter_rows(named=True)}  # fmt: skip
    return out


#: the critical path's ``--fail-if`` values (:func:`_path_values`)
PATH_VALUES = ("path_unexplained_pct", "path_comm_pct", "what_if_best_gain_pct")


def _comparison_values(c: Comparison) -> dict[str, float | None]:
    """The metric rows' values; the graph rows exist only where a side ran graphs, so a
    graph-free A/B still answers ``graph_unknown_ns`` (0 on both sides); channel keys of the
    vocabulary exist (None) even where neither side has the channel."""
    none = {f"graph_unknown_ns{s}": 0.0 for s in ("", "_off", "_delta")}
    channels = {f"{ch}.{m}{s}": None for ch in CHANNEL_ORDER for m in CHANNEL_METRIC_ROWS
                for s in ("", "_off", "_delta")}  # fmt: skip
    waits = _wait_values(c.on.analysis.collectives) | _wait_values(c.off.analysis.collectives,
                                                                    "_off")  # fmt: skip
    paths = _path_values(c.on.analysis.critical_path) | _path_values(
        c.off.analysis.critical_path, "_off")  # fmt: skip
    sms = _sm_values(c.on.analysis.sm) | _sm_values(c.off.analysis.sm, "_off")
    return none | channels | waits | paths | sms | flat_values(c.rows, c.contract.matched)


values.register(TraceAnalysis,
                lambda a: _gpu_values(a.gpus) | _graph_values(a.graphs, a.totals.active_ns)
                | _channel_values(a.channel_totals) | _wait_values(a.collectives)
                | _path_values(a.critical_path) | _sm_values(a.sm))
values.register(RanksAnalysis, lambda run: _gpu_values(run.ranks) | _graph_values(
    run.graphs, sum(a.totals.active_ns for a in run.analyses)) | _channel_values(
    run.channel_totals) | _wait_values(run.collectives))
values.register(Comparison, _comparison_values)
values.register(RanksComparison, lambda rc: flat_values(rc.rows, rc.matched))


def _sweep_values(sw: Sweep) -> dict[str, float | None]:
    """A sweep: whether every setting's contract holds, the base's and the best setting's
    median step, the best against the base (%), and the most SMs any setting's dispatcher
    held (``--fail-if 'matched==0'`` refuses a sweep that varied more than its knob)."""
    steps = sw.settings["median_step_ns"]
    base, best = steps[0], None if sw.best is None else steps[sw.best]
    held = [v for d in sw.sms_held for k, v in d.items() if k in ("ep.dispatch", "ep.combine")
            and v is not None]  # fmt: skip
    return {
        "matched": float(sw.matched),
        "settings": float(len(sw.settings)),
        "base_step_ns": None if base is None else float(base),
        "best_step_ns": None if best is None else float(best),
        "best_vs_base_pct": None if base is None or best is None or not base
        else 100.0 * (best / base - 1),
        "max_dispatcher_sms_held": float(max(held)) if held else None,
    }


values.register(Sweep, _sweep_values)


#: the verdicts whose figure a gate may rely on: an accepted change (a run long enough, the CI
#: clear of 0, past the run-to-run floor); a screen, too few steps or no measurable change
#: accept nothing, so their figure is not an accepted one
ACCEPTED = ("accepted improvement", "accepted regression")


def _acceptance_values(acc: Acceptance) -> dict[str, float | None]:
    """The unprofiled acceptance: the headline change (the last rung against the one before),
    the newest side's figures, and health over every side (the worst: ``nan_iterations>0``
    fails when any side had one).

    ``accepted_*`` hold the headline's figures only where it was accepted (:data:`ACCEPTED`),
    else None, so a condition on them fails: ``accepted_step_delta_pct>-2`` demands an accepted
    change at least 2 % faster, and a screened or unmeasurable one fails it too.
    ``step_delta_pct`` is the headline's change whatever its verdict; ``accepted`` is 1 where
    it was accepted, else 0."""
    head, last = acc.headline, acc.sides[-1]
    took = head is not None and head.verdict in ACCEPTED
    ci = head.ci95_median_step_pct if head is not None and took else None

    def worst(get: Callable[[AcceptanceSide], float | int | None]) -> float | None:
        known = [v for v in map(get, acc.sides) if v is not None]
        return float(max(known)) if known else None

    return {
        "accepted": None if head is None else float(took),
        "accepted_step_delta_pct": head.median_step_pct if head is not None and took else None,
        "accepted_step_ci95_low_pct": None if ci is None else ci[0],
        "accepted_step_ci95_high_pct": None if ci is None else ci[1],
        "accepted_tflops_delta_pct": head.median_tflops_pct if head is not None and took
        else None,
        "step_delta_pct": None if head is None else head.median_step_pct,
        "window_steps": float(min(s.window.steps for s in acc.sides)),
        "median_step_s": last.median_step_s,
        "median_tflops": last.median_tflops,
        "nan_iterations": worst(lambda s: s.nan_iterations),
        "skipped_iterations": worst(lambda s: s.skipped_iterations),
        "loss_not_finite": worst(lambda s: None if s.loss_finite is None else
                                 float(not s.loss_finite)),
        "peak_memory_bytes": worst(lambda s: s.peak_memory_bytes),
        "max_loss_diff": None if head is None else head.max_loss_diff,
    }


def _accepted_values(ac: AcceptedComparison) -> dict[str, float | None]:
    """An A/B with its acceptance: the profile's keys, the acceptance's, and the link:
    ``profile_overhead_gap_pp`` (the sides' profiling overheads apart, in points) and
    ``profile_explains_pct``."""
    return _comparison_values(ac.comparison) | _acceptance_values(ac.acceptance) | {
        "profile_overhead_gap_pp": ac.link.overhead_gap_pp,
        "profile_explains_pct": ac.link.explains_pct}


values.register(Acceptance, _acceptance_values)
values.register(AcceptedComparison, _accepted_values)


@dataclass(frozen=True)
class Gate:
    """Conditions checked against a result's values when built (a typo fails before any report
    is written), applied after the report: :meth:`failures` are the conditions that hold."""

    values: dict[str, float | None]
    conditions: tuple[Condition, ...]

    @classmethod
    def of(cls, texts: tuple[str, ...], result: object) -> Gate:
        vals = values(result)
        return cls(vals, tuple(parse_condition(t, set(vals)) for t in texts))

    def failures(self) -> list[str]:
        return failing(list(self.conditions), self.values)
