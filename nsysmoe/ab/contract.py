"""The measurement contract (seed workflow, Phase 0): only a comparison that holds is "matched".

Same GPU model and count, same ranks, same dispatcher, the same kernels (name multiset and counts),
the same NVTX range set and the same window length, and (where either side ran CUDA graphs) graphs
traced the same way; only the variable under test may change.
"""

from __future__ import annotations

import re

import polars as pl

from nsysmoe.results import Check, Contract, Side

SHOW = 3  # differing names listed per check
#: NVTX ranges of Megatron's EP A2A overlap schedule (--overlap-moe-expert-parallel-comm)
OVERLAP_SCHEDULE = re.compile(
    r"^(?:pre_dispatch_computation|moe_dispatch|mlp|moe_combine|mtp_post_process|attn|post_attn)"
    r" (?:forward|backward|wgrad)$|^layer_\d+[fb](?:-layer_\d+[fb])?$|^delayed_expert_wgrad$"
    r"|^\w+ wgrad$"
)


def _same(name: str, off: object, on: object) -> Check:
    return Check(name, str(off), str(on), off == on)


def kernel_check(off: Side, on: Side) -> Check:
    joined = off.kernel_names.select("name", pl.col("count").alias("off")).join(
        on.kernel_names.select("name", pl.col("count").alias("on")), on="name", how="full",
        coalesce=True,
    ).fill_null(0)  # fmt: skip
    diff = joined.filter(pl.col("off") != pl.col("on")).with_columns(
        (pl.col("on") - pl.col("off")).abs().alias("gap")
    )
    total_off, total_on = int(joined["off"].sum()), int(joined["on"].sum())
    if diff.is_empty():
        return Check("kernels", f"{total_off:,}", f"{total_on:,}", True)
    top = diff.sort(["gap", "name"], descending=[True, False]).head(SHOW)
    examples = ", ".join(
        f"{_short(r['name'])} {r['off']}→{r['on']}" for r in top.iter_rows(named=True)
    )
    detail = f"{len(diff)} kernel names differ in count (e.g. {examples})"
    return Check("kernels", f"{total_off:,}", f"{total_on:,}", False, detail)


def _names(names: set[str]) -> str:
    return ", ".join(sorted(names)[:SHOW]) + (", …" if len(names) > SHOW else "")


def nvtx_check(off: Side, on: Side) -> Check:
    """Same range names on both sides, except the ranges Megatron's EP-overlap schedule emits:
    they exist only with overlap on, i.e. they are the variable under test."""
    a, b = set(off.nvtx["name"]), set(on.nvtx["name"])
    schedule = {n for n in a ^ b if OVERLAP_SCHEDULE.search(n)}
    only_off, only_on = a - b - schedule, b - a - schedule
    notes = []
    if only_off:
        notes.append(f"{len(only_off)} only in off ({_names(only_off)})")
    if only_on:
        notes.append(f"{len(only_on)} only in on ({_names(only_on)})")
    if schedule:
        notes.append(f"{len(schedule)} EP-overlap schedule ranges on one side only, expected "
                     f"({_names(schedule)})")  # fmt: skip
    ok = not only_off and not only_on
    return Check("NVTX ranges", f"{len(a)} names", f"{len(b)} names", ok, "; ".join(notes))


def window_check(off: Side, on: Side) -> Check:
    n_off, n_on = len(off.analysis.iterations), len(on.analysis.iterations)
    detail = "" if n_off or n_on else "no iterations on either side: whole windows compared"
    return Check("window length", f"{n_off} iterations", f"{n_on} iterations", n_off == n_on,
                 detail)  # fmt: skip


def gpu_model_check(off: Side, on: Side) -> Check:
    a, b = ", ".join(sorted(set(off.gpu_models))), ", ".join(sorted(set(on.gpu_models)))
    detail = "GPU model not captured in the export" if "unknown" in (a, b) else ""
    return Check("GPU model", a, b, a == b, detail)


def graph_check(off: Side, on: Side) -> Check:
    """CUDA graphs traced the same way: whole-graph rows hide the communication inside them, so
    a side traced per graph and a side traced per node (or eager) measure different things."""
    a, b = off.analysis.graphs.traced, on.analysis.graphs.traced
    hidden = [label for label, g in (("off", off.analysis.graphs), ("on", on.analysis.graphs))
              if g.unknown_ns]  # fmt: skip
    detail = ""
    if hidden:
        detail = (f"whole-graph replays with unknown contents on {' and '.join(hidden)}: "
                  "communication inside them is not measured; record with "
                  "--cuda-graph-trace=node")  # fmt: skip
    return Check("CUDA graphs traced", a, b, a == b, detail)


def check_contract(off: Side, on: Side) -> Contract:
    graphs = (off.analysis.graphs.present or on.analysis.graphs.present)
    return Contract(
        (
            gpu_model_check(off, on),
            _same("GPU count", len(off.gpu_models), len(on.gpu_models)),
            _same("ranks", off.ranks, on.ranks),
            _same("dispatcher", off.dispatcher, on.dispatcher),
            kernel_check(off, on),
            nvtx_check(off, on),
            window_check(off, on),
            *([graph_check(off, on)] if graphs else []),
        )  # fmt: skip
    )


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
