"""A trace's dependency graph: every GPU op and CUDA API call as a node with a start and an
end *event*, and typed edges saying which event had to happen before which, from what the
export records:

* ``duration``: a node's start → its end, weighted by its duration (a call that was held until
  the GPU finished, and a collective's part before its last peer arrived, weigh nothing: their
  own edges carry that);
* ``stream``: each GPU op after the previous op on its stream;
* ``launch``: the CUDA API call → the ops it launched (same pid and correlationId; a CUDA-graph
  launch → its graph's kernels);
* ``host``: consecutive API calls of one CPU thread (a call nested in another, as a driver call
  in its runtime call, after the enclosing call's start, and the enclosing call ends after it);
* ``sync``: the GPU op that released a host synchronisation (stream, event or device
  synchronize; a blocking memcpy/memset) → the call's return;
* ``event``: a cross-stream wait (``cudaStreamWaitEvent``): the last op launched on the
  recording stream before the event record → the first op launched on the waiting stream after
  the wait (tied by the event's sync id where the export has it, else by the event's last
  record before the wait);
* ``inferred``: where the export records cross-stream waits it cannot tie to an event record
  (no ``CUDA_EVENT`` rows: most exports), an op that started within :data:`INFER_GAP_NS` of the
  end of the last op on another stream of its GPU, though its launch and its stream predecessor
  allowed it earlier, is taken to have waited for it; counted apart, so a reader sees how much
  of the graph rests on it;
* ``host_wait``: a CUDA call after its thread was silent for :data:`HOST_WAIT_MIN_NS` (or a
  thread's first call), that
  started within :data:`HOST_WAKE_NS` of the end of another thread's call or a GPU op of its
  process that ended in that silence, is taken to have waited for it — a thread handoff (the
  main thread blocked in ``backward()`` while the autograd thread launches) or a spin on
  host-mapped memory (DeepEP's and HybridEP's CPU wait for the received-token count), neither
  of which the export records; inferred, counted apart;
* ``collective``: the k-th matched instance of a collective
  (:func:`nsysmoe.measure.collectives.match`) — every rank's start → a *barrier* node at the
  last arrival → every rank's end, weighted by that rank's transfer.

An edge the measured times contradict (its source later than its destination allows) cannot be
a dependency as recorded; it is left out and counted (``dropped``).

Nodes are numbered kernels first, then memops, then API calls (each in its table's row order),
then barriers; node n's start is event 2n, its end event 2n+1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from nsysmoe.model import channel_order_key
from nsysmoe.results import PATH_BASE_CATEGORIES

#: edge kinds, in the order a tie between predecessors is settled (the first wins)
EDGE_KINDS = ("duration", "collective", "stream", "event", "inferred", "sync", "launch", "host",
              "host_wait")
KIND = {k: i for i, k in enumerate(EDGE_KINDS)}
#: an op that started at most this long after an op on another stream of its GPU ended (the
#: GPU's own wait latency), when every recorded predecessor allowed it earlier, waited for it
#: (only in processes whose cross-stream waits the export cannot tie to their events)
INFER_GAP_NS = 20_000
#: a CUDA call after its thread was silent this long, starting at most HOST_WAKE_NS after
#: another thread's call or a GPU op of its process ended in that silence, waited for it
HOST_WAIT_MIN_NS = 1_000_000
HOST_WAKE_NS = 200_000
#: categories every graph has, before the communication channels' own (one definition, in the
#: results: a path's figures read them too)
BASE_CATEGORIES = PATH_BASE_CATEGORIES
#: what the delay of an event is when an edge of each kind bound it (None: the node's own
#: category): after a GPU predecessor, nothing known explains it; after a launch or a host
#: predecessor, the host; after a sync release, the return from the sync
DELAY_OF_KIND = {"duration": None, "collective": "unexplained", "stream": "unexplained",
                 "event": "unexplained", "inferred": "unexplained", "sync": "sync",
                 "launch": "host", "host": "host", "host_wait": "host"}  # fmt: skip
#: API kinds that hold the host until the GPU is done
SYNC_APIS = ("stream_sync", "event_sync", "device_sync")
NODE_KINDS = ("kernel", "memcpy", "memset", "api", "barrier")

NODE_SCHEMA: dict[str, pl.DataType] = {
    "node": pl.Int64, "kind": pl.String, "pid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
    "category": pl.String, "row": pl.Int64,
}  # fmt: skip
EDGE_SCHEMA: dict[str, pl.DataType] = {
    "src": pl.Int64, "dst": pl.Int64, "kind": pl.String, "weight_ns": pl.Int64,
}  # fmt: skip


@dataclass(frozen=True)
class DepGraph:
    """The events' times, the kept edges in predecessor (CSR) form over events, each node's
    category and pid, and what could not be tied. ``nodes()`` and ``edges()`` give them as
    frames for a notebook's own questions."""

    t: np.ndarray  # event times (ns): node n's start is t[2n], its end t[2n+1]
    indptr: np.ndarray  # predecessors of event v: edges indptr[v]..indptr[v+1]
    src: np.ndarray  # int32 source event of each edge
    w: np.ndarray  # measured edge weights (ns)
    kind: np.ndarray  # int8 edge kind (index into EDGE_KINDS)
    node_cat: np.ndarray  # int16 category of each node (index into categories)
    node_kind: np.ndarray  # int8 index into NODE_KINDS
    node_pid: np.ndarray  # -1 for a barrier
    categories: tuple[str, ...]
    n_rows: tuple[int, int, int]  # kernels, memops, API calls (the rows nodes came from)
    edge_counts: dict[str, int] = field(default_factory=dict)  # kept, by kind
    dropped: dict[str, int] = field(default_factory=dict)  # contradicted by the times, by kind
    unmatched_waits: int = 0  # cross-stream waits whose event record is not in the export

    @property
    def n_nodes(self) -> int:
        return int(self.node_cat.size)

    def code(self, category: str) -> int:
        return self.categories.index(category)

    def delay_cats(self) -> np.ndarray:
        """Per edge kind, the category of a delay it binds (-1: the node's own)."""
        return np.array([-1 if DELAY_OF_KIND[k] is None else self.code(DELAY_OF_KIND[k])
                         for k in EDGE_KINDS], np.int64)  # fmt: skip

    def wait_cats(self) -> np.ndarray:
        """Per category, its channel's ``.wait`` category (-1 where it has none)."""
        code = {c: i for i, c in enumerate(self.categories)}
        return np.array([code.get(c.removesuffix(".transfer") + ".wait", -1)
                         if c.endswith(".transfer") else -1 for c in self.categories], np.int64)

    def rows(self) -> np.ndarray:
        """Each node's row in its source table (-1 for a barrier)."""
        k, m, a = self.n_rows
        n = np.arange(self.n_nodes, dtype=np.int64)
        return np.select([n < k, n < k + m, n < k + m + a], [n, n - k, n - k - m], -1)

    def nodes(self) -> pl.DataFrame:
        """One row per node (:data:`NODE_SCHEMA`)."""
        kinds = pl.Series(self.node_kind.astype(np.int64)).replace_strict(
            list(range(len(NODE_KINDS))), list(NODE_KINDS), return_dtype=pl.String)
        cats = pl.Series(self.node_cat.astype(np.int64)).replace_strict(
            list(range(len(self.categories))), list(self.categories), return_dtype=pl.String)
        return pl.DataFrame({
            "node": np.arange(self.n_nodes, dtype=np.int64), "kind": kinds,
            "pid": pl.Series(self.node_pid).replace(-1, None), "start": self.t[0::2],
            "end": self.t[1::2], "category": cats,
            "row": pl.Series(self.rows()).replace(-1, None)}).cast(NODE_SCHEMA)  # fmt: skip

    def edges(self) -> pl.DataFrame:
        """The kept edges (:data:`EDGE_SCHEMA`; between events, not nodes)."""
        dst = np.repeat(np.arange(self.t.size, dtype=np.int64), np.diff(self.indptr))
        kinds = pl.Series(self.kind.astype(np.int64)).replace_strict(
            list(range(len(EDGE_KINDS))), list(EDGE_KINDS), return_dtype=pl.String)
        return pl.DataFrame({"src": self.src.astype(np.int64), "dst": dst, "kind": kinds,
                             "weight_ns": self.w})  # fmt: skip


