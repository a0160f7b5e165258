"""One trace in, one :class:`~nsysmoe.result.TraceAnalysis` out: classify, then measure."""

from __future__ import annotations

import polars as pl

from nsysmoe.classify import RuleSet, classify, default_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure import walls
from nsysmoe.measure.nvtx import nvtx_totals
from nsysmoe.measure.overlap import WHOLE_TRACE, Window, per_gpu
from nsysmoe.model import Trace
from nsysmoe.result import TraceAnalysis

TOP_UNCLASSIFIED = 10


def classified_kernels(trace: Trace, rules: RuleSet) -> pl.DataFrame:
    return classify(trace.kernels, rules)


def busiest_unclassified(kernels: pl.DataFrame, top: int = TOP_UNCLASSIFIED) -> pl.DataFrame:
    """Names no rule recognised, by total time, so a user can audit and extend the rules."""
    return (
        kernels.filter(pl.col("subclass") == "unclassified")
        .group_by("name")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("end") - pl.col("start")).sum().alias("sum_ns"),
        )
        .sort(["sum_ns", "name"], descending=[True, False])
        .head(top)
    )


def analyze_trace(
    trace: Trace, *, rules: RuleSet | None = None, window: Window = WHOLE_TRACE
) -> TraceAnalysis:
    rules = rules or default_rules()
    kernels = classified_kernels(trace, rules)
    gpus, classes = per_gpu(kernels, trace.memops, window)
    if gpus.is_empty() or int(gpus["kernels"].sum()) == 0 and window.bounded:
        lo, hi = window.start_ns, window.end_ns
        raise NsysmoeError(
            f"{trace.path}: no GPU work in the window [{lo}, {hi}) ns; widen --window "
            "(the trace's GPU work spans "
            f"{trace.kernels['start'].min()}–{trace.kernels['end'].max()} ns)"
        )
    gpus = gpus.join(
        trace.gpus.select("pid", "device", "gpu_name"), on=["pid", "device"], how="left"
    ).select("pid", "device", "gpu_name", pl.exclude("pid", "device", "gpu_name"))
    nvtx = nvtx_totals(trace.nvtx, window)
    gpu_walls = tuple(_gpu_wall(trace, row) for row in gpus.iter_rows(named=True))
    mem_any = [w.evidence for w in gpu_walls]
    trace_memory = max(mem_any, key=lambda e: e.get("peak_memory_pct") or 0) if mem_any else {}
    memory_keys = (
        "memory_usage",
        "peak_allocated_bytes",
        "gpu_memory_bytes",
        "peak_memory_pct",
        "oom_markers",
    )
    wall = walls.verdict(
        int(gpus["span_ns"].sum()),
        int(gpus["idle_ns"].sum()),
        int(gpus["exposed_ns"].sum()),
        {k: v for k, v in trace_memory.items() if k in memory_keys},
    )
    return TraceAnalysis(
        path=trace.path,
        source_format=trace.source_format,
        schema_version=trace.schema_version,
        product_version=trace.product_version,
        window=window,
        rules_source=rules.source,
        gpus=gpus,
        classes=classes,
        nvtx=nvtx,
        unclassified=busiest_unclassified(window.select(kernels)),
        gpu_walls=gpu_walls,
        wall=wall,
        not_captured=dict(trace.not_captured),
        warnings=trace.warnings,
    )


def _gpu_wall(trace: Trace, row: dict) -> walls.WallVerdict:
    key = (pl.col("pid") == row["pid"]) & (pl.col("device") == row["device"])
    info = trace.gpus.filter(key)
    total = info["total_memory"][0] if len(info) else None
    names = trace.nvtx.filter(pl.col("pid") == row["pid"])["name"]
    mem = walls.memory_evidence(trace.memory_events.filter(key), total, names)
    return walls.verdict(row["span_ns"], row["idle_ns"], row["exposed_ns"], mem)
