"""Overlap per communication channel: how much of the dispatch, the combine, the DP all-reduce …
was hidden, exactly, per GPU and per iteration.

Definitions (per GPU, over the window; C_x = kernels of channel x, K = every compute kernel, i.e.
every kernel that is not communication, G = GEMM ∪ attention kernels, O = every other channel):

* ``count``: kernels of channel x; ``comm_ns`` = |⋃C_x|
* ``hidden_ns`` = |⋃C_x ∩ ⋃K|; ``exposed_ns`` = comm_ns − hidden_ns; ``hidden_pct`` =
  100 · hidden_ns / comm_ns (:func:`nsysmoe.measure.overlap.hidden_pct`)
* ``comm_gemm_attn_ns`` = |⋃C_x ∩ ⋃G|
* ``exposed_only_ns`` = |⋃C_x \\ (⋃K ∪ ⋃O)|: exposed time no other channel shares, so channels
  that run concurrently are not each charged for the same exposed nanosecond (the sum over
  channels is at most the GPU's ``exposed_ns``; the union of the channels is its ``comm_ns``)

How (:func:`sweep`): per GPU, each channel's intervals are merged once; their overlap with the
compute and GEMM/attention unions comes from prefix sums of those unions, and the time only one
channel covers from one sweep over the merged intervals. Nothing loops per channel, so the same
code measures hundreds of phases (:mod:`nsysmoe.measure.phases`). Iteration windows are bins
(rows are first clipped to the windows they meet), so all iterations come from the same sorts.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from nsysmoe.classify import COMPUTE_GEMM_ATTN
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.iterations import assign
from nsysmoe.measure.overlap import COMM, hidden_pct_expr
from nsysmoe.model import WHOLE_TRACE, Window

#: Report order of the channel vocabulary; a user's own channel names follow, sorted.
CHANNEL_ORDER = (
    "ep.dispatch",
    "ep.combine",
    "ep.sync",
    "nccl.allreduce",
    "nccl.reducescatter",
    "nccl.allgather",
    "nccl.broadcast",
    "nccl.sendrecv",
    "nccl.other",
    "tp.userbuffers",
    "other",
)
SUMS = ("count", "comm_ns", "hidden_ns", "comm_gemm_attn_ns", "exposed_only_ns")
METRICS = ("count", "comm_ns", "hidden_ns", "exposed_ns", "hidden_pct", "comm_gemm_attn_ns",
           "exposed_only_ns")  # fmt: skip
_TYPES = {c: pl.Int64 for c in METRICS} | {"hidden_pct": pl.Float64}
CHANNEL_SCHEMA: dict[str, pl.DataType] = {"pid": pl.Int64, "device": pl.Int64,
                                          "channel": pl.String, **_TYPES}  # fmt: skip
STEP_CHANNEL_SCHEMA: dict[str, pl.DataType] = {"step": pl.Int64, "channel": pl.String, **_TYPES}
TOTAL_CHANNEL_SCHEMA: dict[str, pl.DataType] = {"channel": pl.String, **_TYPES}
K, G = 0, 1  # category indices; channel i is category 2 + i


def channel_rank(channel: pl.Expr) -> pl.Expr:
    """Sort key putting the vocabulary first, in :data:`CHANNEL_ORDER`."""
    return channel.replace_strict(CHANNEL_ORDER, range(len(CHANNEL_ORDER)),
                                  default=len(CHANNEL_ORDER), return_dtype=pl.Int64)  # fmt: skip


def _finish(df: pl.DataFrame, keys: list[str], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """exposed_ns and hidden_pct from the sums; rows in key then channel order."""
    hidden, comm = pl.col("hidden_ns"), pl.col("comm_ns")
    return (
        df.with_columns((comm - hidden).alias("exposed_ns"),
                        hidden_pct_expr(hidden, comm).alias("hidden_pct"))  # fmt: skip
        .sort([*keys, channel_rank(pl.col("channel")), "channel"])
        .select(list(schema))
        .cast(schema)
    )


def _categories(kernels: pl.DataFrame, channels: list[str]) -> pl.DataFrame:
    """start, end, cat rows: compute kernels as K, GEMM/attention again as G, comm as 2+i."""
    is_comm = pl.col("class") == COMM
    index = pl.col("channel").replace_strict(channels, range(2, 2 + len(channels)),
                                             return_dtype=pl.Int64)  # fmt: skip
    cols = [c for c in ("window", "start", "end") if c in kernels.columns]
    return pl.concat([
        kernels.filter(~is_comm).select(*cols, pl.lit(K, pl.Int64).alias("cat")),
        kernels.filter(pl.col("class").is_in(COMPUTE_GEMM_ATTN))
        .select(*cols, pl.lit(G, pl.Int64).alias("cat")),
        kernels.filter(is_comm).select(*cols, index.cast(pl.Int64).alias("cat")),
    ])  # fmt: skip


def _merged(group: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per group, the union of its intervals as disjoint, non-touching ones (group, start, end),
    sorted by group then time: within a group starts and ends are sorted independently, as in
    :meth:`nsysmoe.intervals.IntervalSet.from_arrays`."""
    keep = e > s
    group, s, e = group[keep], s[keep], e[keep]
    if s.size == 0:
        return group, s, e
    by_start, by_end = np.lexsort((s, group)), np.lexsort((e, group))
    g, s, e = group[by_start], s[by_start], e[by_end]  # each group has as many ends as starts
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = (g[1:] != g[:-1]) | (s[1:] > e[:-1])
    closes = np.append(opens[1:], True)
    return g[opens], s[opens], e[closes]


