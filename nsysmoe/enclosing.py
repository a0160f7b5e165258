"""Which NVTX ranges enclose which CUDA API calls on the same thread: the one containment join
that both NVTX projection (:mod:`nsysmoe.measure.projection`) and classification by launching
range (a rule's ``nvtx`` key, :mod:`nsysmoe.classify`) rest on.

A call lies in a range when ``range.tid == call.tid and range.start <= call.start and
range.end >= call.end``; nested ranges all enclose it.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def enclosing_pairs(ranges: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """(range_id, call_id) for every range enclosing a call on the same thread; ``ranges`` has
    columns range_id, tid, start, end and ``calls`` call_id, tid, start, end.

    One inequality join for all threads: each time is replaced by its rank among all the
    times (order-preserving, and it frees the high bits) and the thread's index goes above
    it, so ``key_start(range) <= key_start(call) and key_end(range) >= key_end(call)`` holds
    exactly when the threads are equal and the range contains the call. (Ranks fit in 32
    bits up to 2**32 distinct timestamps, far beyond any trace.)
    """
    tids = ranges.select("tid").unique().join(calls.select("tid").unique(), on="tid")
    if tids.is_empty():
        return pl.DataFrame(schema={"range_id": pl.Int64, "call_id": pl.UInt32})
    r = ranges.join(tids, on="tid", how="semi")
    c = calls.join(tids, on="tid", how="semi")
    n, n_r = len(r) + len(c), len(r)
    times = np.concatenate([df[col].to_numpy() for col in ("start", "end") for df in (r, c)])
    rank = np.unique(times, return_inverse=True)[1].astype(np.int64).reshape(-1)
    thread = pl.concat([r["tid"], c["tid"]]).rank("dense").cast(pl.Int64).to_numpy() << 32
    key_start, key_end = thread + rank[:n], thread + rank[n:]
    left = pl.DataFrame({"range_id": r["range_id"], "rs": key_start[:n_r], "re": key_end[:n_r]})
    right = pl.DataFrame({"call_id": c["call_id"], "cs": key_start[n_r:], "ce": key_end[n_r:]})
    pairs = left.join_where(right, pl.col("rs") <= pl.col("cs"), pl.col("re") >= pl.col("ce"))
    return pairs.select("range_id", "call_id")
