"""The side-by-side metric rows of an A/B: off value, on value, Δ and Δ%."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import polars as pl

from nsysmoe.ab.side import MOE_PHASE_PATTERN
from nsysmoe.results import PCT_BASE_SHARE, MetricRow, Side, StepChange

#: short ``--fail-if`` names for common values
ALIASES = {
    "step_time_delta_pct": "step_time_ns_delta_pct",
    "exposed_delta_pct": "exposed_ns_delta_pct",
    "gemm_inflation_pct": "gemm_sum_ns_delta_pct",
    "attention_inflation_pct": "attention_sum_ns_delta_pct",
}


#: rows whose value is a median of single durations, not a total over the window
MEDIAN_KEYS = frozenset({"step_time_ns", "gemm_median_ns", "attention_median_ns"})


def with_pct_floor(rows: Sequence[MetricRow], active_off: int | float | None
                   ) -> tuple[MetricRow, ...]:  # fmt: skip
    """The rows with ``pct_floor`` set on every total in ns (:data:`PCT_BASE_SHARE` of
    ``active_off``, the off side's GPU-active union); medians, counts and percentages keep
    none."""
    floor = round(PCT_BASE_SHARE * active_off / 100) if active_off else None  # integer ns
    return tuple(replace(r, pct_floor=floor) if r.unit == "ns" and r.key not in MEDIAN_KEYS
                 else r for r in rows)  # fmt: skip


def flat_values(rows: Sequence[MetricRow], matched: bool) -> dict[str, float | None]:
    """``KEY`` (the on side), ``KEY_off``, ``KEY_delta``, ``KEY_delta_pct`` for every non-NVTX
    row, the :data:`ALIASES`, and ``matched`` (1 or 0). ``KEY_delta_pct`` is the change over
    the off value or, where that is below the row's floor, over the floor
    (:attr:`~nsysmoe.results.MetricRow.gated_pct`): noise on a tiny base never passes a
    threshold, a real change from it still does."""
    out: dict[str, float | None] = {}
    for r in rows:
        if not r.key.startswith(("nvtx:", "nvtx_gpu:")):
            out |= {r.key: r.on, f"{r.key}_off": r.off, f"{r.key}_delta": r.delta}
            if r.unit != "pct":  # a percentage's change is its delta, in points
                out[f"{r.key}_delta_pct"] = r.gated_pct
    out |= {alias: out.get(key) for alias, key in ALIASES.items()}
    out["matched"] = 1.0 if matched else 0.0
    return out


def _sum(side: Side, col: str) -> int:
    return getattr(side.analysis.totals, col)


def median_step_ns(side: Side) -> int | None:
    return side.analysis.median_step_ns


def _compute(side: Side, klass: str, col: str) -> float | int | None:
    """Sum (int ns) or median (may end in .5 ns) of one class's kernel durations."""
    row = side.compute_kernels.filter(pl.col("class") == klass)
    return None if row.is_empty() else row[col][0]


def summary_rows(off: Side, on: Side) -> list[MetricRow]:
    """All GPUs together (durations summed over GPUs; percentages from the sums)."""

    def both(col: str) -> tuple[int, int]:
        return _sum(off, col), _sum(on, col)

    rows = [
        MetricRow("step_time_ns", "median step time", "ns", median_step_ns(off),
                  median_step_ns(on), "lower", "GPU period of an iteration"),
        MetricRow("active_ns", "GPU-active interval union", "ns", *both("active_ns"), "lower"),
        MetricRow("comm_ns", "communication union", "ns", *both("comm_ns"), "lower"),
        MetricRow("comm_gemm_attn_ns", "communication concurrent with GEMM/attention", "ns",
                  *both("comm_gemm_attn_ns"), "higher"),
        MetricRow("hidden_pct", "communication hidden by compute", "pct", off.analysis.totals
                  .hidden_pct, on.analysis.totals.hidden_pct, "higher",
                  "|⋃comm ∩ ⋃compute| / |⋃comm|"),
        MetricRow("exposed_ns", "exposed communication", "ns", *both("exposed_ns"), "lower"),
        MetricRow("idle_ns", "GPU idle (span − active)", "ns", *both("idle_ns"), "lower"),
        MetricRow("kernels", "kernel count", "count", *both("kernels")),
    ]  # fmt: skip
    rows += graph_rows(off, on) + channel_rows(off, on)
    for klass, label in (("gemm", "GEMM"), ("attention", "attention")):
        rows += [
            MetricRow(f"{klass}_sum_ns", f"{label} kernels, sum of durations", "ns",
                      _compute(off, klass, "sum_ns"), _compute(on, klass, "sum_ns"), "lower",
                      "compute inflation: hidden comm shares SMs"),
            MetricRow(f"{klass}_median_ns", f"{label} kernel, median duration", "ns",
                      _compute(off, klass, "median_ns"), _compute(on, klass, "median_ns"), "lower",
                      "compute inflation"),
        ]  # fmt: skip
    return list(with_pct_floor(rows + phase_rows(off, on), off.analysis.totals.active_ns))


#: per-channel A/B rows: (metric, label, unit, better)
CHANNEL_METRIC_ROWS = {
    "hidden_pct": ("hidden by compute", "pct", "higher"),
    "exposed_ns": ("exposed", "ns", "lower"),
    "exposed_only_ns": ("exposed, no other channel", "ns", "lower"),
    "comm_ns": ("union", "ns", "lower"),
}


def channel_rows(off: Side, on: Side) -> list[MetricRow]:
    """Per channel present on either side (all GPUs summed): hidden %, exposed, union."""
    a = {r["channel"]: r for r in off.analysis.channel_totals.iter_rows(named=True)}
    b = {r["channel"]: r for r in on.analysis.channel_totals.iter_rows(named=True)}
    order = [*a, *(ch for ch in b if ch not in a)]
    rows = []
    for ch in order:
        for metric, (label, unit, better) in CHANNEL_METRIC_ROWS.items():
            ra, rb = a.get(ch), b.get(ch)
            rows.append(MetricRow(f"{ch}.{metric}", f"{ch}: {label}", unit,
                                  ra[metric] if ra else None, rb[metric] if rb else None,
                                  better))  # fmt: skip
    return rows


def _per_step_gpu(side: Side, ns: int | None) -> float | None:
    n = len(side.analysis.iterations) * len(side.analysis.gpus)
    return None if ns is None or not n else ns / n


def step_change(off: Side, on: Side) -> StepChange:
    """The step-time change beside the exposed-communication and compute changes, per
    iteration and GPU (:class:`~nsysmoe.results.StepChange`)."""
    a, b = median_step_ns(off), median_step_ns(on)
    step = None if a is None or b is None else float(b - a)

    def delta(of: Callable[[Side], int | None]) -> float | None:
        x, y = _per_step_gpu(off, of(off)), _per_step_gpu(on, of(on))
        return None if x is None or y is None else y - x

    def compute(side: Side) -> int:
        return sum(int(_compute(side, k, "sum_ns") or 0) for k in ("gemm", "attention"))

    def inflation(side: Side) -> int | None:  # None: some ran overlapped, none comparable
        return side.analysis.sm.gemm_attn_extra_ns

    exposed = delta(lambda s: s.analysis.totals.exposed_ns)
    explained = 100.0 * exposed / step if step and exposed is not None else None
    return StepChange(step, exposed, delta(compute), explained, delta(inflation))


def graph_rows(off: Side, on: Side) -> list[MetricRow]:
    """CUDA-graph time, only when either side ran graphs (so a graph-free A/B is unchanged)."""
    g_off, g_on = off.analysis.graphs, on.analysis.graphs
    if not (g_off.present or g_on.present):
        return []
    return [
        MetricRow("graph_whole_ns", "whole CUDA-graph replays (union)", "ns", g_off.whole_ns,
                  g_on.whole_ns, None, "nsys --cuda-graph-trace=graph: one row per replay"),
        MetricRow("graph_unknown_ns", "CUDA-graph time, contents unknown", "ns",
                  g_off.unknown_ns, g_on.unknown_ns, None,
                  "communication inside cannot be seen"),
        MetricRow("graph_node_ns", "kernels inside CUDA graphs (union)", "ns", g_off.node_ns,
                  g_on.node_ns, None, "nsys --cuda-graph-trace=node, or Kineto"),
    ]  # fmt: skip


def _paired(off: pl.DataFrame, on: pl.DataFrame, col: str) -> pl.DataFrame:
    return off.select("name", pl.col(col).alias("off")).join(
        on.select("name", pl.col(col).alias("on")), on="name", how="full", coalesce=True
    ).filter(pl.col("name").str.contains(MOE_PHASE_PATTERN)).sort("name")  # fmt: skip


def phase_rows(off: Side, on: Side) -> list[MetricRow]:
    """MoE dispatch/combine and NCCL NVTX ranges present on either side, twice: CPU-side range
    totals, and the GPU time their launched work kept the GPU busy (projection)."""
    rows = []
    gpu = {r["name"]: r for r in _paired(off.phases_gpu, on.phases_gpu, "busy_total_ns")
           .iter_rows(named=True)}  # fmt: skip
    for r in _paired(off.nvtx, on.nvtx, "total_ns").iter_rows(named=True):
        name = r["name"]
        rows.append(MetricRow(f"nvtx:{name}", f"NVTX {name} (CPU)", "ns", r["off"], r["on"],
                              "lower", "CPU-side range total"))  # fmt: skip
        if name in gpu:
            g = gpu[name]
            label, note = f"NVTX {name} (GPU busy)", "union of the GPU work it launched"
            key = f"nvtx_gpu:{name}"
            rows.append(MetricRow(key, label, "ns", g["off"], g["on"], "lower", note))
    return rows


def per_gpu_rows(off: Side, on: Side) -> pl.DataFrame:
    """GPUs paired by position (sorted by pid, device): pids differ between runs."""
    cols = ["pid", "device", "hidden_pct", "exposed_ns", "comm_gemm_attn_ns", "active_ns"]
    a = off.analysis.gpus.select(cols).with_row_index("gpu")
    b = on.analysis.gpus.select(cols).with_row_index("gpu")
    return a.join(b, on="gpu", how="full", suffix="_on", coalesce=True).rename(
        {c: f"{c}_off" for c in cols}
    )


def top_kernel_changes(off: Side, on: Side, top: int = 10) -> pl.DataFrame:
    """Kernel names whose summed duration changed most (name, class, off/on sum and count)."""
    joined = off.kernel_names.join(
        on.kernel_names, on=["name", "class"], how="full", suffix="_on", coalesce=True
    ).fill_null(0)
    return (
        joined.rename({"sum_ns": "sum_ns_off", "count": "count_off"})
        .with_columns((pl.col("sum_ns_on") - pl.col("sum_ns_off")).alias("delta_ns"))
        .sort([pl.col("delta_ns").abs(), pl.col("name")], descending=[True, False])
        .head(top)
    )


def top_nvtx_changes(off: Side, on: Side, top: int = 10) -> pl.DataFrame:
    joined = off.nvtx.join(on.nvtx, on="name", how="full", suffix="_on", coalesce=True).fill_null(0)
    return (
        joined.rename({"total_ns": "total_ns_off", "count": "count_off"})
        .with_columns((pl.col("total_ns_on") - pl.col("total_ns_off")).alias("delta_ns"))
        .sort([pl.col("delta_ns").abs(), pl.col("name")], descending=[True, False])
        .head(top)
    )