class _Edges:
    """Edges as they are found: event arrays per kind (weight 0 unless given)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray | None, int]] = []

    def add(self, src: np.ndarray, dst: np.ndarray, kind: str,
            w: np.ndarray | None = None) -> None:  # fmt: skip
        src = np.asarray(src, np.int64)
        if src.size:
            self.parts.append((src, np.asarray(dst, np.int64),
                               None if w is None else np.asarray(w, np.int64), KIND[kind]))


@dataclass(frozen=True)
class _Ops:
    """The GPU ops (kernels then memops) as arrays, and the API calls."""

    pid: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    end: np.ndarray
    corr: np.ndarray  # -1 for none
    memop: np.ndarray  # bool


def _int(s: pl.Series, fill: int = -1) -> np.ndarray:
    return s.cast(pl.Int64).fill_null(fill).to_numpy()


def _ops(kernels: pl.DataFrame, memops: pl.DataFrame) -> _Ops:
    def col(c: str) -> np.ndarray:
        return np.concatenate([_int(kernels[c]), _int(memops[c])])

    return _Ops(col("pid"), col("device"), col("stream"), col("start"), col("end"),
                col("corr_id"), np.arange(len(kernels) + len(memops)) >= len(kernels))


def _stream_edges(ops: _Ops, edges: _Edges) -> None:
    o = pl.DataFrame({"pid": ops.pid, "device": ops.device, "stream": ops.stream,
                      "start": ops.start, "end": ops.end}).with_row_index().sort(
        "pid", "device", "stream", "start", "end")["index"].to_numpy().astype(np.int64)
    same = ((ops.pid[o][1:] == ops.pid[o][:-1]) & (ops.device[o][1:] == ops.device[o][:-1])
            & (ops.stream[o][1:] == ops.stream[o][:-1]))  # fmt: skip
    edges.add(2 * o[:-1][same] + 1, 2 * o[1:][same], "stream")


def _launch_rows(ops: _Ops, api: pl.DataFrame) -> np.ndarray:
    """Each op's launching call (its row in ``api``; -1 without one): the call with the same
    (pid, corr_id), the earliest of several."""
    pid, corr = _int(api["pid"]), _int(api["corr_id"])
    start = _int(api["start"])
    fits = (pid.size == 0 or (pid.min() >= 0 and pid.max() < 2**31)) and (
        corr.size == 0 or corr.max() < 2**32) and (ops.pid.size == 0 or (
            ops.pid.min() >= 0 and ops.pid.max() < 2**31 and ops.corr.max() < 2**32))
    if not fits:
        calls = api.select("pid", "corr_id", "start").with_row_index("row").drop_nulls(
            ["pid", "corr_id"]).sort("pid", "corr_id", "start").unique(
            ["pid", "corr_id"], keep="first")  # fmt: skip
        found = pl.DataFrame({"pid": ops.pid, "corr_id": ops.corr}).join(
            calls.select("pid", "corr_id", "row"), on=["pid", "corr_id"], how="left",
            maintain_order="left")  # fmt: skip
        return found["row"].cast(pl.Int64).fill_null(-1).to_numpy()
    key = np.where(corr >= 0, (pid << 32) | corr, -2)
    order = np.lexsort((start, key))
    k = key[order]
    first = np.ones(k.size, bool)
    first[1:] = k[1:] != k[:-1]
    k, order = k[first], order[first]
    op_key = np.where(ops.corr >= 0, (ops.pid << 32) | ops.corr, -3)
    if k.size == 0:
        return np.full(op_key.size, -1, np.int64)
    at = np.minimum(np.searchsorted(k, op_key), k.size - 1)
    return np.where(k[at] == op_key, order[at], -1)


def _host_edges(api: pl.DataFrame, base: int, edges: _Edges, ops: _Ops) -> None:
    """Thread order (module docstring: ``host``), and the waits a thread's silence ends
    (``host_wait``); ``base``: the first API node."""
    from nsysmoe.depgraph import core  # numba: imported where first used

    tid, start, end = _int(api["tid"]), _int(api["start"]), _int(api["end"])
    o = _thread_order(tid, start, end)
    a, b, nested = core.thread_pairs(o, tid, start, end)
    a, b = a + base, b + base
    edges.add(2 * a[~nested] + 1, 2 * b[~nested], "host")
    edges.add(2 * a[nested], 2 * b[nested], "host")
    edges.add(2 * b[nested] + 1, 2 * a[nested] + 1, "host")
    a, b = a[~nested] - base, b[~nested] - base
    quiet = start[b] - end[a] >= HOST_WAIT_MIN_NS
    # a thread's first call: silent since the trace began
    first = o[np.r_[True, tid[o][1:] != tid[o][:-1]]] if o.size else o
    calls = np.concatenate([b[quiet], first])
    since = np.concatenate([end[a[quiet]], np.full(first.size, np.iinfo(np.int64).min)])
    if calls.size:
        _host_waits(_int(api["pid"]), end, ops, since, calls, start, base, edges)


def _thread_order(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Calls by (thread, start, longest first): a stable sort by thread where the rows are in
    start order with distinct starts per thread (as exports write them), else a full sort."""
    if start.size < 2 or (np.all(start[1:] > start[:-1])):
        return np.argsort(tid, kind="stable").astype(np.int64)
    return pl.DataFrame({"tid": tid, "start": start, "end": end}).with_row_index().sort(
        ["tid", "start", "end"], descending=[False, False, True])["index"].to_numpy().astype(
        np.int64)  # fmt: skip


