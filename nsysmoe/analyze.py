"""One trace in, one :class:`~nsysmoe.result.TraceAnalysis` out: classify, scope, then measure."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysmoe.classify import RuleSet, classify, default_rules
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure import walls
from nsysmoe.measure.iterations import iteration_metrics
from nsysmoe.measure.nvtx import nvtx_totals
from nsysmoe.measure.overlap import WHOLE_TRACE, Window, per_gpu
from nsysmoe.measure.steps import (
    Steps,
    detect_steps,
    process_windows,
    select_steps,
    step_windows,
)
from nsysmoe.model import Trace
from nsysmoe.result import ITERATION_SCHEMA, TraceAnalysis

TOP_UNCLASSIFIED = 10
MEMORY_KEYS = (
    "memory_usage", "peak_allocated_bytes", "gpu_memory_bytes", "peak_memory_pct", "oom_markers",
)  # fmt: skip


@dataclass(frozen=True)
class Scope:
    """What part of the trace to measure.

    A time ``window`` wins; else with ``steady`` the iterations found by ``step_pattern`` minus
    ``skip`` warm-up steps, limited to [first, last] and to ``numbers`` when given; else the
    whole trace. Iterations are detected in every case, for the per-iteration table.
    """

    window: Window = WHOLE_TRACE
    steady: bool = False
    require_steps: bool = False  # asked for explicitly: no iterations is an error, not a fallback
    step_pattern: str | None = None
    skip: int | None = 0  # None: 1 warm-up iteration when there are 3 or more, else none
    first: int | None = None
    last: int | None = None
    numbers: tuple[int, ...] | None = None
    raw_nvtx: bool = False  # keep PyTorch's ", op_id = N" suffixes (nsys stats' exact names)


WHOLE = Scope()


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


def resolve_scope(
    steps: Steps, scope: Scope, origin: int = 0
) -> tuple[Window, Window, str, list[int]]:
    """The GPU window, the CPU window (for CPU-side NVTX totals), the window's description for
    the report, and the iterations inside it; ``origin`` anchors a relative time window."""
    if scope.window.bounded:
        w = scope.window.anchored(origin)
        kept = [s for s, sw in step_windows(steps, steps.numbers) if _inside(sw, w)]
        text = "time window" + (f" from the first GPU activity at {origin:,} ns"
                                 if scope.window.relative else "")  # fmt: skip
        return w, w, text, kept
    if not scope.steady:
        return WHOLE_TRACE, WHOLE_TRACE, "whole trace", steps.numbers
    if not steps.numbers and not scope.require_steps:
        text = "whole trace (no iteration ranges found; name them with --step-range REGEX)"
        return WHOLE_TRACE, WHOLE_TRACE, text, []
    sel = select_steps(steps, skip=scope.skip, first=scope.first, last=scope.last,
                       only=scope.numbers)  # fmt: skip
    return sel.window, sel.cpu_window, sel.description, sel.steps


def _inside(inner: Window, outer: Window) -> bool:
    lo, hi = outer.bounds()
    return inner.start_ns is not None and inner.start_ns >= lo and (inner.end_ns or 0) <= hi


def analyze_trace(
    trace: Trace,
    *,
    rules: RuleSet | None = None,
    scope: Scope = WHOLE,
    classified: pl.DataFrame | None = None,
    steps: Steps | None = None,
) -> TraceAnalysis:
    """``classified`` (kernels with their class) and ``steps`` may be passed in when the caller
    already has them (an A/B needs them too), so they are computed once."""
    if trace.kernels.is_empty():
        raise NsysmoeError(f"{trace.path}: the export holds no CUDA kernels; nothing to measure")
    rules = rules or default_rules()
    kernels = classify(trace.kernels, rules) if classified is None else classified
    steps = detect_steps(trace, scope.step_pattern) if steps is None else steps
    origin = int(pl.concat([kernels["start"], trace.memops["start"]]).min())
    window, cpu_window, window_text, kept = resolve_scope(steps, scope, origin)
    gpus, classes = per_gpu(kernels, trace.memops, window)
    if int(gpus["kernels"].sum()) == 0:
        raise NsysmoeError(
            f"{trace.path}: no GPU work in the window [{window.start_ns}, {window.end_ns}) ns; "
            "widen --window (GPU work spans "
            f"{trace.kernels['start'].min()}–{trace.kernels['end'].max()} ns)"
        )
    gpus = gpus.join(
        trace.gpus.select("pid", "device", "gpu_name"), on=["pid", "device"], how="left"
    ).select("pid", "device", "gpu_name", pl.exclude("pid", "device", "gpu_name"))
    gpu_walls = tuple(_gpu_wall(trace, row) for row in gpus.iter_rows(named=True))
    return TraceAnalysis(
        path=trace.path,
        source_format=trace.source_format,
        schema_version=trace.schema_version,
        product_version=trace.product_version,
        window=window,
        cpu_window=cpu_window,
        window_text=window_text,
        rules_source=rules.source,
        gpus=gpus,
        classes=classes,
        nvtx=nvtx_totals(trace.nvtx, cpu_window, normalize=not scope.raw_nvtx),
        unclassified=busiest_unclassified(window.select(kernels)),
        iterations=per_iteration(kernels, trace.memops, steps, kept),
        step_timeline=steps.timeline,
        gpu_walls=gpu_walls,
        wall=_trace_wall(gpus, gpu_walls),
        not_captured=dict(trace.not_captured),
        warnings=trace.warnings + peer_copy_note(window.select(trace.memops)),
    )


def peer_copy_note(memops: pl.DataFrame) -> tuple[str, ...]:
    """Peer-to-peer copies move data between GPUs without a kernel: say they are not counted
    as communication, so a report showing no communication is not misread."""
    p2p = memops.filter(pl.col("name").str.contains("PtoP"))
    if p2p.is_empty():
        return ()
    total = int((p2p["end"] - p2p["start"]).sum())
    note = (
        f"{len(p2p):,} peer-to-peer memcpy ({total / 1e6:,.3f} ms summed) moved data between "
        "GPUs; copies count as GPU activity, not as communication kernels"
    )
    return (note,)


def per_iteration(
    kernels: pl.DataFrame, memops: pl.DataFrame, steps: Steps, kept: list[int]
) -> pl.DataFrame:
    """Step time and communication per iteration, all GPUs together, to show the spread.

    Each process is measured in its own iteration windows (ranks drift apart in time), then
    the processes are added up; the step time is the median of the processes' GPU periods.
    """
    windows = process_windows(steps, kept)
    if windows.is_empty():
        return pl.DataFrame(schema=ITERATION_SCHEMA)
    parts = []
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        spans = [Window(a, b) for a, b in w.select("start_ns", "end_ns").iter_rows()]
        of_pid = pl.col("pid") == pid
        metrics = iteration_metrics(kernels.filter(of_pid), memops.filter(of_pid), spans)
        parts.append(pl.concat([w.select("step", "start_ns", "end_ns"), metrics.drop("window")],
                               how="horizontal"))  # fmt: skip
    period = steps.table.group_by("step").agg(pl.col("step_ns").median())
    comm, hidden = pl.col("comm_ns"), pl.col("hidden_ns")
    return (
        pl.concat(parts)
        .group_by("step")
        .agg(
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("comm_ns", "hidden_ns", "idle_ns").sum(),
        )
        .join(period, on="step", how="left")
        .with_columns(
            (comm - hidden).alias("exposed_ns"),
            pl.when(comm > 0).then(100.0 * hidden / comm).alias("hidden_pct"),
        )
        .sort("step")
        .select(list(ITERATION_SCHEMA))
        .cast(ITERATION_SCHEMA)
    )


def _gpu_wall(trace: Trace, row: dict) -> walls.WallVerdict:
    key = (pl.col("pid") == row["pid"]) & (pl.col("device") == row["device"])
    info = trace.gpus.filter(key)
    total = info["total_memory"][0] if len(info) else None
    names = trace.nvtx.filter(pl.col("pid") == row["pid"])["name"]
    mem = walls.memory_evidence(trace.memory_events.filter(key), total, names)
    return walls.verdict(row["span_ns"], row["idle_ns"], row["exposed_ns"], mem)


def _trace_wall(gpus: pl.DataFrame, gpu_walls: tuple[walls.WallVerdict, ...]) -> walls.WallVerdict:
    """The trace's verdict: summed evidence over GPUs, the worst GPU's memory evidence."""
    evidences = [w.evidence for w in gpu_walls]
    memory = max(evidences, key=lambda e: e.get("peak_memory_pct") or 0) if evidences else {}
    oom = sum(int(e.get("oom_markers") or 0) for e in evidences)
    memory = {k: v for k, v in memory.items() if k in MEMORY_KEYS} | (
        {"oom_markers": oom} if oom else {}
    )
    return walls.verdict(
        int(gpus["span_ns"].sum()),
        int(gpus["idle_ns"].sum()),
        int(gpus["exposed_ns"].sum()),
        memory,
    )
