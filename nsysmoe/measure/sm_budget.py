"""The SM budget: how many of a GPU's SMs each communication channel's kernels hold, what that
leaves for compute, and the compute kernels that ran beside them against what was left.

Definitions (per GPU, over the window; S = the GPU's SM count, a kernel k launches B_k thread
blocks of T_k threads, R_k registers per thread, M_k bytes of shared memory per block):

* ``per_sm_k`` = the blocks of k one SM holds at once: min(max blocks per SM, ⌊max threads per
  SM / T_k⌋, ⌊registers per SM / (R_k·T_k)⌋, ⌊shared memory per SM / M_k⌋) — the occupancy
  limits the export records (Kineto has no blocks-per-SM limit), those unknown and allocation
  granularity left out, so it is never below the true one; null where none is known
* ``sms_held_k`` = min(B_k, S): the SMs k holds. The hardware spreads a grid's blocks over the
  free SMs before it stacks a second block on one, so a grid of at most S blocks launched beside
  running work takes one SM per block; this is why DeepEP's ``num_sms`` and NCCL's channels are
  counts of blocks. It is the bound reported: the SMs compute cannot use while k runs.
* ``sms_min_k`` = ⌈min(B_k, S·per_sm_k) / per_sm_k⌉: the fewest SMs k could be packed into, given
  only the occupancy limits (the other bound; reported beside it, never used for "held")
* per channel: ``blocks`` = the most common known B_k (ties: the larger), with ``blocks_min``,
  ``blocks_max`` and ``launch_shapes`` (distinct B_k); ``sms_held`` and ``sms_min`` at that B_k
* ``comm_sms_avg`` = ∫ min(S, Σ_{comm k running at t} sms_held_k) dt / |⋃C|: the SMs
  communication held on average while any ran; ``sms_left`` = S − comm_sms_avg; and
  ``comm_sm_pct`` = 100 · ∫ … dt / (S · the GPU's span in the window, first kernel start to
  last kernel end): communication's share of the GPU's SM-time; all three unknown (null) on a
  GPU where the SM count or any communication kernel's grid is
* beside: each compute kernel that overlaps ⋃C, its time under communication (``beside_ns`` =
  |k ∩ ⋃C|), the most SMs communication held at once while it ran (``comm_sms``, clipped to
  S) and what that left (``sms_left`` = S − comm_sms):
  the grouped GEMM of 112 blocks on a 132-SM H800 beside DeepEP's 20 was sized for what the
  dispatcher leaves

Kernels are clipped to the window first. Everything is integer numpy per GPU: one sort of the
communication kernels' start and end events, a prefix sum, and a range-maximum table for the
beside query; no loop per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.intervals import covered_before, sorted_runs, start_order
from nsysmoe.measure import inflation
from nsysmoe.measure.under_comm import UnderComm, under_comm
from nsysmoe.model import Window
from nsysmoe.results import SmBudget

#: per (pid, device, channel): the SM budget of a channel's kernels
SM_BUDGET_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "channel": pl.String, "count": pl.Int64,
    "blocks": pl.Int64, "blocks_min": pl.Int64, "blocks_max": pl.Int64,
    "launch_shapes": pl.Int64, "sms_held": pl.Int64, "sms_min": pl.Int64, "sm_count": pl.Int64,
}  # fmt: skip
#: per (pid, device): communication's SMs over time
SM_SHARE_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "sm_count": pl.Int64, "comm_ns": pl.Int64,
    "comm_sms_avg": pl.Float64, "sms_left": pl.Float64, "comm_sm_pct": pl.Float64,
}  # fmt: skip
#: per (name, class, blocks, comm_sms, sm_count) over the trace's GPUs: compute beside comm
BESIDE_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String, "class": pl.String, "blocks": pl.Int64, "comm_sms": pl.Int64,
    "sm_count": pl.Int64, "sms_left": pl.Int64, "count": pl.Int64, "beside_ns": pl.Int64,
}  # fmt: skip
#: the most compute kernel shapes the beside table keeps (by time beside communication)
BESIDE_ROWS = 20

#: the GPU columns the occupancy bound reads (nsysmoe.model.GPU_SCHEMA)
_LIMITS = ("max_threads_per_sm", "max_blocks_per_sm", "registers_per_sm", "shared_bytes_per_sm")


def per_sm() -> pl.Expr:
    """Blocks of a kernel one SM holds at once, from the occupancy limits of its GPU (the
    columns of :data:`_LIMITS`, joined to the kernels): the least of those known (one unknown
    is not applied, so this stays at or above the true figure); null where none is known or
    the kernel's threads per block are not."""
    threads, regs, smem = pl.col("threads"), pl.col("registers"), pl.col("shared_bytes")
    limits = [
        pl.col("max_blocks_per_sm"),
        pl.col("max_threads_per_sm") // threads,
        pl.when(regs > 0).then(pl.col("registers_per_sm") // (regs * threads)),
        pl.when(smem > 0).then(pl.col("shared_bytes_per_sm") // smem),
    ]
    least = pl.min_horizontal(limits)
    return pl.when((threads > 0) & least.is_not_null()).then(pl.max_horizontal(least, 1))


def with_sms(kernels: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """The kernels with their GPU's ``sm_count`` and their ``sms_held`` and ``sms_min`` (null
    where the SM count or the kernel's grid is unknown; ``sms_min`` also where an occupancy
    limit is)."""
    limits = gpus.select("pid", "device", "sm_count", *_LIMITS)
    df = kernels.join(limits, on=["pid", "device"], how="left")
    fit = per_sm()
    known = (pl.col("blocks") > 0) & pl.col("sm_count").is_not_null()
    packed = (pl.min_horizontal(pl.col("blocks"), pl.col("sm_count") * fit) + fit - 1) // fit
    return df.with_columns(
        pl.when(known).then(pl.min_horizontal("blocks", "sm_count")).alias("sms_held"),
        pl.when(known).then(packed).alias("sms_min"),
    ).drop(_LIMITS)


def channel_budget(comm: pl.DataFrame) -> pl.DataFrame:
    """Per (pid, device, channel): :data:`SM_BUDGET_SCHEMA` from the communication kernels
    (:func:`with_sms` columns), the most common block count and the SMs held at it."""
    keys = ["pid", "device", "channel"]
    shapes = (
        comm.filter(pl.col("blocks").is_not_null())
        .group_by(*keys, "blocks").agg(pl.len().alias("n"), pl.col("sms_held").first(),
                                       pl.col("sms_min").max())  # fmt: skip
        .sort([*keys, "n", "blocks"], descending=[False, False, False, True, True])
    )
    mode = shapes.group_by(keys, maintain_order=True).first()
    spread = comm.group_by(keys).agg(
        pl.len().alias("count"), pl.col("blocks").min().alias("blocks_min"),
        pl.col("blocks").max().alias("blocks_max"),
        pl.col("blocks").drop_nulls().n_unique().alias("launch_shapes"),
        pl.col("sm_count").first(),
    )  # fmt: skip
    out = spread.join(mode.select(*keys, "blocks", "sms_held", "sms_min"), on=keys, how="left")
    return out.select(list(SM_BUDGET_SCHEMA)).cast(SM_BUDGET_SCHEMA).sort(keys)


def _levels(s: np.ndarray, e: np.ndarray, held: np.ndarray, sms: int
            ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The SMs communication holds over time, clipped to ``sms``: breakpoints ``t`` (sorted,
    distinct) and the level on [t[i], t[i+1]) (0 before t[0] and from the last on)."""
    times = np.concatenate((s, e))
    deltas = np.concatenate((held, -held))
    order = np.lexsort((deltas, times))  # at one instant ends first: [a, t) and [t, b) apart
    times, level = times[order], np.cumsum(deltas[order])
    last = np.flatnonzero(np.append(times[1:] != times[:-1], True))
    return times[last], np.minimum(level[last], sms)


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo[i]:hi[i] + 1]) for each i (lo ≤ hi): a sparse table, log n levels."""
    table = [values]
    width = 1
    while 2 * width <= values.size:
        prev = table[-1]
        table.append(np.maximum(prev[:-width], prev[width:]))
        width *= 2
    span = hi - lo + 1
    k = np.floor(np.log2(span)).astype(np.int64)
    out = np.empty(lo.size, dtype=values.dtype)
    for level in np.unique(k):  # one pass per power of two, not per query
        at = k == level
        row = table[level]
        out[at] = np.maximum(row[lo[at]], row[hi[at] - (1 << level) + 1])
    return out


@dataclass(frozen=True)
class Beside:
    """One GPU's compute kernels that overlap communication: their rows (``at``: indices into
    the compute kernels given), time under communication and the most SMs it held meanwhile
    (None where unknown)."""

    at: np.ndarray
    beside_ns: np.ndarray
    comm_sms: np.ndarray | None


def gpu_share(comm: pl.DataFrame, cs: np.ndarray, ce: np.ndarray, sms: int | None,
              span_ns: int, under: np.ndarray | None = None
              ) -> tuple[dict[str, object], Beside]:  # fmt: skip
    """One GPU's communication SMs over time (:data:`SM_SHARE_SCHEMA` values but its key; the
    share of SM-time over ``span_ns``, the GPU's kernels' span in the window) and its compute
    kernels (starts ``cs``, ends ``ce``; ``under``: their time under communication, where
    counted already) that overlap communication (:class:`Beside`). The share is unknown (null)
    where the SM count or any communication kernel's grid is."""
    s, e = comm["start"].to_numpy(), comm["end"].to_numpy()
    order = start_order(s)
    runs = sorted_runs(s[order], e[order])
    comm_ns = int((runs[1] - runs[0]).sum())
    row: dict[str, object] = {"sm_count": sms, "comm_ns": comm_ns, "comm_sms_avg": None,
                              "sms_left": None, "comm_sm_pct": None}  # fmt: skip
    if under is None:
        under = (covered_before(*runs, ce) - covered_before(*runs, cs)).astype(np.int64)
    at = np.flatnonzero(under > 0)
    if not sms or comm["sms_held"].null_count() or not comm_ns:
        return row, Beside(at, under[at], None)
    held = comm["sms_held"].to_numpy().astype(np.int64)
    t, level = _levels(s, e, held, sms)
    area = int((level[:-1] * np.diff(t)).sum())
    row |= {"comm_sms_avg": area / comm_ns, "sms_left": sms - area / comm_ns,
            "comm_sm_pct": 100.0 * area / (sms * span_ns) if span_ns > 0 else None}
    lo = np.searchsorted(t, cs[at], side="right") - 1  # the piece holding the start
    hi = np.searchsorted(t, ce[at], side="left") - 1  # the last piece starting before the end
    top = _range_max(level, np.maximum(lo, 0), np.maximum(hi, 0)) if at.size else at
    return row, Beside(at, under[at], top)


def sm_budget(kernels: pl.DataFrame, gpus: pl.DataFrame, window: Window,
              under: UnderComm | None = None
              ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """The SM budget of the window's kernels (classified, with their launch shape): per channel
    (:data:`SM_BUDGET_SCHEMA`), per GPU (:data:`SM_SHARE_SCHEMA`), and the compute kernels
    beside communication summed per shape (:data:`BESIDE_SCHEMA`, every row: the caller keeps
    the top ones once the parts are summed). ``under``: :func:`under_comm` of them, where read
    already. Only the communication kernels are joined to their GPU's limits; the compute
    kernels are read as numpy, their rows copied only where they met communication."""
    u = under_comm(kernels, window) if under is None else under
    comm = with_sms(u.comm, gpus)
    budget = channel_budget(comm)
    compute = u.compute
    pid, device = compute["pid"].to_numpy(), compute["device"].to_numpy()
    cs_all, ce_all = compute["start"].to_numpy(), compute["end"].to_numpy()
    under_all = compute["under"].to_numpy()
    shares, besides = [], []
    for key, c in sorted(comm.partition_by("pid", "device", as_dict=True).items()):
        sms = c["sm_count"][0]
        mine = np.flatnonzero((pid == key[0]) & (device == key[1]))  # a mask per GPU: few
        row, b = gpu_share(c, cs_all[mine], ce_all[mine], None if sms is None else int(sms),
                           u.spans[key], under_all[mine])  # fmt: skip
        shares.append({"pid": key[0], "device": key[1], **row})
        met = compute[mine[b.at]]
        rows = met.select(pl.col("name", "class").cast(pl.String), "blocks").with_columns(
            pl.Series("beside_ns", b.beside_ns, dtype=pl.Int64),
            pl.Series("comm_sms", b.comm_sms, dtype=pl.Int64) if b.comm_sms is not None
            else pl.lit(None, pl.Int64).alias("comm_sms"),
            pl.lit(sms, pl.Int64).alias("sm_count"))  # fmt: skip
        besides.append(rows)
    share = pl.DataFrame(shares, schema=SM_SHARE_SCHEMA) if shares else pl.DataFrame(
        schema=SM_SHARE_SCHEMA)
    return budget, share, beside_table(besides)


def beside_table(besides: list[pl.DataFrame]) -> pl.DataFrame:
    """The compute kernels beside communication per (name, class, blocks, comm_sms, sm_count):
    how many and their time (summed over GPUs: a part's rows add to another's)."""
    if not besides:
        return pl.DataFrame(schema=BESIDE_SCHEMA)
    df = pl.concat([b.select("name", "class", "blocks", "comm_sms", "sm_count", "beside_ns")
                    for b in besides])  # fmt: skip
    out = df.group_by("name", "class", "blocks", "comm_sms", "sm_count").agg(
        pl.len().alias("count"), pl.col("beside_ns").sum())
    return summed_beside(out)


def summed_beside(df: pl.DataFrame) -> pl.DataFrame:
    """Beside rows of several parts as one table (:data:`BESIDE_SCHEMA`), largest time first."""
    keys = ["name", "class", "blocks", "comm_sms", "sm_count"]
    out = df.group_by(keys).agg(pl.col("count").sum(), pl.col("beside_ns").sum())
    out = out.with_columns((pl.col("sm_count") - pl.col("comm_sms")).alias("sms_left"))
    return (out.select(list(BESIDE_SCHEMA)).cast(BESIDE_SCHEMA)
            .sort(["beside_ns", "name", "blocks", "comm_sms", "class", "sm_count"],
                  descending=[True, False, False, False, False, False],
                  nulls_last=True))  # fmt: skip


@dataclass(frozen=True)
class SmPart:
    """One part's (a process's, or the whole trace's) SM budget and inflation durations, as
    they add up over parts: per-GPU rows, beside sums, duration lists."""

    channels: pl.DataFrame
    gpus: pl.DataFrame
    beside: pl.DataFrame
    durations: pl.DataFrame

    @staticmethod
    def none() -> SmPart:
        return SmPart(pl.DataFrame(schema=SM_BUDGET_SCHEMA), pl.DataFrame(schema=SM_SHARE_SCHEMA),
                      pl.DataFrame(schema=BESIDE_SCHEMA),
                      pl.DataFrame(schema=inflation.DURATIONS_SCHEMA))  # fmt: skip


def measure_sm(kernels: pl.DataFrame, gpus: pl.DataFrame, window: Window) -> SmPart:
    """The SM budget and the inflation durations of a part's classified kernels."""
    under = under_comm(kernels, window)  # read once for both
    channels, share, beside = sm_budget(kernels, gpus, window, under)
    return SmPart(channels, share, beside, inflation.durations(kernels, window, under))


def merged_sm(parts: list[SmPart]) -> SmPart:
    """Parts (in pid order) as the whole trace's."""
    if len(parts) == 1:
        return parts[0]
    return SmPart(*(pl.concat([getattr(p, f) for p in parts])
                    for f in ("channels", "gpus", "beside", "durations")))  # fmt: skip


def finished(part: SmPart, hidden_ns: int) -> SmBudget:
    """The trace's :class:`~nsysmoe.results.SmBudget` from its summed parts."""
    beside = summed_beside(part.beside).head(BESIDE_ROWS)
    return SmBudget(part.channels, part.gpus, beside, inflation.inflation_table(part.durations),
                    hidden_ns)  # fmt: skip