def _host_waits(pid: np.ndarray, end: np.ndarray, ops: _Ops, since: np.ndarray,
                calls: np.ndarray, start: np.ndarray, base: int, edges: _Edges) -> None:
    """``host_wait`` edges (module docstring) into ``calls`` (rows), each after its thread's
    silence from ``since``: the latest call end or GPU op end of its process at or before its
    start, when that ended in the silence and at most HOST_WAKE_NS before it."""
    n_ops = ops.end.size
    # every end in the process (calls as nodes base+row, ops as their node) that ended at
    # most HOST_WAKE_NS before one of the calls' starts: the candidates, few
    who = np.concatenate([np.arange(end.size) + base, np.arange(n_ops)])
    when = np.concatenate([end, ops.end])
    began = np.concatenate([start, ops.start])
    proc = np.concatenate([pid, ops.pid])
    starts = np.sort(start[calls])
    nxt = np.minimum(np.searchsorted(starts, when, side="left"), starts.size - 1)
    near = (starts[nxt] >= when) & (starts[nxt] - when <= HOST_WAKE_NS)
    who, when, proc, began = who[near], when[near], proc[near], began[near]
    if when.size == 0:
        return
    order = np.lexsort((when, proc))
    proc, when, who, began = proc[order], when[order], who[order], began[order]
    key_pid = pid[calls]
    lo = np.searchsorted(proc, key_pid, side="left")
    at = np.empty(calls.size, np.int64)
    for p in np.unique(key_pid):  # per process (a handful)
        mine = key_pid == p
        a, b = np.searchsorted(proc, p, side="left"), np.searchsorted(proc, p, side="right")
        at[mine] = a + np.searchsorted(when[a:b], start[calls[mine]], side="right") - 1
    ok = at >= lo
    at = np.maximum(at, 0)
    ok &= ((when[at] > since) & (start[calls] - when[at] <= HOST_WAKE_NS)
           & (began[at] < start[calls]))  # fmt: skip
    edges.add(2 * who[at[ok]] + 1, 2 * (calls[ok] + base), "host_wait")