def _covered_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """|U ∩ (−∞, t)| for each t, U the disjoint sorted intervals (starts, ends): prefix sums."""
    if starts.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(ends - starts)))
    j = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
    k = np.maximum(j - 1, 0)
    part = np.where(j > 0, np.minimum(t, ends[k]) - starts[k], 0)
    return np.where(j > 0, cum[k] + part, 0)


def sweep(rows: pl.DataFrame, n_channels: int, n_bins: int) -> dict[str, np.ndarray]:
    """Per (bin, channel) sums: ``comm_ns``, ``hidden_ns``, ``comm_gemm_attn_ns``,
    ``exposed_only_ns`` (arrays of shape n_bins × n_channels).

    ``rows``: start, end, cat and (with n_bins > 1) ``window``, the bin of each row; rows of
    different bins must not overlap in time (clipped to disjoint windows). The cost does not
    grow with the number of channels: each (bin, channel)'s intervals are merged once, their
    overlap with the compute and GEMM/attention unions comes from prefix sums, and the time
    only one channel covers from one sweep whose running sum of channel codes names it.
    """
    shape = (n_bins, n_channels)
    out = {k: np.zeros(shape, dtype=np.int64) for k in SUMS if k != "count"}
    if rows.is_empty() or n_channels == 0:
        return out
    s, e = rows["start"].to_numpy(), rows["end"].to_numpy()
    cat = rows["cat"].to_numpy()
    bins = rows["window"].to_numpy() if "window" in rows.columns else np.zeros(len(rows), np.int64)
    zero = np.zeros(0, dtype=np.int64)
    k_set = IntervalSet.from_arrays(s[cat == K], e[cat == K]) if (cat == K).any() else None
    g_set = IntervalSet.from_arrays(s[cat == G], e[cat == G]) if (cat == G).any() else None
    ks, ke = (k_set.starts, k_set.ends) if k_set is not None else (zero, zero)
    gs, ge = (g_set.starts, g_set.ends) if g_set is not None else (zero, zero)
    comm = cat >= 2
    code = bins[comm] * n_channels + (cat[comm] - 2)  # one group per (bin, channel)
    c, ms, me = _merged(code, s[comm], e[comm])
    if c.size == 0:
        return out
    size = n_bins * n_channels

    def per_code(values: np.ndarray, codes: np.ndarray = c) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=size).astype(np.int64).reshape(shape)

    out["comm_ns"] = per_code(me - ms)
    out["hidden_ns"] = per_code(_covered_before(ks, ke, me) - _covered_before(ks, ke, ms))
    out["comm_gemm_attn_ns"] = per_code(_covered_before(gs, ge, me)
                                        - _covered_before(gs, ge, ms))  # fmt: skip
    # time covered by exactly one (bin, channel) group: the running code sum names it
    t = np.concatenate([ms, me])
    delta = np.concatenate([np.ones(c.size, np.int64), -np.ones(c.size, np.int64)])
    codes = np.concatenate([c, c])
    order = np.argsort(t, kind="stable")
    t, delta, codes = t[order], delta[order], codes[order]
    active, named = np.cumsum(delta), np.cumsum(delta * codes)
    lo, hi = t[:-1], t[1:]
    alone = (active[:-1] == 1) & (hi > lo)
    lo, hi, who = lo[alone], hi[alone], named[:-1][alone]
    exposed = (hi - lo) - (_covered_before(ks, ke, hi) - _covered_before(ks, ke, lo))
    out["exposed_only_ns"] = per_code(exposed, who)
    return out


