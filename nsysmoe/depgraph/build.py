"""A trace's dependency graph: every GPU op and CUDA API call as a node with a start and an
end *event*, and typed edges saying which event had to happen before which, from what the
export records (no guessing from timing alone):

* ``duration``: a node's start → its end, weighted by its duration (a call that was held until
  the GPU finished, and a collective's part before its last peer arrived, weigh nothing: their
  own edges carry that);
* ``stream``: each GPU op after the previous op on its stream;
* ``launch``: the CUDA API call → the ops it launched (same pid and correlationId; a CUDA-graph
  launch → its graph's kernels);
* ``host``: consecutive API calls of one CPU thread (a call nested in another, as a driver call
  in its runtime call, after the enclosing call's start);
* ``sync``: the GPU op that released a host synchronisation (stream, event, device or a
  blocking memcpy) → the call's return;
* ``event``: a cross-stream wait (``cudaStreamWaitEvent``): the last op recorded before the event
  → the first op launched on the waiting stream after the wait (matched by the event's sync
  id where the export has it, else the event's last record before the wait);
* ``inferred``: where the export records cross-stream waits (``cudaStreamWaitEvent`` calls) it
  cannot tie to an event record (no ``CUDA_EVENT`` rows: most exports), an op that started
  within :data:`INFER_GAP_NS` of the end of the last op on another stream of its GPU, though
  its launch and its stream predecessor allowed it earlier, is taken to have waited for it;
  counted apart, so a reader sees how much of the graph rests on it;
* ``collective``: the k-th matched instance of a collective
  (:func:`nsysmoe.measure.collectives.match`) — every rank's start → a *barrier* at the last
  arrival → every rank's end, weighted by that rank's transfer.

An edge the measured times contradict (its source later than its destination allows) cannot be
a dependency as recorded; it is left out and counted (``dropped``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from nsysmoe.model import channel_order_key

#: edge kinds, in the order a tie between predecessors is settled (the first wins)
EDGE_KINDS = ("duration", "collective", "stream", "event", "inferred", "sync", "launch", "host")
#: an op that started at most this long after an op on another stream of its GPU ended, when
#: every recorded predecessor allowed it earlier, waited for it (only in processes whose
#: cross-stream waits the export cannot tie to their events): the GPU's own wait latency
INFER_GAP_NS = 10_000
KIND = {k: i for i, k in enumerate(EDGE_KINDS)}
#: categories every graph has, before the communication channels' own
BASE_CATEGORIES = ("gemm", "attention", "compute.other", "memcpy", "memset", "host", "sync",
                   "idle", "unexplained")  # fmt: skip
#: API kinds that hold the host until the GPU is done
SYNC_APIS = ("stream_sync", "event_sync", "device_sync")

NODE_SCHEMA: dict[str, pl.DataType] = {
    "node": pl.Int64, "kind": pl.String, "pid": pl.Int64, "device": pl.Int64,
    "stream": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
    "category": pl.String, "row": pl.Int64,
}  # fmt: skip
EDGE_SCHEMA: dict[str, pl.DataType] = {
    "src": pl.Int64, "dst": pl.Int64, "kind": pl.String, "weight_ns": pl.Int64,
}  # fmt: skip


@dataclass(frozen=True)
class DepGraph:
    """Nodes (``nodes``: node i's start is event 2i, its end event 2i+1; ``row`` is its row in
    the kernel, memop or runtime table its ``kind`` names), the kept edges in predecessor
    (CSR) form over events, and what could not be tied."""

    nodes: pl.DataFrame
    t: np.ndarray  # event times (ns)
    indptr: np.ndarray  # predecessors of event v: edges indptr[v]..indptr[v+1]
    src: np.ndarray
    w: np.ndarray  # measured edge weights (ns)
    kind: np.ndarray  # edge kind (index into EDGE_KINDS)
    weight_cat: np.ndarray  # category of an edge's weight
    delay_cat: np.ndarray  # category of the delay of the event it binds
    wait_edge: np.ndarray  # collective barrier → member end: the member's start event, else -1
    wait_cat: np.ndarray
    categories: tuple[str, ...]
    node_cat: np.ndarray  # per node
    edge_counts: dict[str, int] = field(default_factory=dict)  # kept, by kind
    dropped: dict[str, int] = field(default_factory=dict)  # contradicted by the times, by kind
    unmatched_waits: int = 0  # cross-stream waits whose event record is not in the export

    @property
    def n_events(self) -> int:
        return int(self.t.size)

    def edges(self) -> pl.DataFrame:
        """The kept edges as a frame (:data:`EDGE_SCHEMA`; events, not nodes)."""
        dst = np.repeat(np.arange(self.n_events, dtype=np.int64), np.diff(self.indptr))
        kinds = pl.Series(self.kind.astype(np.int64)).replace_strict(
            list(range(len(EDGE_KINDS))), list(EDGE_KINDS), return_dtype=pl.String)
        return pl.DataFrame({"src": self.src, "dst": dst, "kind": kinds, "weight_ns": self.w})


def _kernel_category() -> pl.Expr:
    cls = pl.col("class")
    return (pl.when(cls == "gemm").then(pl.lit("gemm"))
            .when(cls == "attention").then(pl.lit("attention"))
            .when(cls == "comm").then(pl.col("channel").fill_null("other"))
            .otherwise(pl.lit("compute.other")))  # fmt: skip


def _nodes(kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame) -> pl.DataFrame:
    k = kernels.select(
        pl.lit("kernel").alias("kind"), "pid", "device", "stream", pl.lit(None, pl.Int64).alias(
            "tid"), "start", "end", _kernel_category().alias("category"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))  # fmt: skip
    m = memops.select(
        pl.col("kind"), "pid", "device", "stream", pl.lit(None, pl.Int64).alias("tid"), "start",
        "end", pl.col("kind").alias("category"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))
    a = runtime.select(
        pl.lit("api").alias("kind"), "pid", pl.lit(None, pl.Int64).alias("device"),
        pl.lit(None, pl.Int64).alias("stream"), "tid", "start", "end",
        pl.when(pl.col("api").is_in(SYNC_APIS)).then(pl.lit("sync")).otherwise(pl.lit("host"))
        .alias("category"), pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))  # fmt: skip
    nodes = pl.concat([k, m, a], how="vertical_relaxed")
    return nodes.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("node")).select(
        list(NODE_SCHEMA)).cast(NODE_SCHEMA)  # fmt: skip


class _Edges:
    """Edges as they are found: event arrays per kind."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []

    def add(self, src: np.ndarray, dst: np.ndarray, w: np.ndarray | int, kind: str) -> None:
        src = np.asarray(src, np.int64)
        if src.size == 0:
            return
        w = np.broadcast_to(np.asarray(w, np.int64), src.shape)
        self.parts.append((src, np.asarray(dst, np.int64), np.array(w, np.int64), KIND[kind]))