def _release_edges(ops: _Ops, call: np.ndarray, api: pl.DataFrame, base: int,
                   syncs: pl.DataFrame, edges: _Edges) -> np.ndarray:  # fmt: skip
    """Sync edges; returns the nodes of the calls that were held (their own weight is 0)."""
    a_start, a_end = _int(api["start"]), _int(api["end"])
    has = call >= 0
    kinds = api["api"]
    sync_copy = (kinds == "blocking_copy").fill_null(False).to_numpy()
    blocking = np.nonzero(has & ops.memop)[0]
    c = call[blocking]
    keep = ((ops.end[blocking] <= a_end[c]) & (ops.end[blocking] >= a_start[c])
            & sync_copy[c])  # fmt: skip
    blocking, c = blocking[keep], c[keep]
    edges.add(2 * blocking + 1, 2 * (c + base) + 1, "sync")
    held = [c + base]
    rows = np.nonzero(kinds.is_in(SYNC_APIS).fill_null(False).to_numpy())[0]
    if rows.size == 0:
        return np.concatenate(held)
    calls = pl.DataFrame({"row": rows, "pid": _int(api["pid"])[rows], "corr_id":
                          _int(api["corr_id"])[rows], "start": a_start[rows], "end": a_end[rows],
                          "api": kinds.gather(rows)}).join(
        syncs.select("pid", "corr_id", pl.col("stream").alias("sync_stream")).unique(
            ["pid", "corr_id"], keep="first"), on=["pid", "corr_id"], how="left")  # fmt: skip
    # an op is enqueued when its launch starts (without a launch: when it starts); a sync
    # waits only for work enqueued before it
    enq = np.where(has, a_start[np.maximum(call, 0)], ops.start)
    ends = pl.DataFrame({"op": np.arange(ops.end.size), "pid": ops.pid, "stream": ops.stream,
                         "op_end": ops.end, "enq": enq}).sort("op_end")  # fmt: skip
    on_stream = calls.filter((pl.col("api") == "stream_sync") & pl.col("sync_stream").is_not_null())
    anywhere = calls.join(on_stream.select("row"), on="row", how="anti")
    found = []
    if not on_stream.is_empty():
        found.append(on_stream.sort("end").join_asof(
            ends, left_on="end", right_on="op_end", by_left=["pid", "sync_stream"],
            by_right=["pid", "stream"], strategy="backward", check_sortedness=False))
    if not anywhere.is_empty():
        found.append(anywhere.sort("end").join_asof(
            ends.drop("stream"), left_on="end", right_on="op_end", by="pid",
            strategy="backward", check_sortedness=False))  # fmt: skip
    for f in found:
        f = f.filter(pl.col("op").is_not_null() & (pl.col("op_end") >= pl.col("start"))
                     & (pl.col("enq") < pl.col("start")))
        node = f["row"].to_numpy() + base
        edges.add(2 * f["op"].to_numpy() + 1, 2 * node + 1, "sync")
        held.append(node)
    return np.concatenate(held)


