"""CUDA graphs: how they were traced, how much GPU time ran in them, and what cannot be seen.

nsys traces a graph replay either as one row for the whole replay (``--cuda-graph-trace=graph``,
its default: the kernels inside are not recorded) or as the replay's kernels, every one carrying
the ``cudaGraphLaunch`` call's correlation id (``node``; Kineto records graphs this way too).
Whole-graph rows are GPU work like any kernel: they count in the active union and as compute
(class ``graph``), but whatever communication ran inside them is invisible, so the report says
how much time that is and how to record it.

Definitions (per GPU, over the analysis window; :class:`~nsysmoe.results.Graphs` sums the GPUs):

* ``replays``: distinct graph launches with GPU work (``(pid, corr_id)`` of graph rows)
* ``whole_rows``/``whole_ns``: whole-graph rows and |⋃ of them|; ``unknown_ns``: |⋃| of those no
  rule named (class ``graph``), whose contents nothing in the export describes
* ``node_kernels``/``node_ns``: kernels that ran as graph nodes and |⋃ of them|;
  ``node_comm_ns``: |⋃| of the communication kernels among them

NVTX ranges pushed while a graph was being captured (between ``cudaStreamBeginCapture`` and
``cudaStreamEndCapture`` on the same thread) exist once, at capture time: the launches inside
them ran nothing. Their replays' work belongs to the ranges around ``cudaGraphLaunch``; the
capture-time ranges are listed so the report can say so.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from nsysmoe.classify import GRAPH
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import COMM
from nsysmoe.model import Trace, Window
from nsysmoe.results import Graphs

PER_GPU_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "replays": pl.Int64,
    "whole_rows": pl.Int64,
    "whole_ns": pl.Int64,
    "unknown_ns": pl.Int64,
    "node_kernels": pl.Int64,
    "node_ns": pl.Int64,
    "node_comm_ns": pl.Int64,
}


def _union(df: pl.DataFrame) -> int:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy()).length


def gpu_graphs(kernels: pl.DataFrame) -> dict[str, int]:
    """The :data:`PER_GPU_SCHEMA` figures of one GPU's windowed, classified kernel rows."""
    whole = kernels.filter(pl.col("graph") == "whole")
    nodes = kernels.filter(pl.col("graph") == "node")
    ids = pl.concat([whole["corr_id"], nodes["corr_id"]])
    return {
        # a replay is one launch: its corr id (unique within the pid); a row without one is one
        "replays": ids.drop_nulls().n_unique() + ids.null_count(),
        "whole_rows": len(whole),
        "whole_ns": _union(whole),
        "unknown_ns": _union(whole.filter(pl.col("class") == GRAPH)),
        "node_kernels": len(nodes),
        "node_ns": _union(nodes),
        "node_comm_ns": _union(nodes.filter(pl.col("class") == COMM)),
    }


def capture_ranges(trace: Trace) -> pl.DataFrame:
    """NVTX ranges that started while their thread was capturing a graph: (name, count)."""
    api = trace.runtime.filter(pl.col("api").is_in(["capture_begin", "capture_end"]))
    schema = {"name": pl.String, "count": pl.Int64}
    begins = api.filter(pl.col("api") == "capture_begin").select("tid", "start").sort("start")
    if begins.is_empty() or trace.nvtx.is_empty():
        return pl.DataFrame(schema=schema)
    ends = api.filter(pl.col("api") == "capture_end").select("tid", pl.col("end").alias("until"))
    captures = begins.join_asof(
        ends.sort("until"), left_on="start", right_on="until", by="tid", strategy="forward",
        check_sortedness=False,
    ).rename({"start": "since"})
    ranges = trace.nvtx.select("tid", "name", "start").sort("start")
    found = ranges.join_asof(
        captures.sort("since"), left_on="start", right_on="since", by="tid", strategy="backward",
        check_sortedness=False,
    ).filter(pl.col("since").is_not_null() & (pl.col("until").is_null()
                                               | (pl.col("start") <= pl.col("until"))))
    return found.group_by("name").len("count").sort(["count", "name"], descending=[True, False])


def _traced(whole_rows: int, node_kernels: int) -> str:
    modes = [mode for mode, n in (("graph", whole_rows), ("node", node_kernels)) if n]
    return "+".join(modes) or "none"


def combined(parts: Sequence[Graphs]) -> Graphs:
    """Several traces' (ranks') graph figures as one: sums, per-GPU rows stacked, capture-time
    ranges counted together; ``recorded`` keeps each option's distinct values."""
    rows = pl.concat([p.per_gpu for p in parts]) if parts else pl.DataFrame(schema=PER_GPU_SCHEMA)
    sums = {c: int(rows[c].sum()) for c in PER_GPU_SCHEMA if c not in ("pid", "device")}
    recorded: dict[str, list[str]] = {}
    captured: dict[str, int] = {}
    for p in parts:
        for key, value in p.recorded.items():
            values = recorded.setdefault(key, [])
            values += [v for v in value.split(", ") if v not in values]
        for name, n in p.capture_nvtx:
            captured[name] = captured.get(name, 0) + n
    return Graphs(
        recorded={k: ", ".join(v) for k, v in sorted(recorded.items())},
        traced=_traced(sums["whole_rows"], sums["node_kernels"]),
        per_gpu=rows,
        capture_nvtx=tuple(sorted(captured.items(), key=lambda kv: (-kv[1], kv[0]))),
        **sums,
    )


def graph_summary(trace: Trace, kernels: pl.DataFrame, window: Window) -> Graphs:
    """How CUDA graphs were traced and what ran in them over ``window`` (module docstring)."""
    if "graph" not in kernels.columns or kernels["graph"].null_count() == len(kernels):
        rows = pl.DataFrame(schema=PER_GPU_SCHEMA)
    else:
        inside = window.select(kernels.filter(pl.col("graph").is_not_null()))
        parts = inside.partition_by("pid", "device", as_dict=True)
        rows = pl.DataFrame(
            [{"pid": k[0], "device": k[1], **gpu_graphs(p)} for k, p in sorted(parts.items())],
            schema=PER_GPU_SCHEMA,
            orient="row",
        )
    sums = {c: int(rows[c].sum()) for c in PER_GPU_SCHEMA if c not in ("pid", "device")}
    captured = capture_ranges(trace)
    return Graphs(
        recorded=dict(trace.graph_trace),
        traced=_traced(sums["whole_rows"], sums["node_kernels"]),
        per_gpu=rows,
        capture_nvtx=tuple(captured.iter_rows()),
        **sums,
    )
