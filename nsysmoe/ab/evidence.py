"""The profile against the unprofiled run: how much the profiler slowed each side, and whether
the profile's mechanism explains the change the training logs accept.

The seeds' rule: accept on unprofiled steady iterations, explain with a matched profile. The
profile's explanation of a step change is what its A/B measures per iteration
(:class:`~nsysmoe.results.StepChange`): exposed communication saved, minus the compute inflation
hidden communication costs, as a share of the profiled off step, set beside the accepted
relative change of the unprofiled medians. That comparison assumes the profiler stretches the
step proportionally (relative changes survive it); a fixed cost it adds per step instead shrinks
the predicted change by 1 / (1 + overhead). GEMM/attention time is summed over streams, not
taken on the critical path, so concurrent kernels can over-count inflation. The profile's own
step change is said beside it, to check the prediction against what the profile measured.
"""

from __future__ import annotations

from nsysmoe.acceptance import Acceptance, AcceptanceSide, AcceptedComparison, ProfileLink
from nsysmoe.errors import NsysmoeError
from nsysmoe.results import Comparison, TraceAnalysis

#: sides whose profiling overheads differ by more than this many points skew the profiled A/B
OVERHEAD_GAP_PP = 5.0
#: what an accepted (or screened) change is: the verdicts whose CI clears the run-to-run floor
#: (nsysmoe.acceptance.MIN_CHANGE_PCT), and the word the sentence calls its figure by
DECIDED = {"accepted improvement": "accepted", "accepted regression": "accepted",
           "screened improvement": "screened", "screened regression": "screened"}  # fmt: skip


def with_acceptance(c: Comparison, acceptance: Acceptance) -> AcceptedComparison:
    """The A/B with its unprofiled acceptance (exactly two logs: off, then on)."""
    if len(acceptance.sides) != 2:
        raise NsysmoeError(f"--logs takes two training logs for an A/B (off, then on), not "
                           f"{len(acceptance.sides)}")  # fmt: skip
    return AcceptedComparison(c, acceptance, profile_link(c, acceptance))


def overhead_pct(profiled: TraceAnalysis, side: AcceptanceSide) -> float | None:
    """The profiled steady median step over the unprofiled median, − 1, in % (None where either
    is missing: no iterations in the trace, or only throughput in the log)."""
    step_ns, median_s = profiled.median_step_ns, side.median_step_s
    if step_ns is None or not median_s:
        return None
    return 100.0 * (step_ns / 1e9 / median_s - 1.0)


def profile_link(c: Comparison, acceptance: Acceptance) -> ProfileLink:
    """Each side's profiling overhead (warned when they differ by more than
    :data:`OVERHEAD_GAP_PP` points) and the share of the accepted change the profile explains."""
    off, on = acceptance.sides
    overheads = (overhead_pct(c.off.analysis, off), overhead_pct(c.on.analysis, on))
    warning = gap = None
    if overheads[0] is not None and overheads[1] is not None:
        gap = abs(overheads[1] - overheads[0])
        if gap > OVERHEAD_GAP_PP:
            warning = (f"profiling overhead differs by {gap:.1f} points between the sides "
                       f"({overheads[0]:+.1f} % vs {overheads[1]:+.1f} %): the profiled A/B "
                       "is skewed; trust the unprofiled change")  # fmt: skip
    faster = [s.label for s, o in zip(acceptance.sides, overheads, strict=True)
              if o is not None and o < -OVERHEAD_GAP_PP]  # fmt: skip
    if faster:  # a profiler slows a run: a profile much faster than its log is another run
        said = (f"the profile of {', '.join(faster)} is more than {OVERHEAD_GAP_PP:g} % faster "
                "than its unprofiled log: are these the logs of these traces?")
        warning = said if warning is None else f"{warning}; {said}"
    predicted = predicted_pct(c)
    change = acceptance.changes[0]
    accepted = change.median_step_pct
    explains = None
    own = profiled_step_pct(c)
    measured = "" if own is None else f" (its own step change: {own:+.1f} %)"
    if predicted is None:
        sentence = "the profile has no step-change breakdown (no iterations measured)"
    elif change.verdict not in DECIDED or accepted is None:
        sentence = (f"nothing accepted to explain ({change.sentence}); the profile's mechanism "
                    f"predicts {predicted:+.1f} %{measured}")  # fmt: skip
    elif (predicted < 0) != (accepted < 0) or predicted == 0:
        sentence = (f"the profile does not explain the {DECIDED[change.verdict]} "
                    f"{accepted:+.1f} %: its mechanism predicts {predicted:+.1f} %{measured}")
    else:
        explains = 100.0 * predicted / accepted
        sentence = (f"the profile explains {explains:.0f} % of the {DECIDED[change.verdict]} "
                    f"{accepted:+.1f} %{measured}")  # fmt: skip
    return ProfileLink(overheads, warning, predicted, explains, sentence, gap, own)


def predicted_pct(c: Comparison) -> float | None:
    """The step change the profile's mechanism accounts for, in % of the profiled off step:
    Δ exposed communication + Δ GEMM/attention time (inflation), per iteration and GPU."""
    sc, step = c.step_change, c.off.analysis.median_step_ns
    if sc.exposed_delta_ns is None or not step:
        return None
    return 100.0 * (sc.exposed_delta_ns + (sc.compute_delta_ns or 0.0)) / step


def profiled_step_pct(c: Comparison) -> float | None:
    """The profile's own step change: Δ step per iteration over the profiled off step, in %."""
    delta, step = c.step_change.step_delta_ns, c.off.analysis.median_step_ns
    if delta is None or not step:
        return None
    return 100.0 * delta / step