def _present(kernels: pl.DataFrame) -> list[str]:
    comm = kernels.filter(pl.col("class") == COMM)
    return comm.select(pl.col("channel").fill_null("other").unique())["channel"].to_list()


def _with_channel(kernels: pl.DataFrame) -> pl.DataFrame:
    if "channel" not in kernels.columns:  # classified before channels existed: one channel
        kernels = kernels.with_columns(pl.lit(None, pl.String).alias("channel"))
    comm = pl.col("class") == COMM
    return kernels.with_columns(
        pl.when(comm).then(pl.col("channel").fill_null("other")).alias("channel")
    )


def channel_table(kernels: pl.DataFrame, window: Window | None = None) -> pl.DataFrame:
    """Per (pid, device, channel) of every channel present (:data:`CHANNEL_SCHEMA`); kernels
    must carry ``class`` (and ``channel``). Python loops run per GPU and channel only."""
    kernels = _with_channel((window or WHOLE_TRACE).select(kernels))
    rows = []
    for (pid, device), k in sorted(kernels.partition_by("pid", "device", as_dict=True).items()):
        channels = _present(k)
        if not channels:
            continue
        sums = sweep(_categories(k, channels), len(channels), 1)
        counts = dict(k.filter(pl.col("class") == COMM).group_by("channel").len().iter_rows())
        for i, ch in enumerate(channels):
            rows.append({"pid": pid, "device": device, "channel": ch, "count": counts[ch],
                         **{name: int(a[0, i]) for name, a in sums.items()}})  # fmt: skip
    schema = {c: CHANNEL_SCHEMA[c] for c in ("pid", "device", "channel", *SUMS)}
    return _finish(pl.DataFrame(rows, schema=schema, orient="row"), ["pid", "device"],
                   CHANNEL_SCHEMA)  # fmt: skip


