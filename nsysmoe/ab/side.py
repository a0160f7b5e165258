"""One side of an A/B: the analysis plus the window-limited facts its comparison and contract need,
read from the classified trace the analysis carries (nothing is classified again)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from nsysmoe.measure.dispatcher import dispatcher_of
from nsysmoe.measure.kernels import compute_kernel_stats, names_in_window
from nsysmoe.measure.launch_calls import launches_of
from nsysmoe.measure.nvtx import NVTX_NOISE, named_like
from nsysmoe.measure.projection import project_nvtx, projected_totals
from nsysmoe.results import Side, TraceAnalysis

#: NVTX ranges that carry MoE dispatch/combine phases (HybridEP executor, Megatron EP-overlap
#: schedule) or NCCL calls; their totals are compared row by row.
MOE_PHASE_PATTERN = (
    r"(?i)in hybrid-ep$|^moe_(?:dispatch|combine)\b|dispatch|combine|^NCCL:"
    r"|^nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Send|Recv|Group\w+|AlltoAll)$"
)  # the last line: NCCL ranges without their domain (Kineto traces have no NVTX domains)


def measure_side(label: str, analysis: TraceAnalysis,
                 projected: pl.DataFrame | None = None) -> Side:  # fmt: skip
    """The side facts of an analysis that still carries its classified trace. ``projected``:
    its phase ranges projected already (a rank's share of its side's :attr:`Side.projected`:
    a range and the work it launched lie in one process)."""
    trace, classified = analysis.classified.trace, analysis.classified.kernels
    # the window's kernels as one lazy frame: each fact reads only its columns, no copy of all
    kernels = analysis.window.select(classified.lazy())
    names, channels, compute, subclasses, distinct = pl.collect_all([
        names_in_window(kernels),
        kernels.group_by("name", "class", "channel").agg(pl.len().cast(pl.Int64).alias("count"))
        .sort("name", "channel", nulls_last=True),
        compute_kernel_stats(kernels),
        kernels.select(pl.col("subclass").unique()),
        kernels.select(pl.col("name").unique()),
    ])  # fmt: skip
    nvtx = _nvtx_totals(analysis)
    if projected is None:
        phase_ranges = analysis.cpu_window.select(named_like(trace.nvtx, MOE_PHASE_PATTERN))
        projected = project_nvtx(phase_ranges, classified, trace.memops, trace.runtime,
                                 launches=launches_of(trace)).with_columns(
            pl.col("name").str.replace_all(NVTX_NOISE, ""))  # fmt: skip
    models = tuple(sorted(str(g) if g else "unknown" for g in analysis.gpus["gpu_name"]))
    return Side(
        label=label,
        analysis=analysis,
        kernel_names=names,
        kernel_channels=channels,
        compute_kernels=compute,
        nvtx=nvtx,
        phases_gpu=projected_totals(projected),
        projected=projected,
        gpu_models=models,
        ranks=analysis.gpus["pid"].n_unique(),
        dispatcher=dispatcher_of(set(subclasses["subclass"]), distinct["name"]),
    )


def rank_side(side: Side, analysis: TraceAnalysis, projected: pl.DataFrame) -> Side:
    """One process of ``side`` (``analysis``: that process measured alone; ``projected``: its
    share of the side's projected phase ranges) with the facts a metric row reads made its own
    (:func:`~nsysmoe.ab.metrics.summary_rows`: the analysis, GEMM/attention kernel stats, NVTX
    and phase totals); the facts no row reads (kernel names and channels, dispatcher, GPU
    models) stay the side's: a rank's values are read from it, nothing else."""
    kernels = analysis.window.select(analysis.classified.kernels.lazy())
    return replace(side, analysis=analysis, compute_kernels=compute_kernel_stats(kernels).collect(),
                   nvtx=_nvtx_totals(analysis), phases_gpu=projected_totals(projected),
                   projected=projected, ranks=analysis.gpus["pid"].n_unique())  # fmt: skip


def _nvtx_totals(analysis: TraceAnalysis) -> pl.DataFrame:
    """The analysis' (name, style) NVTX totals, styles merged, by name."""
    return (analysis.nvtx.group_by("name").agg(pl.col("count").sum(), pl.col("total_ns").sum())
            .sort("name"))  # fmt: skip