def _event_edges(ops: _Ops, call: np.ndarray, api: pl.DataFrame, syncs: pl.DataFrame,
                 records: pl.DataFrame, edges: _Edges) -> tuple[int, np.ndarray]:  # fmt: skip
    """Cross-stream waits; returns how many could not be tied to a record, and the pids of
    those."""
    kinds = api["api"]
    rows = np.nonzero((kinds == "stream_wait").fill_null(False).to_numpy())[0]
    if rows.size == 0:
        return 0, np.empty(0, np.int64)
    waits = pl.DataFrame({"pid": _int(api["pid"])[rows], "corr_id": _int(api["corr_id"])[rows],
                          "start": _int(api["start"])[rows]}).join(
        syncs.select("pid", "corr_id", pl.col("stream").alias("wait_stream"), "event_id",
                     "event_sync_id"), on=["pid", "corr_id"], how="left")  # fmt: skip
    tied = pl.DataFrame(schema={"pid": pl.Int64, "corr_id": pl.Int64, "start": pl.Int64,
                                "wait_stream": pl.Int64, "rec_stream": pl.Int64,
                                "rec_start": pl.Int64})  # fmt: skip
    if not records.is_empty():
        calls = api.select("pid", "corr_id", pl.col("start").alias("rec_start")).drop_nulls(
            ["pid", "corr_id"]).sort("rec_start").unique(["pid", "corr_id"], keep="first")
        recs = records.join(calls, on=["pid", "corr_id"], how="inner").select(
            "pid", pl.col("stream").alias("rec_stream"), "event_id", "event_sync_id",
            "rec_start")  # fmt: skip
        by_sync = waits.filter(pl.col("event_sync_id").is_not_null()).join(
            recs.drop_nulls("event_sync_id").unique(["pid", "event_sync_id"], keep="last")
            .drop("event_id"), on=["pid", "event_sync_id"], how="inner")  # fmt: skip
        rest = waits.join(by_sync.select("pid", "corr_id"), on=["pid", "corr_id"], how="anti")
        by_last = rest.drop_nulls("event_id").sort("start").join_asof(
            recs.drop_nulls("event_id").sort("rec_start").drop("event_sync_id"),
            left_on="start", right_on="rec_start", by=["pid", "event_id"],
            strategy="backward", check_sortedness=False).drop_nulls("rec_start")  # fmt: skip
        cols = ["pid", "corr_id", "start", "wait_stream", "rec_stream", "rec_start"]
        tied = pl.concat([by_sync.select(cols), by_last.select(cols)]).drop_nulls(
            ["wait_stream", "rec_stream"])
    untied = waits.join(tied.select("pid", "corr_id"), on=["pid", "corr_id"], how="anti")
    if tied.is_empty():
        return len(untied), untied["pid"].unique().to_numpy()
    a_start = _int(api["start"])
    has = np.nonzero(call >= 0)[0]
    launched = pl.DataFrame({"node": has, "pid": ops.pid[has], "stream": ops.stream[has],
                             "api_start": a_start[call[has]]}).sort("api_start")  # fmt: skip
    before = tied.sort("rec_start").join_asof(
        launched.rename({"node": "before"}), left_on="rec_start", right_on="api_start",
        by_left=["pid", "rec_stream"], by_right=["pid", "stream"], strategy="backward",
        allow_exact_matches=False, check_sortedness=False)  # fmt: skip
    after = before.sort("start").join_asof(
        launched.rename({"node": "after", "api_start": "a_start"}), left_on="start",
        right_on="a_start", by_left=["pid", "wait_stream"], by_right=["pid", "stream"],
        strategy="forward", allow_exact_matches=False, check_sortedness=False,
    ).drop_nulls(["before", "after"])  # fmt: skip
    edges.add(2 * after["before"].to_numpy() + 1, 2 * after["after"].to_numpy(), "event")
    lost = len(untied) + len(tied) - len(after)
    return lost, untied["pid"].unique().to_numpy()