def _stream_edges(ops: pl.DataFrame, edges: _Edges) -> None:
    s = ops.select("node", "pid", "device", "stream", "start", "end").sort(
        "pid", "device", "stream", "start", "end")
    same = ((s["pid"] == s["pid"].shift(1)) & (s["device"] == s["device"].shift(1))
            & (s["stream"] == s["stream"].shift(1))).fill_null(False).to_numpy()  # fmt: skip
    node = s["node"].to_numpy()
    prev = np.roll(node, 1)
    edges.add(2 * prev[same] + 1, 2 * node[same], 0, "stream")


def _first_calls(api: pl.DataFrame) -> pl.DataFrame:
    """One call per (pid, corr_id): the earliest (the launch join's rule)."""
    return (api.drop_nulls(["pid", "corr_id"]).sort("pid", "corr_id", "start", "tid", "end")
            .unique(["pid", "corr_id"], keep="first", maintain_order=True))  # fmt: skip


def _launch_edges(ops: pl.DataFrame, calls: pl.DataFrame, edges: _Edges) -> pl.DataFrame:
    """Launch edges; returns the ops with their call (``api_node``, ``api_start``, ``api_end``)."""
    joined = ops.join(
        calls.select("pid", "corr_id", pl.col("node").alias("api_node"),
                     pl.col("start").alias("api_start"), pl.col("end").alias("api_end"),
                     pl.col("api").alias("api_kind")),
        on=["pid", "corr_id"], how="left", maintain_order="left")  # fmt: skip
    has = joined.filter(pl.col("api_node").is_not_null())
    edges.add(2 * has["api_node"].to_numpy(), 2 * has["node"].to_numpy(), 0, "launch")
    return joined


