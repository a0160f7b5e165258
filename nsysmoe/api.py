"""The Python API; the CLI is a thin layer over these functions."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import polars as pl

from nsysmoe.analyze import WHOLE, Scope, analyze_trace
from nsysmoe.classify import RuleSet, classify, default_rules
from nsysmoe.io import load_trace
from nsysmoe.measure.overlap import Window
from nsysmoe.model import Trace
from nsysmoe.result import TraceAnalysis

EXAMPLES = ("moe-hybridep-overlap-off.sqlite", "moe-hybridep-overlap-on.sqlite")


def load(path: str | Path) -> Trace:
    """Read a trace into canonical polars tables (see :mod:`nsysmoe.model`)."""
    return load_trace(path)


def analyze(
    trace: str | Path | Trace,
    *,
    rules: RuleSet | None = None,
    window: Window | None = None,
    scope: Scope = WHOLE,
) -> TraceAnalysis:
    """Classify kernels and measure every GPU of one trace (``window`` overrides ``scope``)."""
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    if window is not None:
        scope = Scope(window=window)
    return analyze_trace(trace, rules=rules, scope=scope)


def kernel_summary(
    trace: str | Path | Trace, *, rules: RuleSet | None = None, klass: str | None = None
) -> pl.DataFrame:
    """Kernel names by total time with class and sub-class (name, class, subclass, count,
    sum_ns, mean_ns, pct_of_kernel_time)."""
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    k = classify(trace.kernels, rules or default_rules())
    total = int((k["end"] - k["start"]).sum()) or 1
    table = (
        k.group_by("name", "class", "subclass")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("end") - pl.col("start")).sum().alias("sum_ns"),
        )
        .with_columns(
            (pl.col("sum_ns") // pl.col("count")).alias("mean_ns"),
            (100.0 * pl.col("sum_ns") / total).alias("pct_of_kernel_time"),
        )
        .sort(["sum_ns", "name"], descending=[True, False])
    )
    return table.filter(pl.col("class") == klass) if klass else table


def example_paths() -> list[Path]:
    """The shipped example exports: HybridEP MoE steps with EP overlap off, then on."""
    base = resources.files("nsysmoe") / "examples"
    return [Path(str(base / name)) for name in EXAMPLES]