def _inferred_edges(ops: _Ops, call: np.ndarray, a_start: np.ndarray, pids: np.ndarray,
                    edges: _Edges) -> None:  # fmt: skip
    """Cross-stream waits inferred from the GPU's timing (module docstring: ``inferred``),
    per GPU of the processes in ``pids``."""
    mine = np.isin(ops.pid, pids)
    if not mine.any():
        return
    never = np.iinfo(np.int64).min
    launch = np.where(call >= 0, a_start[np.maximum(call, 0)], never)
    gpus = pl.DataFrame({"pid": ops.pid, "device": ops.device}).with_row_index().filter(
        pl.Series(mine)).group_by("pid", "device").agg("index")  # fmt: skip
    for i in gpus["index"].to_list():
        i = np.asarray(i, np.int64)
        # each op's stream predecessor's end (ops of a stream never overlap)
        by_start = i[np.lexsort((ops.start[i], ops.stream[i]))]
        same = np.zeros(by_start.size, bool)
        same[1:] = ops.stream[by_start][1:] == ops.stream[by_start][:-1]
        prev_end = np.full(by_start.size, never)
        prev_end[1:] = np.where(same[1:], ops.end[by_start][:-1], never)
        by_end = i[np.argsort(ops.end[i], kind="stable")]
        at = np.searchsorted(ops.end[by_end], ops.start[by_start], side="right") - 1
        u = by_end[np.maximum(at, 0)]
        keep = ((at >= 0) & (ops.stream[u] != ops.stream[by_start])
                & (ops.start[u] < ops.start[by_start])
                & (ops.start[by_start] - ops.end[u] <= INFER_GAP_NS)
                & (prev_end < ops.end[u]) & (launch[by_start] < ops.end[u]))  # fmt: skip
        edges.add(2 * u[keep] + 1, 2 * by_start[keep], "inferred")


def _categories(kernels: pl.DataFrame, matched_channels: list[str]) -> tuple[str, ...]:
    """:data:`BASE_CATEGORIES`, then per channel (report order) the channel's own (time not
    split across ranks), its ``.transfer`` and its ``.wait``."""
    chans = set(matched_channels)
    if "class" in kernels.columns and len(kernels):
        comm = kernels.filter(pl.col("class") == "comm")
        chans |= set(comm["channel"].fill_null("other").unique().to_list())
    out = list(BASE_CATEGORIES)
    for ch in sorted(chans, key=channel_order_key):
        out += [ch, f"{ch}.transfer", f"{ch}.wait"]
    return tuple(out)