def _host_edges(api: pl.DataFrame, edges: _Edges) -> None:
    """Consecutive calls of a thread: after the latest-ending earlier call when it ended by this
    one's start; else nested in it (after its start, and it ends after this one)."""
    s = api.select("node", "tid", "start", "end").sort("tid", "start", pl.col("end"),
                                                       descending=[False, False, True])
    s = s.with_columns(
        pl.when(pl.col("end") == pl.col("end").cum_max().over("tid")).then(pl.col("node"))
        .forward_fill().over("tid").alias("top"),
        pl.col("end").cum_max().over("tid").alias("top_end"),
    ).with_columns(pl.col("top", "top_end").shift(1).over("tid"))  # fmt: skip
    s = s.filter(pl.col("top").is_not_null())
    after = s.filter(pl.col("top_end") <= pl.col("start"))
    edges.add(2 * after["top"].to_numpy() + 1, 2 * after["node"].to_numpy(), 0, "host")
    inside = s.filter(pl.col("top_end") > pl.col("start"))
    edges.add(2 * inside["top"].to_numpy(), 2 * inside["node"].to_numpy(), 0, "host")
    edges.add(2 * inside["node"].to_numpy() + 1, 2 * inside["top"].to_numpy() + 1, 0, "host")


def _release_edges(ops: pl.DataFrame, launched: pl.DataFrame, api: pl.DataFrame,
                   syncs: pl.DataFrame, edges: _Edges) -> np.ndarray:  # fmt: skip
    """Sync edges; returns the nodes of the calls that were held (their own weight is 0)."""
    held: list[np.ndarray] = []
    # a blocking copy: its call returned after the copy ended
    blocking = launched.filter(pl.col("kind").is_in(["memcpy", "memset"])
                               & (pl.col("end") <= pl.col("api_end"))
                               & (pl.col("end") >= pl.col("api_start")))  # fmt: skip
    edges.add(2 * blocking["node"].to_numpy() + 1, 2 * blocking["api_node"].to_numpy() + 1, 0,
              "sync")
    held.append(blocking["api_node"].to_numpy())
    calls = api.filter(pl.col("api").is_in(SYNC_APIS)).join(
        syncs.select("pid", "corr_id", pl.col("stream").alias("sync_stream")).unique(
            ["pid", "corr_id"], keep="first"), on=["pid", "corr_id"], how="left")  # fmt: skip
    if calls.is_empty():
        return np.concatenate(held)
    ends = ops.select("node", "pid", "stream", pl.col("end").alias("op_end")).sort("op_end")
    on_stream = calls.filter((pl.col("api") == "stream_sync") & pl.col("sync_stream").is_not_null())
    anywhere = calls.join(on_stream.select("node"), on="node", how="anti")
    found = []
    if not on_stream.is_empty():
        found.append(on_stream.sort("end").join_asof(
            ends.rename({"node": "op"}), left_on="end", right_on="op_end",
            by_left=["pid", "sync_stream"], by_right=["pid", "stream"], strategy="backward",
            check_sortedness=False))
    if not anywhere.is_empty():
        found.append(anywhere.sort("end").join_asof(
            ends.rename({"node": "op"}).drop("stream"), left_on="end", right_on="op_end",
            by="pid", strategy="backward", check_sortedness=False))  # fmt: skip
    for f in found:
        f = f.filter(pl.col("op").is_not_null() & (pl.col("op_end") >= pl.col("start")))
        edges.add(2 * f["op"].to_numpy() + 1, 2 * f["node"].to_numpy() + 1, 0, "sync")
        held.append(f["node"].to_numpy())
    return np.concatenate(held)


