"""A/B comparison of two analyses (overlap off vs on): metric rows, contract check and verdicts.

It takes analyses, not paths or rules: the caller measures both sides over their common window
(:func:`nsysmoe.measure.window.choose_common`), and :func:`compare` reads the classified traces
they carry.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from nsysmoe.ab.contract import both_settings, check_contract, variables_of
from nsysmoe.ab.metrics import (
    per_gpu_rows,
    step_change,
    summary_rows,
    top_kernel_changes,
    top_nvtx_changes,
)
from nsysmoe.ab.per_rank import with_per_rank
from nsysmoe.ab.side import Side, measure_side
from nsysmoe.ab.variables import labels as side_labels
from nsysmoe.ab.verdict import JUDGED, judge, noise_floor
from nsysmoe.results import Comparison, Steps, TraceAnalysis


def compare(
    off: TraceAnalysis,
    on: TraceAnalysis,
    *,
    steps: tuple[Steps, Steps] | None = None,
    step_pattern: str | None = None,
    vary: tuple[str, ...] = (),
    labels: tuple[str, str] | None = None,
    sides: tuple[Side, Side] | None = None,
) -> Comparison:
    """The A/B of two analyses measured over their common window (both must carry their source;
    with the ``steps`` they were measured with, a multi-process side's ranks need not detect
    them again with ``step_pattern``): the metric rows, each with its per-rank values
    (:mod:`nsysmoe.ab.per_rank`), and the contract with its variable under test (``vary``: the
    ``--vary`` names), the sides called ``labels`` (default: from the variable, else the file
    names); ``sides``: :func:`measure_side` of ``off`` and ``on``, when the caller took them
    already (each right after its own analysis, while the other side's was still running)."""
    if sides is not None:
        a, b = sides
        if a.analysis is not off or b.analysis is not on:
            raise ValueError("sides: measure_side of off and on, in that order")
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:  # polars releases the GIL
            a, b = pool.map(measure_side, ("off", "on"), (off, on))
    sets = both_settings(a, b)
    variables, note = variables_of(a, b, vary, sets)
    name_off, name_on = side_labels(variables, (off.path, on.path), labels)
    a, b = replace(a, name=name_off), replace(b, name=name_on)
    rows = with_per_rank(tuple(summary_rows(a, b)), a, b, step_pattern=step_pattern,
                         steps=steps)
    verdicts = []
    for key, (col, relative) in JUDGED.items():
        noise = noise_floor(off.iterations[col], on.iterations[col], relative=relative)
        verdicts.append(judge(next(r for r in rows if r.key == key), noise))
    return Comparison(
        off=a,
        on=b,
        contract=check_contract(a, b, variables, note, sets),
        rows=rows,
        verdicts=tuple(verdicts),
        per_gpu=per_gpu_rows(a, b),
        kernel_changes=top_kernel_changes(a, b),
        nvtx_changes=top_nvtx_changes(a, b),
        step_change=step_change(a, b),
    )
