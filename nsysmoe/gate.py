"""``--fail-if``: the flat values of any result that CI can test, and which conditions fail it.

A condition whose value does not exist for this input (no communication, no iterations) fails
too: CI must not pass on a missing number.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatch

import polars as pl

from nsysmoe.ab.metrics import flat_values
from nsysmoe.ab.verdict import Condition, failing, parse_condition
from nsysmoe.measure.overlap import hidden_pct
from nsysmoe.results import Comparison, RanksAnalysis, RanksComparison, TraceAnalysis


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


values.register(TraceAnalysis, lambda a: _gpu_values(a.gpus))
values.register(RanksAnalysis, lambda run: _gpu_values(run.ranks))
values.register(Comparison, lambda c: flat_values(c.rows, c.contract.matched))
values.register(RanksComparison, lambda rc: flat_values(rc.rows, rc.matched))


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