def _event_edges(launched: pl.DataFrame, api: pl.DataFrame, syncs: pl.DataFrame,
                 records: pl.DataFrame, edges: _Edges) -> int:  # fmt: skip
    """Cross-stream waits; returns how many waits could not be tied to a record."""
    waits = api.filter(pl.col("api") == "stream_wait").select("pid", "corr_id", "start")
    if waits.is_empty():
        return 0
    waits = waits.join(syncs.select("pid", "corr_id", pl.col("stream").alias("wait_stream"),
                                    "event_id", "event_sync_id"),
                       on=["pid", "corr_id"], how="left")  # fmt: skip
    calls = _first_calls(api).select("pid", "corr_id", pl.col("start").alias("rec_start"))
    recs = records.join(calls, on=["pid", "corr_id"], how="inner").select(
        "pid", pl.col("stream").alias("rec_stream"), "event_id", "event_sync_id", "rec_start")
    by_sync = waits.filter(pl.col("event_sync_id").is_not_null()).join(
        recs.drop_nulls("event_sync_id").unique(["pid", "event_sync_id"], keep="last").drop(
            "event_id"), on=["pid", "event_sync_id"], how="inner")  # fmt: skip
    rest = waits.join(by_sync.select("pid", "corr_id"), on=["pid", "corr_id"], how="anti")
    by_last = rest.drop_nulls("event_id").sort("start").join_asof(
        recs.drop_nulls("event_id").sort("rec_start").drop("event_sync_id"), left_on="start",
        right_on="rec_start", by=["pid", "event_id"], strategy="backward", check_sortedness=False,
    ).drop_nulls("rec_start")  # fmt: skip
    tied = pl.concat([by_sync.select("pid", "corr_id", "start", "wait_stream", "rec_stream",
                                     "rec_start"),
                      by_last.select("pid", "corr_id", "start", "wait_stream", "rec_stream",
                                     "rec_start")]).drop_nulls(["wait_stream", "rec_stream"])
    unmatched = len(waits) - len(tied)
    if tied.is_empty():
        return unmatched
    ops = launched.drop_nulls("api_start").select("node", "pid", "stream", "api_start").sort(
        "api_start")
    before = tied.sort("rec_start").join_asof(
        ops.rename({"node": "before"}), left_on="rec_start", right_on="api_start",
        by_left=["pid", "rec_stream"], by_right=["pid", "stream"], strategy="backward",
        allow_exact_matches=False, check_sortedness=False)  # fmt: skip
    after = before.sort("start").join_asof(
        ops.rename({"node": "after"}).drop("api_start").with_columns(
            ops["api_start"].alias("a_start")), left_on="start", right_on="a_start",
        by_left=["pid", "wait_stream"], by_right=["pid", "stream"], strategy="forward",
        allow_exact_matches=False, check_sortedness=False,
    ).drop_nulls(["before", "after"])  # fmt: skip
    edges.add(2 * after["before"].to_numpy() + 1, 2 * after["after"].to_numpy(), 0, "event")
    return unmatched + (len(tied) - len(after))


def _inferred_edges(launched: pl.DataFrame, edges: _Edges) -> None:
    """Cross-stream waits inferred from the GPU's timing (module docstring: ``inferred``)."""
    ops = launched.select("node", "pid", "device", "stream", "start", "end", "api_start")
    ends = ops.select(pl.col("node").alias("u"), "pid", "device",
                      pl.col("stream").alias("u_stream"), pl.col("end").alias("u_end")
                      ).sort("u_end")  # fmt: skip
    prev_end = ops.sort("pid", "device", "stream", "start", "end").with_columns(
        pl.col("end").shift(1).over("pid", "device", "stream").alias("prev_end"))
    found = prev_end.sort("start").join_asof(
        ends, left_on="start", right_on="u_end", by=["pid", "device"], strategy="backward",
        check_sortedness=False).filter(
        (pl.col("u_stream") != pl.col("stream"))
        & (pl.col("start") - pl.col("u_end") <= INFER_GAP_NS)
        & (pl.col("prev_end").is_null() | (pl.col("prev_end") < pl.col("u_end")))
        & (pl.col("api_start").is_null() | (pl.col("api_start") < pl.col("u_end"))))  # fmt: skip
    edges.add(2 * found["u"].to_numpy() + 1, 2 * found["node"].to_numpy(), 0, "inferred")


