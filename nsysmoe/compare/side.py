"""One side of an A/B: the analysis plus what the comparison and its contract need."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysmoe.analyze import Scope, analyze_trace
from nsysmoe.classify import RuleSet, classify, default_rules
from nsysmoe.measure.nvtx import NVTX_NOISE, display_name
from nsysmoe.measure.projection import project_nvtx, projected_totals
from nsysmoe.measure.steps import Steps
from nsysmoe.model import Trace
from nsysmoe.result import TraceAnalysis

#: NVTX ranges that carry MoE dispatch/combine phases (HybridEP executor, Megatron EP-overlap
#: schedule) or NCCL calls; their totals are compared row by row.
MOE_PHASE_PATTERN = (
    r"(?i)in hybrid-ep$|^moe_(?:dispatch|combine)\b|dispatch|combine|^NCCL:"
    r"|^nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Send|Recv|Group\w+|AlltoAll)$"
)  # the last line: NCCL ranges without their domain (Kineto traces have no NVTX domains)


@dataclass(frozen=True)
class Side:
    """An analysed trace over its window, with window-limited facts for the comparison.

    ``kernel_names``: name, count, sum_ns, class (kernels in the window);
    ``compute_kernels``: class, count, sum_ns, median_ns for GEMM and attention;
    ``nvtx``: normalised name, count, total_ns (CPU side) of ranges in the window;
    ``phases_gpu``: MoE/NCCL phase ranges in the window projected onto the GPU — normalised name,
    count, busy_total_ns (Σ per-range exact union), gpu_span_total_ns, kernels, comm_ns,
    compute_ns, hidden_ns (see :mod:`nsysmoe.measure.projection`).
    """

    label: str
    analysis: TraceAnalysis
    kernel_names: pl.DataFrame
    compute_kernels: pl.DataFrame
    nvtx: pl.DataFrame
    phases_gpu: pl.DataFrame
    gpu_models: tuple[str, ...]
    ranks: int
    dispatcher: str


def dispatcher_of(subclasses: set[str], names: pl.Series) -> str:
    """The MoE token dispatcher the kernel names reveal (docs/domain.md, dispatcher table)."""
    if any(s.startswith("hybridep") for s in subclasses):
        return "HybridEP"
    if any(s.startswith("deepep") for s in subclasses):
        return "DeepEP"
    if bool(names.str.contains("SendRecv").any()):
        return "alltoall (NCCL SendRecv)"
    return "none detected"


STEADY = Scope(steady=True, skip=None)  # the CLI's A/B default: 1 warm-up iteration skipped


def measure_side(
    label: str,
    trace: Trace,
    steps: Steps | None = None,
    *,
    rules: RuleSet | None = None,
    scope: Scope = STEADY,
) -> Side:
    rules = rules or default_rules()
    classified = classify(trace.kernels, rules)
    analysis = analyze_trace(trace, rules=rules, scope=scope, classified=classified, steps=steps)
    window = analysis.window
    kernels = window.select(classified)
    dur = pl.col("end") - pl.col("start")
    names = (
        kernels.group_by("name", "class")
        .agg(pl.len().cast(pl.Int64).alias("count"), dur.sum().alias("sum_ns"))
        .sort("name")
    )
    compute = (
        kernels.filter(pl.col("class").is_in(("gemm", "attention")))
        .group_by("class")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            dur.sum().alias("sum_ns"),
            dur.median().alias("median_ns"),
        )
    )
    nvtx = (  # the analysis' (name, style) totals, styles merged
        analysis.nvtx.group_by("name")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum())
        .sort("name")
    )
    phase_ranges = analysis.cpu_window.select(trace.nvtx).filter(
        pl.col("name").str.contains(MOE_PHASE_PATTERN)
        | display_name().str.contains(MOE_PHASE_PATTERN)
    )
    projected = project_nvtx(phase_ranges, classified, trace.memops, trace.runtime)
    phases_gpu = projected_totals(
        projected.with_columns(pl.col("name").str.replace_all(NVTX_NOISE, ""))
    )
    models = tuple(sorted(str(g) if g else "unknown" for g in analysis.gpus["gpu_name"]))
    return Side(
        label=label,
        analysis=analysis,
        kernel_names=names,
        compute_kernels=compute,
        nvtx=nvtx,
        phases_gpu=phases_gpu,
        gpu_models=models,
        ranks=analysis.gpus["pid"].n_unique(),
        dispatcher=dispatcher_of(set(kernels["subclass"].unique()), kernels["name"]),
    )
