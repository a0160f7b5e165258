"""Why HTA's figure and nsysmoe's differ on one trace: each convention of
:mod:`nsysmoe.peers.hta` that moves the figure here, with the kernels it touched, counted."""

from __future__ import annotations

import polars as pl

from nsysmoe.model import Trace
from nsysmoe.peers.hta_conventions import COMM, COMM_RE, LATE, MEMORY, NEITHER, NO_LAUNCH, NO_STEP


def reasons(
    trace: Trace, k: pl.DataFrame, steps: frozenset[str], gpus: pl.DataFrame
) -> tuple[str, ...]:
    """The conventions that move HTA's figure away from nsysmoe's on this trace, with counts."""
    out: list[str] = []
    if trace.source_format != "kineto-json":
        out.append(
            f"HTA reads only PyTorch profiler JSON; for this {trace.source_format} trace these are "
            "the figures HTA would give on the same kernels exported at ns resolution"
        )
    is_comm = pl.col("class") == "comm"
    for hta_type, sub in k.filter(is_comm & (pl.col("hta_type") != COMM)).group_by(
        "hta_type", maintain_order=True
    ):
        out.append(
            f"HTA counts {len(sub)} kernels nsysmoe classes as communication "
            f"({_by_subclass(sub)}) as {hta_type[0]}: its only communication rule is {COMM_RE}"
        )
    extra = k.filter(~is_comm & (pl.col("hta_type") == COMM))
    if len(extra):
        out.append(
            f"HTA counts {len(extra)} kernels matching {COMM_RE} as communication that nsysmoe "
            f"classes as compute ({_by_subclass(extra)})"
        )
    left_out = k.filter(~is_comm & pl.col("hta_type").is_in([MEMORY, NEITHER]))
    if len(left_out):
        out.append(
            f"HTA leaves out {len(left_out)} kernels named like copies or syncs (Memcpy/Memset/dma "
            "prefix, or Memcpy/Sync inside) that nsysmoe counts as compute"
        )
    out += _filter_reasons(trace, k, steps)
    off = k.filter((pl.col("start") % 1000 != 0) | (pl.col("end") % 1000 != 0))
    if len(off):
        gone = off.filter((pl.col("end_us") <= pl.col("ts_us")) & (pl.col("end") > pl.col("start")))
        out.append(
            f"timestamps rounded to µs: {len(off)} kernels not on whole µs shrink to "
            f"[ceil(start), floor(end)), {len(gone)} of them (shorter than a µs) vanish"
        )
    pooled = gpus.group_by("pid").len().filter(pl.col("len") > 1)["pid"].sort().to_list()
    if pooled:
        out.append(
            f"HTA pools the GPUs of a rank: pid {', '.join(map(str, pooled))} drives several GPUs, "
            "nsysmoe measures each GPU alone"
        )
    nan = gpus.filter(pl.col("hta_overlap_pct").is_nan())
    for row in nan.iter_rows(named=True):
        ours = "none either" if row["hidden_pct"] is None else f"{row['hidden_pct']:.2f} % hidden"
        out.append(
            f"HTA reports NaN for pid {row['pid']} device {row['device']}: it sees no "
            f"communication kernels; nsysmoe measures {ours}"
        )
    return tuple(out)


def _by_subclass(df: pl.DataFrame) -> str:
    counts = df.group_by("subclass").len().sort(["len", "subclass"], descending=[True, False])
    return ", ".join(f"{n} {sub}" for sub, n in counts.iter_rows())


def _filter_reasons(trace: Trace, k: pl.DataFrame, steps: frozenset[str]) -> list[str]:
    names = ", ".join(sorted(steps)) or "none"
    if len(steps) < 2:
        return [
            f"HTA drops no kernels: it drops the last ProfilerStep only when two or more are "
            f"named, this trace names {len(steps)} ({names})"
        ]
    out = []
    dropped = k.filter(~pl.col("kept"))
    late = dropped.filter(pl.col("dropped_because") == LATE)
    if len(late):
        last = trace.nvtx.filter(pl.col("name").is_in(list(steps))).sort("start")["name"][-1]
        out.append(
            f"last ProfilerStep dropped: {len(late)} kernels launched at or after {last} "
            "starts left out"
        )
    no_launch = dropped.filter(pl.col("dropped_because") == NO_LAUNCH)
    if len(no_launch):
        out.append(f"{len(no_launch)} kernels without launch in the trace dropped")
    no_step = dropped.filter(pl.col("dropped_because") == NO_STEP)
    if len(no_step):
        out.append(f"{len(no_step)} kernels of ranks naming no ProfilerStep dropped")
    return out