def build_graph(kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame,
                syncs: pl.DataFrame, records: pl.DataFrame,
                matched: pl.DataFrame | None = None) -> DepGraph:  # fmt: skip
    """The graph of classified ``kernels`` (with ``class`` and ``channel``), ``memops`` and
    ``runtime`` (canonical tables), the sync and event-record tables, and ``matched``: the
    collectives matched across ranks (rows of :func:`~nsysmoe.measure.collectives.match`
    with ``pid, device, start, end, name, step, channel, k, last``), or None."""
    nodes = _nodes(kernels, memops, runtime)
    n_ops = len(kernels) + len(memops)
    ops = nodes.head(n_ops).with_columns(
        pl.concat([kernels["corr_id"], memops["corr_id"]]).alias("corr_id"))
    api = nodes.slice(n_ops).with_columns(runtime["corr_id"], runtime["api"])
    edges = _Edges()
    _stream_edges(ops, edges)
    launched = _launch_edges(ops, _first_calls(api), edges)
    _host_edges(api, edges)
    held = _release_edges(ops, launched, api, syncs, edges)
    unmatched = _event_edges(launched, api, syncs, records, edges)
    untied = api.filter(pl.col("api") == "stream_wait")["pid"].unique() if unmatched else None
    if untied is not None and len(untied):
        _inferred_edges(launched.filter(pl.col("pid").is_in(untied.implode())), edges)
    weight = (nodes["end"] - nodes["start"]).to_numpy().copy()
    weight[held] = 0
    if matched is not None and not matched.is_empty():
        nodes, weight = _collective_edges(nodes, kernels, matched, weight, edges)
    n = len(nodes)
    edges.add(2 * np.arange(n), 2 * np.arange(n) + 1, weight, "duration")
    t = np.empty(2 * n, np.int64)
    t[0::2], t[1::2] = nodes["start"].to_numpy(), nodes["end"].to_numpy()
    return _assemble(nodes, t, edges, unmatched)


def _collective_edges(nodes: pl.DataFrame, kernels: pl.DataFrame, matched: pl.DataFrame,
                      weight: np.ndarray, edges: _Edges) -> tuple[pl.DataFrame, np.ndarray]:
    """Barriers for matched collective instances: member start → barrier (at the last
    arrival) → member end, weighted by the member's transfer (which its own weight becomes).
    Returns the nodes with the barriers added (members' category ``<channel>.transfer``)."""
    k = kernels.select("pid", "device", "start", "end", "name").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("node")).unique(
        ["pid", "device", "start", "end", "name"], keep="first")  # fmt: skip
    rows = matched.select("pid", "device", "start", "end", "name", "step", "channel", "k",
                          "last").join(k, on=["pid", "device", "start", "end", "name"])
    if rows.is_empty():
        return nodes, weight
    first = len(nodes)
    inst = rows.select("step", "channel", "name", "k", "last").group_by(
        "step", "channel", "name", "k", maintain_order=True).agg(pl.col("last").max()
    ).with_columns((pl.int_range(pl.len(), dtype=pl.Int64) + first).alias("barrier"))
    rows = rows.join(inst.drop("last"), on=["step", "channel", "name", "k"])
    member, barrier = rows["node"].to_numpy(), rows["barrier"].to_numpy()
    transfer = rows.select(pl.col("end") - pl.min_horizontal("last", "end")).to_series().to_numpy()
    edges.add(2 * member, 2 * barrier, 0, "collective")
    edges.add(2 * barrier + 1, 2 * member + 1, transfer, "collective")
    weight = weight.copy()
    weight[member] = transfer
    bnodes = inst.select(
        pl.col("barrier").alias("node"), pl.lit("barrier").alias("kind"),
        pl.lit(None, pl.Int64).alias("pid"), pl.lit(None, pl.Int64).alias("device"),
        pl.lit(None, pl.Int64).alias("stream"), pl.lit(None, pl.Int64).alias("tid"),
        pl.col("last").alias("start"), pl.col("last").alias("end"),
        (pl.col("channel") + ".transfer").alias("category"), pl.lit(None, pl.Int64).alias("row"),
    ).cast(NODE_SCHEMA)  # fmt: skip
    cat = nodes["category"].to_numpy().astype(object)
    cat[member] = (rows["channel"] + ".transfer").to_numpy()
    nodes = nodes.with_columns(pl.Series("category", cat, dtype=pl.String))
    return pl.concat([nodes, bnodes]), np.concatenate([weight, np.zeros(len(bnodes), np.int64)])