def _kernel_cats(kernels: pl.DataFrame, code: dict[str, int]) -> np.ndarray:
    if not len(kernels):
        return np.empty(0, np.int16)
    channel = kernels["channel"].fill_null("other")
    ch_code = channel.replace_strict(code, default=code["compute.other"], return_dtype=pl.Int64)
    cls = kernels["class"]
    out = pl.select(
        pl.when(cls == "gemm").then(code["gemm"]).when(cls == "attention").then(
            code["attention"]).when(cls == "comm").then(ch_code).otherwise(
            code["compute.other"])).to_series()  # fmt: skip
    return out.to_numpy().astype(np.int16)


def build_graph(kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame,
                syncs: pl.DataFrame, records: pl.DataFrame,
                matched: pl.DataFrame | None = None) -> DepGraph:  # fmt: skip
    """The graph of classified ``kernels`` (with ``class`` and ``channel``), ``memops`` and
    ``runtime`` (canonical tables), the sync and event-record tables, and ``matched``: the
    collectives matched across ranks (rows of :func:`~nsysmoe.measure.collectives.match`
    with ``pid, device, start, end, name, step, channel, k, last``), or None."""
    ops = _ops(kernels, memops)
    n_k, n_m, n_a = len(kernels), len(memops), len(runtime)
    base = n_k + n_m
    edges = _Edges()
    _stream_edges(ops, edges)
    call = _launch_rows(ops, runtime)
    has = np.nonzero(call >= 0)[0]
    edges.add(2 * (call[has] + base), 2 * has, "launch")
    _host_edges(runtime, base, edges, ops)
    held = _release_edges(ops, call, runtime, base, syncs, edges)
    unmatched, untied = _event_edges(ops, call, runtime, syncs, records, edges)
    a_start = _int(runtime["start"])
    if untied.size:
        _inferred_edges(ops, call, a_start, untied, edges)
    matched = None if matched is None or matched.is_empty() else matched
    categories = _categories(kernels, [] if matched is None else
                             matched["channel"].unique().to_list())  # fmt: skip
    code = {c: i for i, c in enumerate(categories)}
    api_cat = np.where(runtime["api"].is_in(SYNC_APIS).fill_null(False).to_numpy(),
                       code["sync"], code["host"]).astype(np.int16)  # fmt: skip
    memop_cat = np.where((memops["kind"] == "memset").fill_null(False).to_numpy(),
                         code["memset"], code["memcpy"]).astype(np.int16)  # fmt: skip
    node_cat = np.concatenate([_kernel_cats(kernels, code), memop_cat, api_cat])
    node_kind = np.concatenate([np.zeros(n_k, np.int8),
                                np.where(memop_cat == code["memset"], 2, 1).astype(np.int8),
                                np.full(n_a, 3, np.int8)])  # fmt: skip
    node_pid = np.concatenate([ops.pid, _int(runtime["pid"])])
    start = np.concatenate([ops.start, a_start])
    end = np.concatenate([ops.end, _int(runtime["end"])])
    weight = end - start
    weight[held] = 0
    if matched is not None:
        b = _collective_edges(kernels, matched, start.size, code, edges)
        if b is not None:
            member, transfer, last, bcat = b
            weight[member] = transfer
            node_cat[member] = bcat[1]
            nb = last.size
            node_cat = np.concatenate([node_cat, bcat[0]])
            node_kind = np.concatenate([node_kind, np.full(nb, 4, np.int8)])
            node_pid = np.concatenate([node_pid, np.full(nb, -1, np.int64)])
            start, end = np.concatenate([start, last]), np.concatenate([end, last])
            weight = np.concatenate([weight, np.zeros(nb, np.int64)])
    n = start.size
    edges.add(2 * np.arange(n), 2 * np.arange(n) + 1, "duration", weight)
    t = np.empty(2 * n, np.int64)
    t[0::2], t[1::2] = start, end
    return _assemble(t, edges, node_cat, node_kind, node_pid, categories, (n_k, n_m, n_a),
                     unmatched)  # fmt: skip


