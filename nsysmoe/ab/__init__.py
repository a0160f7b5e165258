"""A/B comparison of two analyses (overlap off vs on): metric rows, contract check and verdicts.

It takes analyses, not paths or rules: the caller measures both sides over one common scope
(:func:`common_scope`), and :func:`compare` reads the classified traces they carry.
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
from nsysmoe.ab.side import measure_side
from nsysmoe.ab.variables import labels as side_labels
from nsysmoe.ab.verdict import JUDGED, judge, noise_floor
from nsysmoe.measure.steps import auto_skip
from nsysmoe.model import WHOLE, Scope
from nsysmoe.results import Comparison, Steps, TraceAnalysis


def common_scope(off: Steps, on: Steps, scope: Scope) -> Scope:
    """For a steady window, keep the iteration numbers both sides have after the warm-up skip."""
    if scope.window.bounded or not scope.steady or scope.numbers is not None:
        return scope
    a = off.numbers[auto_skip(scope.skip, off) :]
    b = set(on.numbers[auto_skip(scope.skip, on) :])
    common = tuple(n for n in a if n in b)
    if not common:
        return scope  # each side keeps its own window; the contract reports the mismatch
    return replace(scope, numbers=common)


def compare(
    off: TraceAnalysis,
    on: TraceAnalysis,
    *,
    scope: Scope = WHOLE,
    steps: tuple[Steps, Steps] | None = None,
    vary: tuple[str, ...] = (),
    labels: tuple[str, str] | None = None,
) -> Comparison:
    """The A/B of two analyses measured over one ``scope`` (both must carry their source; with
    the ``steps`` they were measured with, a multi-process side's ranks need not detect them
    again): the metric rows, each with its per-rank values (:mod:`nsysmoe.ab.per_rank`), and
    the contract with its variable under test (``vary``: the ``--vary`` names), the sides
    called ``labels`` (default: from the variable, else the file names)."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # polars releases the GIL: sides overlap
        a, b = pool.map(measure_side, ("off", "on"), (off, on))
    sets = both_settings(a, b)
    variables, note = variables_of(a, b, vary, sets)
    name_off, name_on = side_labels(variables, (off.path, on.path), labels)
    a, b = replace(a, name=name_off), replace(b, name=name_on)
    rows = with_per_rank(tuple(summary_rows(a, b)), a, b, scope=scope, steps=steps)
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
