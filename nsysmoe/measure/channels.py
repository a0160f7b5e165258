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

How (:func:`sweep_sorted`): per GPU, the kernels are put in start order once; each channel's
intervals are merged from that order, their overlap with the compute and GEMM/attention unions
comes from prefix sums of those unions, and the time only one channel covers from one sweep over
the merged intervals. Nothing loops per channel, so the same
code measures hundreds of phases (:mod:`nsysmoe.measure.phases`). Iteration windows are bins
(rows are first clipped to the windows they meet), so all iterations come from the same sorts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.intervals import by_group, grouped_runs, sorted_runs, start_order
from nsysmoe.measure.iterations import assign_rows
from nsysmoe.measure.overlap import (
    COMM_CODE,
    GEMM_ATTN_CODES,
    NULL_CODE,
    Arrays,
    by_gpu,
    class_code,
    gpu_keys,
    hidden_pct_expr,
)
from nsysmoe.model import CHANNEL_ORDER, WHOLE_TRACE, Window

SUMS = ("count", "comm_ns", "hidden_ns", "comm_gemm_attn_ns", "exposed_only_ns")
METRICS = ("count", "comm_ns", "hidden_ns", "exposed_ns", "hidden_pct", "comm_gemm_attn_ns",
           "exposed_only_ns")  # fmt: skip
_TYPES = {c: pl.Int64 for c in METRICS} | {"hidden_pct": pl.Float64}
CHANNEL_SCHEMA: dict[str, pl.DataType] = {"pid": pl.Int64, "device": pl.Int64,
                                          "channel": pl.String, **_TYPES}  # fmt: skip
STEP_CHANNEL_SCHEMA: dict[str, pl.DataType] = {"step": pl.Int64, "channel": pl.String, **_TYPES}
TOTAL_CHANNEL_SCHEMA: dict[str, pl.DataType] = {"channel": pl.String, **_TYPES}


def channel_rank(channel: pl.Expr) -> pl.Expr:
    """Sort key putting the vocabulary first, in :data:`CHANNEL_ORDER` (then sort by the name:
    the table's form of :func:`~nsysmoe.model.channel_order_key`)."""
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


def _covered_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """|U ∩ (−∞, t)| for each t, U the disjoint sorted intervals (starts, ends): prefix sums."""
    if starts.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(ends - starts)))
    j = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
    k = np.maximum(j - 1, 0)
    part = np.where(j > 0, np.minimum(t, ends[k]) - starts[k], 0)
    return np.where(j > 0, cum[k] + part, 0)


