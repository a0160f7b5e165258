"""A/B comparison of two traces (overlap off vs on): metrics, contract check and verdict."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial

import polars as pl

from nsysmoe.analyze import Scope
from nsysmoe.classify import RuleSet
from nsysmoe.compare.contract import Contract, check_contract
from nsysmoe.compare.metrics import (
    MetricRow,
    flat_values,
    per_gpu_rows,
    summary_rows,
    top_kernel_changes,
    top_nvtx_changes,
)
from nsysmoe.compare.side import Side, measure_side
from nsysmoe.compare.verdict import JUDGED, Verdict, judge, noise_floor
from nsysmoe.measure.steps import Steps, auto_skip, detect_steps
from nsysmoe.model import Trace
from nsysmoe.report import Report

JSON_SCHEMA = "nsysmoe.comparison"
JSON_VERSION = 1


@dataclass(frozen=True)
class Comparison(Report):
    off: Side
    on: Side
    contract: Contract
    rows: tuple[MetricRow, ...]
    verdicts: tuple[Verdict, ...]
    per_gpu: pl.DataFrame
    kernel_changes: pl.DataFrame
    nvtx_changes: pl.DataFrame

    def _render(self, fmt: str) -> str:
        from nsysmoe.render import COMPARISON_RENDERERS

        return COMPARISON_RENDERERS[fmt](self)

    def to_polars(self) -> pl.DataFrame:
        """The side-by-side metric table: key, label, unit, off, on, delta, delta_pct."""
        return pl.DataFrame([r.to_dict() for r in self.rows])

    def row(self, key: str) -> MetricRow:
        return next(r for r in self.rows if r.key == key)

    def values(self) -> dict[str, float | None]:
        """Flat values for ``--fail-if`` (:func:`nsysmoe.compare.metrics.flat_values`)."""
        return flat_values(self.rows, self.contract.matched)

    def to_dict(self) -> dict[str, object]:
        return {
            "off": self.off.analysis.to_dict(),
            "on": self.on.analysis.to_dict(),
            "contract": {
                "matched": self.contract.matched,
                "checks": [c.to_dict() for c in self.contract.checks],
                "dispatcher": {"off": self.off.dispatcher, "on": self.on.dispatcher},
            },
            "metrics": [r.to_dict() for r in self.rows],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "per_gpu": self.per_gpu.to_dicts(),
            "kernel_changes": self.kernel_changes.to_dicts(),
            "nvtx_changes": self.nvtx_changes.to_dicts(),
        }


def common_scope(off: Steps, on: Steps, scope: Scope) -> Scope:
    """For a steady window, keep the iteration numbers both sides have after the warm-up skip."""
    if scope.window.bounded or not scope.steady or scope.numbers is not None:
        return scope
    a = off.numbers[auto_skip(scope.skip, len(off.numbers)) :]
    b = set(on.numbers[auto_skip(scope.skip, len(on.numbers)) :])
    common = tuple(n for n in a if n in b)
    if not common:
        return scope  # each side keeps its own window; the contract reports the mismatch
    return replace(scope, numbers=common)


def compare(off: Trace, on: Trace, *, rules: RuleSet | None = None, scope: Scope) -> Comparison:
    with ThreadPoolExecutor(max_workers=2) as pool:  # polars releases the GIL: sides overlap
        steps = list(pool.map(partial(detect_steps, pattern=scope.step_pattern), (off, on)))
        scope = common_scope(*steps, scope)
        side = partial(measure_side, rules=rules, scope=scope)
        a, b = pool.map(side, ("off", "on"), (off, on), steps)
    rows = tuple(summary_rows(a, b))
    verdicts = []
    for key, (col, relative) in JUDGED.items():
        noise = noise_floor(a.analysis.iterations[col], b.analysis.iterations[col],
                            relative=relative)  # fmt: skip
        verdicts.append(judge(next(r for r in rows if r.key == key), noise))
    return Comparison(
        off=a,
        on=b,
        contract=check_contract(a, b),
        rows=rows,
        verdicts=tuple(verdicts),
        per_gpu=per_gpu_rows(a, b),
        kernel_changes=top_kernel_changes(a, b),
        nvtx_changes=top_nvtx_changes(a, b),
    )