def categories_of(node_categories: pl.Series) -> tuple[str, ...]:
    """The graph's categories: :data:`BASE_CATEGORIES`, then per channel (report order) the
    channel's own (time not split), its ``.transfer`` and its ``.wait``."""
    base = set(BASE_CATEGORIES)
    channels = {c.removesuffix(".transfer") for c in node_categories.unique().drop_nulls()
                if c not in base}  # fmt: skip
    out = list(BASE_CATEGORIES)
    for ch in sorted(channels, key=channel_order_key):
        out += [ch, f"{ch}.transfer", f"{ch}.wait"]
    return tuple(out)


def _assemble(nodes: pl.DataFrame, t: np.ndarray, edges: _Edges, unmatched: int) -> DepGraph:
    """Keep the edges the times allow, in CSR order over destination events (a destination's
    edges by :data:`EDGE_KINDS` order), each with the categories the walk reads."""
    src = np.concatenate([p[0] for p in edges.parts])
    dst = np.concatenate([p[1] for p in edges.parts])
    w = np.concatenate([p[2] for p in edges.parts])
    kind = np.concatenate([np.full(p[0].size, p[3], np.int8) for p in edges.parts])
    bad = t[src] + w > t[dst]
    dropped = {EDGE_KINDS[k]: int(c) for k, c in enumerate(np.bincount(kind[bad],
                                                                      minlength=len(EDGE_KINDS)))
               if c}  # fmt: skip
    keep = ~bad
    src, dst, w, kind = src[keep], dst[keep], w[keep], kind[keep]
    order = np.lexsort((kind, dst))
    src, dst, w, kind = src[order], dst[order], w[order], kind[order]
    indptr = np.zeros(t.size + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=t.size), out=indptr[1:])
    categories = categories_of(nodes["category"])
    code = {c: i for i, c in enumerate(categories)}
    node_cat = nodes["category"].replace_strict(code, return_dtype=pl.Int64).to_numpy()
    wait_of = np.array([code.get(c.removesuffix(".transfer") + ".wait", -1) for c in categories],
                       np.int64)  # fmt: skip
    dst_node = dst // 2
    weight_cat = node_cat[dst_node]
    delay_cat = weight_cat.copy()
    delay_cat[(kind == KIND["stream"]) | (kind == KIND["event"]) | (kind == KIND["inferred"])
              | (kind == KIND["collective"])] = code["unexplained"]  # fmt: skip
    delay_cat[(kind == KIND["launch"]) | (kind == KIND["host"])] = code["host"]
    delay_cat[kind == KIND["sync"]] = code["sync"]
    barrier_in = (kind == KIND["collective"]) & (dst % 2 == 1)
    wait_edge = np.where(barrier_in, dst - 1, -1)
    wait_cat = np.where(barrier_in, wait_of[weight_cat], -1)
    counts = {EDGE_KINDS[k]: int(c) for k, c in enumerate(np.bincount(kind,
                                                                     minlength=len(EDGE_KINDS)))}
    return DepGraph(nodes, t, indptr, src, w, kind.astype(np.int64), weight_cat, delay_cat,
                    wait_edge, wait_cat, categories, node_cat, counts, dropped, unmatched)