def channel_iterations(kernels: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Per (step, channel), all GPUs together (:data:`STEP_CHANNEL_SCHEMA`); ``windows`` are
    each process's iteration windows (pid, step, start_ns, end_ns), as the iteration table
    measures them (:func:`nsysmoe.measure.steps.process_windows`). A kernel crossing a window
    boundary counts in both windows, each with its part."""
    kernels = _with_channel(kernels)
    parts = []
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        w = w.sort("start_ns")
        lo, hi = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        of_pid = kernels.filter(pl.col("pid") == pid)
        for k in of_pid.partition_by("device"):
            clipped = assign(k.select("start", "end", "class", "channel"), lo, hi)
            channels = _present(clipped)
            if not channels:
                continue
            sums = sweep(_categories(clipped, channels), len(channels), len(w))
            counts = (clipped.filter(pl.col("class") == COMM).group_by("window", "channel").len()
                      .rename({"len": "count"}))  # fmt: skip
            for i, ch in enumerate(channels):
                part = pl.DataFrame({"window": np.arange(len(w)), "step": w["step"],
                                     "channel": [ch] * len(w),
                                     **{n: a[:, i] for n, a in sums.items()}})  # fmt: skip
                parts.append(part.join(counts, on=["window", "channel"], how="left"))
    if not parts:
        return pl.DataFrame(schema=STEP_CHANNEL_SCHEMA)
    table = pl.concat(parts, how="diagonal_relaxed").with_columns(pl.col("count").fill_null(0))
    table = table.group_by("step", "channel").agg(pl.col(*SUMS).sum())
    return _finish(table.filter(pl.col("count") > 0), ["step"], STEP_CHANNEL_SCHEMA)


def with_shares(table: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """The per-GPU channel table with ``exposed_pct_of_span`` and ``exposed_only_pct_of_span``:
    what each channel leaves exposed, as a share of its GPU's span (``gpus``: per-GPU table)."""
    span = pl.col("span_ns")
    return table.join(gpus.select("pid", "device", "span_ns"), on=["pid", "device"],
                      how="left", maintain_order="left").with_columns(
        pl.when(span > 0).then(100.0 * pl.col("exposed_ns") / span).alias("exposed_pct_of_span"),
        pl.when(span > 0).then(100.0 * pl.col("exposed_only_ns") / span)
        .alias("exposed_only_pct_of_span"),
    ).drop("span_ns")  # fmt: skip


def on_the_table(per_step: pl.DataFrame, iterations: pl.DataFrame,
                 gpus_per_step: pl.DataFrame) -> pl.DataFrame:  # fmt: skip
    """Per (step, channel): ``exposed_pct_of_step`` = exposed / (step period × GPUs) and
    ``step_if_hidden_ns`` = step period − exposed-only time per GPU: the step time if every
    exposed nanosecond of the channel that nothing else covers were hidden — an upper bound on
    the gain (work that depends on the communication may still wait)."""
    steps = iterations.select("step", "step_ns").join(gpus_per_step, on="step", how="left")
    n, step = pl.col("gpus").fill_null(1), pl.col("step_ns")
    return per_step.join(steps, on="step", how="left", maintain_order="left").with_columns(
        pl.when(step > 0).then(100.0 * pl.col("exposed_ns") / (step * n))
        .alias("exposed_pct_of_step"),
        (step - pl.col("exposed_only_ns") // n).alias("step_if_hidden_ns"),
    ).drop("step_ns")  # fmt: skip


def with_step_bounds(totals: pl.DataFrame, per_step: pl.DataFrame) -> pl.DataFrame:
    """All-GPU channel totals with ``median_step_if_hidden_ns``: the median over iterations of
    :func:`on_the_table`'s ``step_if_hidden_ns`` (null without iterations)."""
    if per_step.is_empty():
        return totals.with_columns(pl.lit(None, pl.Int64).alias("median_step_if_hidden_ns"))
    bound = per_step.group_by("channel").agg(
        pl.col("step_if_hidden_ns").median().round().cast(pl.Int64)
        .alias("median_step_if_hidden_ns"))  # fmt: skip
    return totals.join(bound, on="channel", how="left", maintain_order="left")


def channel_totals(table: pl.DataFrame) -> pl.DataFrame:
    """A per-GPU channel table summed over GPUs per channel (hidden % of the sums)."""
    if table.is_empty():
        return pl.DataFrame(schema=TOTAL_CHANNEL_SCHEMA)
    summed = table.group_by("channel").agg(pl.col(*SUMS).sum())
    return _finish(summed, [], TOTAL_CHANNEL_SCHEMA)