def _union_runs(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of rows sorted by start as disjoint sorted runs."""
    keep = e > s
    return sorted_runs(s[keep], e[keep])


Sums = dict[str, np.ndarray]


def sweep_sorted(s: np.ndarray, e: np.ndarray, code: np.ndarray, is_k: np.ndarray,
                 is_g: np.ndarray, n_channels: int, n_bins: int) -> Sums:  # fmt: skip
    """Per (bin, channel) sums: ``comm_ns``, ``hidden_ns``, ``comm_gemm_attn_ns``,
    ``exposed_only_ns`` (arrays of shape n_bins × n_channels), from rows in start order:
    ``code`` = bin × n_channels + channel of a communication row (−1 otherwise), ``is_k``:
    compute rows, ``is_g``: GEMM/attention rows. Rows of different bins must not overlap in
    time (clipped to disjoint windows).

    The cost does not grow with the number of channels: each (bin, channel)'s intervals are
    merged once from the one start order (a stable sort by code keeps it within a code), their
    overlap with the compute and GEMM/attention unions comes from prefix sums, and the time
    only one channel covers from one sweep whose running sum of channel codes names it.
    """
    shape = (n_bins, n_channels)
    out = {k: np.zeros(shape, dtype=np.int64) for k in SUMS if k != "count"}
    comm = code >= 0
    if not comm.any() or n_channels == 0:
        return out
    ks, ke = _union_runs(s[is_k], e[is_k])
    gs, ge = _union_runs(s[is_g], e[is_g])
    cs, ce, cc = s[comm], e[comm], code[comm]
    by_code = by_group(cc)
    c, ms, me = grouped_runs(cc[by_code], cs[by_code], ce[by_code])
    if c.size == 0:
        return out
    size = n_bins * n_channels

    def per_code(values: np.ndarray, codes: np.ndarray = c) -> np.ndarray:
        return _sum_by(codes, values, size).reshape(shape)

    out["comm_ns"] = per_code(me - ms)
    out["hidden_ns"] = per_code(_covered_before(ks, ke, me) - _covered_before(ks, ke, ms))
    out["comm_gemm_attn_ns"] = per_code(_covered_before(gs, ge, me)
                                        - _covered_before(gs, ge, ms))  # fmt: skip
    # time covered by exactly one (bin, channel) group: the running code sum names it
    t = np.concatenate([ms, me])
    delta = np.concatenate([np.ones(c.size, np.int64), -np.ones(c.size, np.int64)])
    codes = np.concatenate([c, c]).astype(np.int64)
    order = np.argsort(t, kind="stable")
    t, delta, codes = t[order], delta[order], codes[order]
    active, named = np.cumsum(delta), np.cumsum(delta * codes)
    lo, hi = t[:-1], t[1:]
    alone = (active[:-1] == 1) & (hi > lo)
    lo, hi, who = lo[alone], hi[alone], named[:-1][alone]
    exposed = (hi - lo) - (_covered_before(ks, ke, hi) - _covered_before(ks, ke, lo))
    out["exposed_only_ns"] = per_code(exposed, who)
    return out


def _sum_by(codes: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per code 0..size-1 (bincount would add in float64)."""
    order = by_group(codes)
    codes, values = codes[order], values[order]
    out = np.zeros(size, dtype=np.int64)
    if codes.size:
        first = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
        out[codes[first]] = np.add.reduceat(values.astype(np.int64), first)
    return out


def _channel_codes(kernels: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """pid, device, start, end, class ``code`` and ``ch`` (index of the channel in the returned
    list of every channel present; −1 unless communication), in table order."""
    channel = pl.col("channel") if "channel" in kernels.columns else pl.lit(None, pl.String)
    narrow = kernels.select("pid", "device", "start", "end", class_code(),
                            channel.alias("channel"))  # fmt: skip
    comm = pl.col("code") == COMM_CODE
    named = pl.col("channel").fill_null("other")  # a channel no rule named: "other"
    channels = sorted(narrow.filter(comm).select(named.unique()).to_series().to_list())
    other = channels.index("other") if "other" in channels else -1
    # codes, not strings, over every row: the null channel becomes "other" by its index
    index = pl.col("channel").cast(pl.Enum(channels), strict=False).to_physical()
    ch = pl.when(comm).then(index.cast(pl.Int64).fill_null(other)).otherwise(-1)
    return narrow.with_columns(ch.alias("ch")).drop("channel"), channels


@dataclass(frozen=True)
class CodedKernels:
    """Kernels as the channel sweeps read them: per GPU (pid, device), numpy arrays start, end,
    class ``code`` and channel index ``ch`` (−1 unless communication) in table order, and the
    channels' names. Made once (:func:`coded_kernels`), it serves the per-GPU channel table and
    the per-iteration one (read only: two threads may share it)."""

    parts: dict[tuple[int, int], Arrays]
    channels: list[str]


def coded_kernels(kernels: pl.DataFrame) -> CodedKernels:
    """The classified ``kernels`` (``class``, ``channel``) as :class:`CodedKernels`."""
    narrow, channels = _channel_codes(kernels)
    return coded_rows(narrow, channels)


def _as_coded(kernels: pl.DataFrame | CodedKernels) -> CodedKernels:
    return kernels if isinstance(kernels, CodedKernels) else coded_kernels(kernels)


def coded_rows(narrow: pl.DataFrame, channels: list[str]) -> CodedKernels:
    """:class:`CodedKernels` of rows coded (and windowed) as :func:`_channel_codes` codes them
    (pid, device, start, end, class ``code``, ``ch``: index in ``channels``, −1 unless
    communication): labels that are not kernel channels (phases) skip the string coding."""
    parts = by_gpu(narrow.select("pid", "device", "start", "end", "code", "ch"), gpu_keys(narrow))
    return CodedKernels(parts, channels)


def _sweep_arrays(s: np.ndarray, e: np.ndarray, code: np.ndarray, ch: np.ndarray,
                  n_channels: int, bins: np.ndarray | None = None,
                  n_bins: int = 1) -> dict[str, np.ndarray]:  # fmt: skip
    """:func:`sweep_sorted` on one GPU's rows in any order (class ``code`` as
    :func:`~nsysmoe.measure.overlap.class_code` gives, channel index ``ch``, bin ``bins``)."""
    order = start_order(s)
    s, e, code, ch = s[order], e[order], code[order], ch[order]
    comm = code == COMM_CODE
    group = ch if bins is None else bins[order] * n_channels + ch
    return sweep_sorted(s, e, np.where(comm, group, -1), ~comm & (code != NULL_CODE),
                        np.isin(code, GEMM_ATTN_CODES), n_channels, n_bins)  # fmt: skip


def channel_table(kernels: pl.DataFrame | CodedKernels,
                  window: Window | None = None) -> pl.DataFrame:  # fmt: skip
    """Per (pid, device, channel) of every channel present (:data:`CHANNEL_SCHEMA`); kernels
    must carry ``class`` (and ``channel``), or be coded already (:func:`coded_kernels`). Python
    loops run per GPU and channel only."""
    coded = _as_coded(kernels)
    window = window or WHOLE_TRACE
    channels = coded.channels
    rows = []
    for (pid, device), k in coded.parts.items():
        s, e, code, ch = _in_window(k, window)
        comm = code == COMM_CODE
        counts = np.bincount(ch[comm], minlength=len(channels))
        if not comm.any():
            continue
        sums = _sweep_arrays(s, e, code, ch, len(channels))
        for i in np.flatnonzero(counts).tolist():
            rows.append({"pid": pid, "device": device, "channel": channels[i],
                         "count": int(counts[i]),
                         **{name: int(a[0, i]) for name, a in sums.items()}})  # fmt: skip
    schema = {c: CHANNEL_SCHEMA[c] for c in ("pid", "device", "channel", *SUMS)}
    return _finish(pl.DataFrame(rows, schema=schema, orient="row"), ["pid", "device"],
                   CHANNEL_SCHEMA)  # fmt: skip


def _in_window(k: Arrays, window: Window) -> tuple[np.ndarray, ...]:
    """One GPU's start, end, code and ch over ``window``: the rows
    :meth:`~nsysmoe.model.Window.select` keeps, clipped to it."""
    s, e, code, ch = k["start"], k["end"], k["code"], k["ch"]
    if not window.bounded:
        return s, e, code, ch
    lo, hi = window.bounds()
    keep = np.flatnonzero(((e > lo) | (s >= lo)) & (s < hi))
    return (np.clip(s[keep], lo, hi), np.clip(e[keep], lo, hi), code[keep], ch[keep])


#: :func:`process_channel_iterations`: per (pid, step, channel), the process's GPUs summed
PROCESS_STEP_CHANNEL_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "step": pl.Int64, "channel": pl.String, **{c: pl.Int64 for c in SUMS},
}  # fmt: skip


def process_channel_iterations(kernels: pl.DataFrame | CodedKernels,
                               windows: pl.DataFrame) -> pl.DataFrame:  # fmt: skip
    """Per (pid, step, channel) with a kernel, the sums (:data:`SUMS`) over the process's GPUs;
    ``windows`` are each process's iteration windows (pid, step, start_ns, end_ns), as the
    iteration table measures them (:func:`nsysmoe.measure.steps.process_windows`). A kernel
    crossing a window boundary counts in both windows, each with its part. A process's rows
    are what it alone gives: an A/B's per-rank values read them. ``kernels``: as
    :func:`channel_table` takes them."""
    coded = _as_coded(kernels)
    channels, parts = coded.channels, coded.parts
    n_ch = len(channels)
    keys = list(parts)
    frames = []
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        w = w.sort("start_ns")
        lo, hi = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        steps = w["step"].to_numpy()
        for key in [k for k in keys if k[0] == pid]:
            k = parts[key]
            rows, win, s, e = assign_rows(k["start"], k["end"], lo, hi)
            code, ch = k["code"][rows], k["ch"][rows]
            comm = code == COMM_CODE
            if not comm.any() or n_ch == 0:
                continue
            sums = _sweep_arrays(s, e, code, ch, n_ch, win, len(w))
            counts = np.bincount(win[comm] * n_ch + ch[comm], minlength=len(w) * n_ch)
            at = np.flatnonzero(counts)
            names = [channels[i] for i in (at % n_ch).tolist()]
            frames.append(pl.DataFrame({
                "pid": np.full(at.size, pid, np.int64), "step": steps[at // n_ch],
                "channel": names, "count": counts[at],
                **{n: a.reshape(-1)[at] for n, a in sums.items()}}))  # fmt: skip
    if not frames:
        return pl.DataFrame(schema=PROCESS_STEP_CHANNEL_SCHEMA)
    table = pl.concat(frames).group_by("pid", "step", "channel").agg(pl.col(*SUMS).sum())
    return table.cast(PROCESS_STEP_CHANNEL_SCHEMA)


def channel_iterations(kernels: pl.DataFrame, windows: pl.DataFrame, *,
                       per_process: pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """Per (step, channel), all GPUs together (:data:`STEP_CHANNEL_SCHEMA`): the processes'
    :func:`process_channel_iterations` (``per_process``, when known) added up."""
    if per_process is None:
        per_process = process_channel_iterations(kernels, windows)
    if per_process.is_empty():
        return pl.DataFrame(schema=STEP_CHANNEL_SCHEMA)
    table = per_process.group_by("step", "channel").agg(pl.col(*SUMS).sum())
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
