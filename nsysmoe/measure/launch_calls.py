"""Each GPU op's launching CUDA API call, joined once per trace and shared.

Step detection, the idle split, phase membership and NVTX projection all need, for every kernel
and memcpy/memset, the runtime row with the same ``(pid, corr_id)`` (correlation ids restart per
process, so the pid is part of the key). The join is done here once per :class:`Trace` object
(:func:`launches_of` caches it for as long as the trace lives) on one combined int64 key, with
no ``unique`` unless the runtime table really repeats a key.

When several runtime rows share a ``(pid, corr_id)`` the earliest start, then the smallest tid,
then the smallest end stands for the call (:func:`nsysmoe.measure.idle.launch_starts`' rule);
``unique`` says whether that ever happened, so callers that must see every such row (phase
membership, projection) can take their general path only then.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.model import Trace

#: The op table: kernels then memops in table order, each with its call (api_* null without one)
LAUNCH_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "corr_id": pl.Int64,
    "api_start": pl.Int64,
    "api_end": pl.Int64,
    "api_tid": pl.Int64,
}


@dataclass(frozen=True)
class Launches:
    """Kernels then memops (row i < ``n_kernels``: kernel i) with their launching call."""

    ops: pl.DataFrame  # LAUNCH_SCHEMA
    n_kernels: int
    unique: bool  # no (pid, corr_id) names two runtime rows

    @property
    def kernels(self) -> pl.DataFrame:
        """The kernels' rows, aligned with the trace's kernel table."""
        return self.ops.head(self.n_kernels)


def launch_table(
    kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame
) -> Launches:
    """The ops of two canonical tables with their launching call (module docstring); null
    corr ids and runtime rows with a null pid, corr id or start never match."""
    cols = ["pid", "device", "start", "end", "corr_id"]
    ops = pl.concat([kernels.select(cols), memops.select(cols)]).cast({c: pl.Int64 for c in cols})
    calls = runtime.select(
        "pid", "corr_id", pl.col("start").alias("api_start"), pl.col("end").alias("api_end"),
        pl.col("tid").alias("api_tid"),
    ).drop_nulls(["pid", "corr_id", "api_start"]).cast(pl.Int64)  # fmt: skip
    key = _key(calls["pid"].to_numpy(), calls["corr_id"].to_numpy(), ops)
    api = ["api_start", "api_end", "api_tid"]
    if key is not None:
        call_key, op_key = key
        order = np.argsort(call_key, kind="stable")  # runtime rows come nearly in key order
        sorted_key = call_key[order]
        if not np.any(sorted_key[1:] == sorted_key[:-1]):  # the usual case: a lookup by search
            if sorted_key.size:
                at = np.minimum(np.searchsorted(sorted_key, op_key), sorted_key.size - 1)
                found = pl.Series(sorted_key[at] == op_key)
                row = pl.select(pl.when(found).then(pl.Series(order[at]))).to_series()
                matched = calls.select(pl.col(api).gather(row))
            else:
                matched = pl.select(pl.repeat(None, len(ops), dtype=pl.Int64).alias(c) for c in api)
            return Launches(pl.concat([ops, matched], how="horizontal"), len(kernels), True)
        calls, ops = calls.with_columns(_key=call_key), ops.with_columns(_key=op_key)
        on, unique = ["_key"], False
    else:  # ids outside the combined key's ranges: a two-column join
        on = ["pid", "corr_id"]
        unique = not calls.select(on).is_duplicated().any()
    if not unique:
        calls = calls.sort([*on, *api], nulls_last=True).unique(
            on, keep="first", maintain_order=True)  # fmt: skip
    out = ops.join(calls.select(*on, *api), on=on, how="left", maintain_order="left")
    return Launches(out.select(list(LAUNCH_SCHEMA)), len(kernels), unique)


def _key(
    pid: np.ndarray, corr: np.ndarray, ops: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray] | None:
    """``pid << 32 | corr_id`` for the calls and the ops (null corr ids: -1, matching nothing),
    or None when a pid or corr id does not fit (pid in [0, 2**31), corr id in [0, 2**32))."""
    op_pid = ops["pid"].to_numpy()
    op_corr = ops["corr_id"].fill_null(-1).to_numpy()
    for p in (pid, op_pid):
        if p.size and (p.min() < 0 or p.max() >= 2**31):
            return None
    if corr.size and (corr.min() < 0 or corr.max() >= 2**32):
        return None
    if op_corr.size and op_corr.max() >= 2**32:
        return None
    op_key = np.where(op_corr >= 0, (op_pid.astype(np.int64) << 32) | op_corr, -1)
    return (pid.astype(np.int64) << 32) | corr, op_key


_CACHE: dict[int, tuple[weakref.ref[Trace], Launches]] = {}
_LOCK = threading.Lock()


def launches_of(trace: Trace) -> Launches:
    """:func:`launch_table` of a trace, computed once per trace object (an A/B's two threads
    and every stage of an analysis share it); dropped when the trace is."""
    key = id(trace)
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0]() is trace:
            return hit[1]
    value = launch_table(trace.kernels, trace.memops, trace.runtime)
    remember(trace, value)
    return value


def remember(trace: Trace, value: Launches) -> None:
    """Cache ``value`` as the launch table of ``trace`` (a restricted trace can take its
    parent's rows instead of joining again)."""
    key = id(trace)
    with _LOCK:
        _CACHE[key] = (weakref.ref(trace), value)
    weakref.finalize(trace, _forget, key)


def _forget(key: int) -> None:
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0]() is None:  # not a newer trace that reuses the id
            del _CACHE[key]


def only_processes(launches: Launches, pids: list[int]) -> Launches:
    """The launch table of :meth:`Trace.only_processes`: the same rows, other pids left out
    (kernels stay before memops, each in table order)."""
    keep = pl.col("pid").is_in(pids)
    kernels = launches.kernels.filter(keep)
    memops = launches.ops.slice(launches.n_kernels).filter(keep)
    return Launches(pl.concat([kernels, memops]), len(kernels), launches.unique)