def _collective_edges(kernels: pl.DataFrame, matched: pl.DataFrame, first: int,
                      code: dict[str, int], edges: _Edges) -> tuple | None:  # fmt: skip
    """Barriers for matched collective instances: member start → barrier (at the last
    arrival) → member end, weighted by the member's transfer (which its own weight becomes).
    Returns (members, their transfer, the barriers' times, (barrier categories, member
    categories)), or None when no matched row is a kernel of this graph."""
    key = ["pid", "device", "start", "end", "name"]
    k = kernels.select(*key, "class").with_row_index("node").filter(
        pl.col("class") == "comm").drop("class").unique(key, keep="first")
    # in instance order, then the members' (a join's row order is not): barriers are numbered
    # and a tie between arrivals settled the same way on every run
    rows = matched.select(*key, "step", "channel", "k", "last").join(
        k.with_columns(pl.col("node").cast(pl.Int64)), on=key).sort(
        "step", "channel", "name", "k", "pid", "device", "start")  # fmt: skip
    if rows.is_empty():
        return None
    inst = rows.group_by("step", "channel", "name", "k", maintain_order=True).agg(
        pl.col("last").max()).with_columns(
        (pl.int_range(pl.len(), dtype=pl.Int64) + first).alias("barrier"))  # fmt: skip
    rows = rows.join(inst.drop("last"), on=["step", "channel", "name", "k"],
                     maintain_order="left")
    edges.add(2 * rows["node"].to_numpy(), 2 * rows["barrier"].to_numpy(), "collective")
    # a member that ended before the last arrival (clocks apart) keeps its own time
    rows = rows.filter(pl.col("end") >= pl.col("last"))
    member, barrier = rows["node"].to_numpy(), rows["barrier"].to_numpy()
    transfer = (rows["end"] - rows["last"]).to_numpy()
    edges.add(2 * barrier + 1, 2 * member + 1, "collective", transfer)
    cat = {ch: code[f"{ch}.transfer"] for ch in inst["channel"].unique().to_list()}
    bcat = inst["channel"].replace_strict(cat, return_dtype=pl.Int64).to_numpy().astype(np.int16)
    mcat = rows["channel"].replace_strict(cat, return_dtype=pl.Int64).to_numpy().astype(np.int16)
    return member, transfer, inst["last"].to_numpy(), (bcat, mcat)


def _assemble(t: np.ndarray, edges: _Edges, node_cat: np.ndarray, node_kind: np.ndarray,
              node_pid: np.ndarray, categories: tuple[str, ...], n_rows: tuple[int, int, int],
              unmatched: int) -> DepGraph:  # fmt: skip
    """Keep the edges the times allow, in CSR order over destination events (a destination's
    edges in :data:`EDGE_KINDS` order)."""
    from nsysmoe.depgraph import core  # numba: imported where first used

    parts = sorted(edges.parts, key=lambda p: p[3])  # by kind: a tie's winner comes first
    edges.parts.clear()
    none = [np.empty(0, np.int64)]  # a graph without nodes has no edges
    src = np.concatenate([p[0] for p in parts] or none)
    dst = np.concatenate([p[1] for p in parts] or none)
    w = np.concatenate([np.zeros(p[0].size, np.int64) if p[2] is None else p[2]
                        for p in parts] or none)  # fmt: skip
    kind = np.concatenate([np.full(p[0].size, p[3], np.int8) for p in parts]
                          or [np.empty(0, np.int8)])  # fmt: skip
    del parts
    bad = t[src] + w > t[dst]
    counts = np.bincount(kind[bad], minlength=len(EDGE_KINDS))
    dropped = {EDGE_KINDS[k]: int(c) for k, c in enumerate(counts) if c}
    if bad.any():
        keep = ~bad
        src, dst, w, kind = src[keep], dst[keep], w[keep], kind[keep]
    del bad
    perm, indptr = core.by_destination(dst, t.size)
    del dst
    src, w, kind = src[perm].astype(np.int32), w[perm], kind[perm]
    del perm
    kept = np.bincount(kind, minlength=len(EDGE_KINDS))
    return DepGraph(t, indptr, src, w, kind, node_cat, node_kind, node_pid, categories, n_rows,
                    {EDGE_KINDS[k]: int(c) for k, c in enumerate(kept)}, dropped, unmatched)
