"""What bounds the step, and what each knob could buy: the critical path of every iteration
and what-if replays, on a trace's dependency graph (:mod:`nsysmoe.depgraph`).

*Iteration boundaries*: iteration i of a process runs from its first GPU op's start to the
next iteration's first op's start (the process's iteration window); the path of iteration i
walks back from that next op's start event, along each event's *binding* predecessor (the one
that allowed it last), to the window's start. Every nanosecond of the window is one segment:
an op's own time (its category: ``gemm``, ``attention``, ``compute.other``, ``memcpy``,
``memset``, a channel's ``.transfer``, or the channel's own name where no peer was matched),
CPU time in or between CUDA calls and launch latency (``host``), a return from a host
synchronisation after the GPU released it (``sync``), a wait for a collective's last peer
(``<channel>.wait``, in a rank's own path), time after the last op of a trace (``idle``), and
``unexplained`` — an op that started later than every known predecessor allows. The job's
path of an iteration is that of its slowest process, through cross-rank edges (so a wait for
a straggler is the straggler's work on the path).

*Replay*: every event keeps its measured delay after its predecessors (``t = max(pred + w) +
delay``) and roots keep their time, so the identity replay reproduces the timeline; a scenario
changes weights (``ep.combine*0.5``: that channel's transfer, and unmatched kernels of it, take
half the time), only from each process's window start on, and the replay predicts every event
again. A scenario's predicted step is the window's replayed length (the slowest process's)
over its iterations: one iteration alone would mix in how far its start moved. A part that
takes no time (``*0``) is an upper bound on any knob that shortens it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from nsysmoe.depgraph.build import KIND, DepGraph, build_graph
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.launch_calls import launches_of
from nsysmoe.model import ClassifiedTrace
from nsysmoe.results import CriticalPath, PathIteration, WhatIf

#: a scenario: a target (a category, a channel glob like ``nccl.*``, or ``comm`` for every
#: channel) and the factor its time is multiplied by
SCENARIO = re.compile(
    r"^\s*(?P<target>[A-Za-z0-9_.?*\[\]-]+?)\s*\*\s*(?P<factor>\d+(?:\.\d*)?|\.\d+)\s*$")
STRAGGLER = "straggler"
#: the knob a target stands for (the seeds' knobs); another target reads "a faster TARGET"
KNOBS = {
    "ep.dispatch": "EP overlap / a faster dispatcher (dispatch)",
    "ep.combine": "EP overlap / a faster dispatcher (combine)",
    "ep.sync": "EP overlap (dispatcher syncs)",
    "ep.*": "EP overlap / a faster dispatcher (every EP channel)",
    "comm": "perfect overlap of all communication",
    "host": "CUDA graphs: no host launch overhead",
    "gemm": "faster GEMMs",
    "attention": "faster attention",
    STRAGGLER: "fix the straggler (its kernels at the others' median)",
}
TOP = 10
PATH_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "step": pl.Int64, "category": pl.String, "ns": pl.Int64, "peer": pl.Int64,
}  # fmt: skip
DRAWN_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "pid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
    "category": pl.String,
}  # fmt: skip
TOP_SCHEMA: dict[str, pl.DataType] = {
    "category": pl.String, "name": pl.String, "pid": pl.Int64, "ns": pl.Int64, "count": pl.Int64,
}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A replayed change: ``target`` × ``factor`` (or the straggler's kernels at the median)."""

    text: str
    target: str
    factor: float

    @property
    def knob(self) -> str:
        if self.target in KNOBS:
            return KNOBS[self.target]
        if self.target.startswith("nccl."):
            return f"overlap or fewer bytes ({self.target})"
        return f"a faster {self.target}"

    @property
    def bound(self) -> bool:
        """A part taking no time bounds every knob that shortens it."""
        return self.factor == 0 and self.target != STRAGGLER


def parse_scenario(text: str) -> Scenario:
    """``--what-if`` text: ``TARGET*FACTOR`` (``ep.combine*0.5``, ``nccl.**0``,
    ``comm*0``, ``host*0``, ``gemm*0.9``) or ``straggler``."""
    if text.strip() == STRAGGLER:
        return Scenario(STRAGGLER, STRAGGLER, 1.0)
    m = SCENARIO.match(text)
    if m is None:
        raise NsysmoeError(
            f"--what-if {text!r}: expected TARGET*FACTOR (a channel or category and a factor "
            "≥ 0, e.g. ep.combine*0.5, nccl.**0, comm*0, host*0) or 'straggler'")
    return Scenario(text.strip(), m["target"], float(m["factor"]))


def _targets(g: DepGraph, target: str) -> np.ndarray:
    """Category codes a target names: a category or channel glob (a channel with its
    ``.transfer``; ``comm``: every channel)."""
    cats = g.categories
    if target == "comm":
        chans = {c.removesuffix(".transfer") for c in cats if c.endswith(".transfer")}
    else:
        chans = {c for c in cats if fnmatch.fnmatchcase(c, target)}
    names = chans | {f"{c}.transfer" for c in chans if f"{c}.transfer" in cats}
    return np.array([i for i, c in enumerate(cats) if c in names and not c.endswith(".wait")],
                    np.int64)  # fmt: skip


@dataclass(frozen=True)
class Solved:
    """A graph with its topological order, each event's binding edge and delay."""

    g: DepGraph
    order: np.ndarray
    bind: np.ndarray
    delay: np.ndarray


def solve(g: DepGraph) -> Solved:
    """The graph's topological order, each event's binding edge and delay."""
    from nsysmoe.depgraph import core  # numba: imported where first used

    order = core.topological_order(g.indptr, g.src, g.t)
    bind, delay = core.settle(order, g.indptr, g.src, g.w, g.t)
    return Solved(g, order, bind, delay)


def replay_times(s: Solved, w: np.ndarray | None = None, delay: np.ndarray | None = None
                 ) -> np.ndarray:  # fmt: skip
    """Every event's replayed time with weights ``w`` and delays ``delay`` (measured ones
    where None)."""
    from nsysmoe.depgraph import core  # numba: imported where first used

    return core.replay(s.order, s.g.indptr, s.g.src, s.g.w if w is None else w, s.g.t, s.bind,
                       s.delay if delay is None else delay)  # fmt: skip


def _own_edges(g: DepGraph, nodes: np.ndarray) -> np.ndarray:
    """The edges carrying these nodes' own time: each one's duration edge (the first edge into
    its end event: kind 0 sorts first) and, for a matched collective, the barrier's edge into
    its end (its transfer)."""
    first = g.indptr[2 * nodes + 1]
    last = g.indptr[2 * nodes + 2]
    has = first < last
    dur = first[has & (g.kind[np.minimum(first, g.kind.size - 1)] == KIND["duration"])]
    nxt = first + 1
    coll = nxt[(nxt < last) & (g.kind[np.minimum(nxt, g.kind.size - 1)] == KIND["collective"])]
    return np.concatenate([dur, coll])


def scaled(s: Solved, sc: Scenario, straggler: tuple[np.ndarray, np.ndarray] | None,
           since: int | np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """The weights and delays of a scenario (None: it names nothing in this trace): the
    targets' own time (duration edges, a collective's transfer) and, for ``host``, the delays
    a launch or a host predecessor bound, times the factor; with ``since`` (one time, or per
    node: its process's window start), only of what starts at or after it (of a delay, its
    part after it)."""
    g = s.g
    if sc.target == STRAGGLER:
        if straggler is None:
            return None
        w = g.w.copy()
        w[straggler[0]] = straggler[1]
        return w, s.delay
    codes = np.array([g.code("host")]) if sc.target == "host" else _targets(g, sc.target)
    hit_node = np.isin(g.node_cat, codes)
    if not hit_node.any():
        return None
    if since is not None:
        hit_node &= g.t[0::2] >= since
        since = np.repeat(np.broadcast_to(since, hit_node.shape), 2)  # per event
    nodes = np.nonzero(hit_node)[0]
    hit = _own_edges(g, nodes)
    w = g.w.copy()
    w[hit] = np.rint(w[hit] * sc.factor).astype(np.int64)
    delay = s.delay
    hit_kind = np.isin(g.delay_cats(), codes)
    if hit_kind.any():
        bound = s.bind >= 0
        dhit = np.zeros(bound.size, bool)
        dhit[bound] = hit_kind[g.kind[s.bind[bound]]]
        if since is not None:
            dhit &= g.t > since
        delay = delay.copy()
        # only a delay's part in the window changes (one ending at its first op can lie before)
        part = (delay[dhit] if since is None
                else np.minimum(delay[dhit], g.t[dhit] - since[dhit]))  # fmt: skip
        delay[dhit] += np.rint(part * sc.factor).astype(np.int64) - part
    return w, delay


def _boundaries(g: DepGraph, windows: pl.DataFrame) -> pl.DataFrame:
    """Per (pid, step) window: the start event of its first op (``b0``) and the event the path
    ends at (``b1``): the start of the op that opens the next window, where one starts at the
    window's end; else the end of the last op that ended by then (the rest of the window is
    an idle tail)."""
    n_ops = g.n_rows[0] + g.n_rows[1]
    ops = pl.DataFrame({"node": np.arange(n_ops, dtype=np.int64), "pid": g.node_pid[:n_ops],
                        "start": g.t[0:2 * n_ops:2], "end": g.t[1:2 * n_ops:2]})
    by_start = ops.sort("start", "node")
    w = windows.select("pid", "step", "start_ns", "end_ns").sort("start_ns")
    first = w.join_asof(by_start.select("pid", pl.col("start").alias("s0"),
                                        pl.col("node").alias("n0")),
                        left_on="start_ns", right_on="s0", by="pid", strategy="forward",
                        check_sortedness=False).sort("end_ns")  # fmt: skip
    nxt = first.join_asof(by_start.select("pid", pl.col("start").alias("s1"),
                                          pl.col("node").alias("n1")),
                          left_on="end_ns", right_on="s1", by="pid", strategy="forward",
                          check_sortedness=False)  # fmt: skip
    done = nxt.join_asof(ops.sort("end", "node").select("pid", pl.col("end").alias("e1"),
                                                        pl.col("node").alias("nl")),
                         left_on="end_ns", right_on="e1", by="pid", strategy="backward",
                         check_sortedness=False)  # fmt: skip
    out = done.with_columns(
        (2 * pl.col("n0")).alias("b0"),
        pl.when(pl.col("s1") == pl.col("end_ns")).then(2 * pl.col("n1"))
        .otherwise(2 * pl.col("nl") + 1).alias("b1"),
    )  # fmt: skip
    return (out.drop_nulls(["b0", "b1"]).filter(pl.col("s0") < pl.col("end_ns"))
            .select("pid", "step", "start_ns", "end_ns", "b0", "b1").sort("step", "pid"))


def walk_paths(s: Solved, ends: np.ndarray, stops: np.ndarray, follow: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The critical paths back from events ``ends`` to times ``stops``
    (:func:`nsysmoe.depgraph.core.walk`)."""
    from nsysmoe.depgraph import core  # numba: imported where first used

    g = s.g
    return core.walk(np.asarray(ends, np.int64), np.asarray(stops, np.int64), g.t, g.src, g.w,
                     g.kind, s.bind, g.node_cat, g.delay_cats(), g.wait_cats(),
                     g.code("unexplained"), KIND["collective"], follow)  # fmt: skip


def _straggler(g: DepGraph, b: pl.DataFrame, names: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """The straggler scenario's duration edges and their new weights: on the process whose
    matched compute kernels took longest, each of them at the median duration of the others'.
    Kernels are matched by position: the i-th compute kernel of an iteration on every process,
    where all of them have the same name (``names``: a code per kernel row)."""
    n_k = g.n_rows[0]
    compute = np.isin(g.node_cat[:n_k], [g.code("gemm"), g.code("attention"),
                                         g.code("compute.other")])  # fmt: skip
    pids = np.unique(b["pid"].to_numpy())
    if pids.size < 2:
        return None
    per_pid = []
    for p in pids:  # per process (a handful): vectorised over its kernels
        mine = b.filter(pl.col("pid") == p).sort("start_ns")
        nodes = np.nonzero(compute & (g.node_pid[:n_k] == p))[0]
        nodes = nodes[np.argsort(g.t[2 * nodes], kind="stable")]
        start = g.t[2 * nodes]
        at = np.searchsorted(mine["start_ns"].to_numpy(), start, side="right") - 1
        ok = (at >= 0) & (start < mine["end_ns"].to_numpy()[np.maximum(at, 0)])
        nodes, at = nodes[ok], at[ok]
        first = np.searchsorted(at, at, side="left")  # at is sorted: each step's first index
        key = mine["step"].to_numpy()[at].astype(np.int64) * 2**32 + (np.arange(at.size) - first)
        per_pid.append((key, nodes))
    common = per_pid[0][0]
    for key, _ in per_pid[1:]:
        common = np.intersect1d(common, key, assume_unique=True)
    if common.size == 0:
        return None
    nodes = np.stack([nd[np.searchsorted(key, common)] for key, nd in per_pid])
    same = (names[nodes] == names[nodes[0]]).all(axis=0)
    nodes = nodes[:, same]
    if nodes.shape[1] == 0:
        return None
    dur = g.t[2 * nodes + 1] - g.t[2 * nodes]
    slow = int(np.argmax(dur.sum(axis=1)))
    others = np.delete(dur, slow, axis=0)
    median = np.rint(np.median(others, axis=0)).astype(np.int64)
    return _own_edges(g, nodes[slow])[: nodes.shape[1]], median


#: the kernel columns the graph reads
KERNEL_COLUMNS = ("pid", "device", "stream", "start", "end", "corr_id", "name", "short_name",
                  "class", "channel")
#: the most GPU ops the graph holds: a window with more has its path walked over the middle
#: run of whole iterations that fits (said in the report), so the cost is bounded by this,
#: not by the trace (the steady iterations of one run repeat one another)
MAX_PATH_OPS = 100_000


@dataclass(frozen=True)
class PathRows:
    """The tables the graph is built from (the trace's, or the part around the iterations
    walked)."""

    kernels: pl.DataFrame
    memops: pl.DataFrame
    runtime: pl.DataFrame


def walked_iterations(kept: list[int], n_ops: int, budget: int | None = None) -> list[int]:
    """The kept iterations the path is walked over: all of them while the window's ops fit
    in ``budget`` (default :data:`MAX_PATH_OPS`), else the middle run of whole iterations
    that does (at least one)."""
    budget = MAX_PATH_OPS if budget is None else budget
    if n_ops <= budget or len(kept) <= 1:
        return list(kept)
    n = max(1, len(kept) * budget // n_ops)
    first = (len(kept) - n) // 2
    return list(kept[first:first + n])


def span_of(windows: pl.DataFrame, steps: list[int]) -> tuple[int, int]:
    """[lo, hi] of the iterations ``steps`` over every process's windows."""
    mine = windows.filter(pl.col("step").is_in(steps))
    return int(mine["start_ns"].min()), int(mine["end_ns"].max())


def first_call(ops: pl.DataFrame, lo: int, hi: int) -> int | None:
    """The earliest launch (``api_start``) of the launched ``ops`` that start in [lo, hi]."""
    return ops.select(pl.col("api_start").filter(
        (pl.col("start") >= lo) & (pl.col("start") <= hi)).min()).item()  # fmt: skip


def rows_around(kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame, lo: int,
                hi: int, call: int | None, keep: tuple[str, ...] = ()) -> PathRows:  # fmt: skip
    """The GPU ops that start in [lo, hi] (with the op that opens the next window, which ends
    the last path) and the CUDA calls from the earliest launch of those ops on (``call``: a
    host that ran ahead launched them earlier); nothing more, so the op budget bounds the
    graph. ``keep``: kernel columns kept besides those the graph reads."""
    call_lo = lo if call is None else min(lo, int(call))
    ops = (pl.col("start") >= lo) & (pl.col("start") <= hi)
    calls = (pl.col("start") >= call_lo) & (pl.col("start") <= hi)
    return PathRows(kernels.select(*KERNEL_COLUMNS, *keep).filter(ops), memops.filter(ops),
                    runtime.filter(calls))  # fmt: skip


def _around(source: ClassifiedTrace, windows: pl.DataFrame, steps: list[int]) -> PathRows:
    """The rows the iterations ``steps`` need (:func:`rows_around`)."""
    lo, hi = span_of(windows, steps)
    trace = source.trace
    call = first_call(launches_of(trace).ops, lo, hi)
    return rows_around(source.kernels, trace.memops, trace.runtime, lo, hi, call)


def ops_in_window(windows: pl.DataFrame, kernels: pl.DataFrame, memops: pl.DataFrame) -> int:
    """The GPU ops that start in the windows' span [first start, last end): what the op
    budget (:func:`walked_iterations`) is counted on."""
    lo, hi = windows["start_ns"].min(), windows["end_ns"].max()
    in_window = ((pl.col("start") >= lo) & (pl.col("start") < hi)).sum()
    return int(kernels.select(in_window).item() + memops.select(in_window).item())


def critical_path(source: ClassifiedTrace, windows: pl.DataFrame, kept: list[int],
                  matched: pl.DataFrame | None = None,
                  asked: tuple[str, ...] = ()) -> CriticalPath | None:  # fmt: skip
    """The critical path of each kept iteration and the what-if replays (module docstring);
    ``windows``: each process's iteration windows on the GPU timeline
    (:func:`nsysmoe.measure.steps.process_windows`); ``matched``: collectives matched across
    the trace's GPUs; ``asked``: the user's scenarios. None without iterations to walk. The
    graph holds the iterations walked and their neighbours only; a window of more than
    :data:`MAX_PATH_OPS` GPU ops is walked over its middle iterations that fit
    (:func:`walked_iterations`)."""
    trace = source.trace
    scenarios = [parse_scenario(a) for a in asked]
    kept = sorted(kept)
    windows = windows.filter(pl.col("step").is_in(kept))
    if windows.is_empty() or source.kernels.is_empty():
        return None
    walked = walked_iterations(kept, ops_in_window(windows, source.kernels, trace.memops))
    rows = _around(source, windows, walked)
    return path_of(rows, trace.syncs, trace.event_records, windows.filter(
        pl.col("step").is_in(walked)), len(kept), matched, scenarios)  # fmt: skip


def path_of(rows: PathRows, syncs: pl.DataFrame, event_records: pl.DataFrame,
            windows: pl.DataFrame, n_kept: int, matched: pl.DataFrame | None,
            scenarios: list[Scenario]) -> CriticalPath | None:  # fmt: skip
    """The path and replays on the graph of ``rows`` (:func:`rows_around`) over the walked
    iterations' ``windows``, of a window of ``n_kept`` iterations."""
    g = build_graph(rows.kernels, rows.memops, rows.runtime, syncs, event_records, matched)
    b = _boundaries(g, windows)
    if b.is_empty():
        return None
    return replace(_measure(solve(g), b, scenarios, rows), window_iterations=n_kept)


def _step_ids(b: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The distinct steps of the boundary rows (sorted) and each row's index among them."""
    steps, idx = np.unique(b["step"].to_numpy(), return_inverse=True)
    return steps, idx


def _job_steps(times: np.ndarray, b: pl.DataFrame, tail: np.ndarray) -> np.ndarray:
    """Per step, the slowest process's window on ``times``."""
    steps, idx = _step_ids(b)
    per_row = times[b["b1"].to_numpy()] - times[b["b0"].to_numpy()] + tail
    out = np.full(steps.size, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(out, idx, per_row)
    return out


def _measure(s: Solved, b: pl.DataFrame, asked: list[Scenario], rows: PathRows
             ) -> CriticalPath:  # fmt: skip
    g = s.g
    cats = g.categories
    idle, unexplained = g.code("idle"), g.code("unexplained")
    b1 = b["b1"].to_numpy()
    start_ns, end_ns = b["start_ns"].to_numpy(), b["end_ns"].to_numpy()
    # a path ending at an op's end (a process's last op) leaves the rest of its window idle
    tail = np.where(b1 % 2 == 1, np.maximum(end_ns - g.t[b1], 0), 0)
    measured = end_ns - start_ns
    per_rank = _per_rank(s, b, tail)
    codes = rows.kernels["short_name"].cast(pl.Categorical).to_physical().to_numpy()
    # the job's path of a step: that of its slowest process, through cross-rank edges
    steps, idx = _step_ids(b)
    slow = np.full(steps.size, -1, np.int64)
    order = np.lexsort((b["pid"].to_numpy(), -measured, idx))
    first = np.ones(order.size, bool)
    first[1:] = idx[order][1:] != idx[order][:-1]
    slow[idx[order][first]] = order[first]
    path, c, ns, at, _ = walk_paths(s, b1[slow], start_ns[slow], follow=True)
    seg = np.zeros((steps.size, len(cats)), np.int64)
    np.add.at(seg, (path, c), ns)
    seg[:, idle] += tail[slow]
    replayed = _job_steps(replay_times(s), b, tail)
    pids = b["pid"].to_numpy()
    iterations = tuple(
        PathIteration(int(steps[i]), int(pids[slow[i]]), int(measured[slow[i]]),
                      int(seg[i].sum()), int(replayed[i]), int(seg[i, unexplained]),
                      {cats[j]: int(seg[i, j]) for j in np.nonzero(seg[i])[0]})
        for i in range(steps.size))  # fmt: skip
    total = seg.sum(axis=0)
    composition = {cats[j]: int(total[j]) for j in np.nonzero(total)[0]}
    job = measured[slow]
    what_if, notes = _what_if(s, b, tail, asked, codes)
    errors = np.abs(replayed - job) / np.maximum(job, 1)
    drawn = _drawn(g, path, c, ns, at, b1[slow], tail[slow], steps, job)
    return CriticalPath(
        iterations=iterations,
        composition=dict(sorted(composition.items(), key=lambda kv: (-kv[1], kv[0]))),
        top=_top(g, c, ns, at, rows, codes),
        per_rank=per_rank,
        what_if=what_if,
        notes=notes,
        edges=dict(g.edge_counts),
        dropped=dict(g.dropped),
        unmatched_waits=g.unmatched_waits,
        replay_error_pct=100 * float(np.median(errors)) if errors.size else 0.0,
        drawn=drawn,
    )


def _drawn(g: DepGraph, path: np.ndarray, c: np.ndarray, ns: np.ndarray, at: np.ndarray,
           ends: np.ndarray, tail: np.ndarray, steps: np.ndarray, job: np.ndarray
           ) -> pl.DataFrame:  # fmt: skip
    """The path of the iteration whose step is the median one, as intervals on the timeline
    (:data:`DRAWN_SCHEMA`): a path's segments run back from its end without a gap, so each
    one's start is its end less its length. A delay or an op's time is on the rank of the
    event it ends at."""
    if steps.size == 0:
        return pl.DataFrame(schema=DRAWN_SCHEMA)
    i = int(np.argsort(job, kind="stable")[(job.size - 1) // 2])
    mine = path == i
    seg_ns = ns[mine]
    seg_end = g.t[ends[i]] - np.concatenate([[0], np.cumsum(seg_ns)[:-1]])
    out = pl.DataFrame({
        "step": np.full(seg_ns.size, steps[i], np.int64), "pid": g.node_pid[at[mine] // 2],
        "start_ns": seg_end - seg_ns, "end_ns": seg_end,
        "category": pl.Series(c[mine]).replace_strict(
            list(range(len(g.categories))), list(g.categories), return_dtype=pl.String)})
    if tail[i]:
        out = pl.concat([pl.DataFrame({
            "step": [int(steps[i])], "pid": [int(g.node_pid[ends[i] // 2])],
            "start_ns": [int(g.t[ends[i]])], "end_ns": [int(g.t[ends[i]] + tail[i])],
            "category": ["idle"]}), out])  # fmt: skip
    return out.cast(DRAWN_SCHEMA).sort("start_ns")


def _per_rank(s: Solved, b: pl.DataFrame, tail: np.ndarray) -> pl.DataFrame:
    """Per (pid, step), the path of that process's own step: a wait for a collective's last
    peer stays on it as ``<channel>.wait`` with the peer's pid (:data:`PATH_SCHEMA`)."""
    g = s.g
    n_cat = len(g.categories)
    path, c, ns, _, peer = walk_paths(s, b["b1"].to_numpy(), b["start_ns"].to_numpy(),
                                      follow=False)  # fmt: skip
    waited = peer >= 0
    sums = np.bincount(path[~waited] * n_cat + c[~waited], weights=ns[~waited],
                       minlength=len(b) * n_cat).astype(np.int64).reshape(len(b), n_cat)
    sums[:, g.code("idle")] += tail
    row, cat = np.nonzero(sums)
    own = pl.DataFrame({"row": row, "cat": cat, "ns": sums[row, cat],
                        "peer": np.full(row.size, -1, np.int64)})  # fmt: skip
    parts = [own]
    if waited.any():  # a barrier's binding predecessor is the last arrival's start
        last = g.src[s.bind[peer[waited] - 1]].astype(np.int64)
        parts.append(pl.DataFrame({"row": path[waited], "cat": c[waited], "ns": ns[waited],
                                   "peer": g.node_pid[last // 2]}).group_by(
            "row", "cat", "peer").agg(pl.col("ns").sum()).select("row", "cat", "ns", "peer"))
    keys = b.select("pid", "step").with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    cats = list(g.categories)
    return (pl.concat([p.cast(pl.Int64) for p in parts]).join(keys, on="row")
            .with_columns(pl.col("cat").replace_strict(list(range(n_cat)), cats,
                                                       return_dtype=pl.String).alias("category"),
                          pl.col("peer").replace(-1, None))
            .select(list(PATH_SCHEMA)).cast(PATH_SCHEMA).sort("pid", "step", "category", "peer"))


def _window_total(times: np.ndarray, b: pl.DataFrame, tail: np.ndarray,
                  start: np.ndarray) -> int:
    """The window's length on ``times``: per process from its first iteration's measured
    start to its last iteration's end (``times``), the longest."""
    last = b.with_columns(pl.Series("tail", tail)).sort("end_ns").group_by(
        "pid", maintain_order=True).last()  # fmt: skip
    first = b.sort("start_ns").group_by("pid", maintain_order=True).first()
    ends = dict(zip(last["pid"].to_list(), (times[last["b1"].to_numpy()]
                                            + last["tail"].to_numpy()).tolist(), strict=True))
    starts = dict(zip(first["pid"].to_list(), start[first["b0"].to_numpy()].tolist(),
                      strict=True))  # fmt: skip
    return max(ends[p] - starts[p] for p in ends)


def _what_if(s: Solved, b: pl.DataFrame, tail: np.ndarray, asked: list[Scenario],
             names: np.ndarray) -> tuple[tuple[WhatIf, ...], tuple[str, ...]]:  # fmt: skip
    """The default scenarios (each channel, the EP channels, and all channels taking no
    time; no host time; the straggler at the others' speed) and the user's, replayed over the
    window: a scenario changes only what starts in the window, so the window starts where it
    did, and the predicted step is the window's replayed length over its iterations (a
    replay moves iteration boundaries; one iteration alone would mix that shift in); best gain
    first."""
    g = s.g
    channels = [c.removesuffix(".transfer") for c in g.categories if c.endswith(".transfer")]
    present = set(np.unique(g.node_cat).tolist())
    chans = [c for c in channels if present & set(_targets(g, c).tolist())]
    defaults = [Scenario(f"{c}*0", c, 0.0) for c in chans]
    if sum(c.startswith("ep.") for c in chans) > 1:
        defaults.append(Scenario("ep.**0", "ep.*", 0.0))
    if len(chans) > 1:
        defaults.append(Scenario("comm*0", "comm", 0.0))
    defaults.append(Scenario("host*0", "host", 0.0))
    straggler = _straggler(g, b, names) if b["pid"].n_unique() > 1 else None
    if straggler is not None:
        defaults.append(Scenario(STRAGGLER, STRAGGLER, 1.0))
    n = b["step"].n_unique()
    # each process's window starts where it did: a node changes only from its process's start
    first = b.group_by("pid").agg(pl.col("start_ns").min())
    at = dict(zip(first["pid"].to_list(), first["start_ns"].to_list(), strict=True))
    lo = int(b["start_ns"].min())
    since = pl.Series(g.node_pid).replace_strict(
        list(at), list(at.values()), default=lo, return_dtype=pl.Int64).to_numpy()
    measured = _window_total(g.t, b, tail, g.t) / n
    seen, out, notes = set(), [], []
    for sc in [*defaults, *asked]:
        if sc.text in seen:
            continue
        seen.add(sc.text)
        change = scaled(s, sc, straggler, since)
        if change is None:
            if sc in asked:
                named = ", ".join(c for c in g.categories if not c.endswith((".transfer", ".wait"))
                                  and c not in ("idle", "unexplained", "sync"))  # fmt: skip
                notes.append(f"--what-if {sc.text}: names nothing in this trace (its parts: "
                             f"{named}{', straggler' if straggler is not None else ''})")
            continue
        predicted = _window_total(replay_times(s, *change), b, tail, g.t) / n
        out.append(WhatIf(sc.text, sc.knob, predicted, measured, measured - predicted,
                          sc.bound))  # fmt: skip
    return tuple(sorted(out, key=lambda w: (-w.gain_ns, w.scenario))), tuple(notes)


def _top(g: DepGraph, c: np.ndarray, ns: np.ndarray, at: np.ndarray, rows: PathRows,
         codes: np.ndarray) -> pl.DataFrame:  # fmt: skip
    """The path's largest parts over the window: per (category, op name, pid); ``codes``: a
    code per kernel row, one per short name."""
    if c.size == 0:
        return pl.DataFrame(schema=TOP_SCHEMA)
    node = at // 2
    kind = g.node_kind[node]
    row = g.rows()[node]
    k = kind == 0
    name = np.where(k, codes[np.where(k, row, 0)] if codes.size else 0, -1 - kind)
    memop = (kind == 1) | (kind == 2)
    df = pl.DataFrame({"cat": c, "kind": kind, "name": name, "row": row, "pid": g.node_pid[node],
                       "ns": ns, "memop": memop})
    # a memop's own name (few rows); kernels by short name; calls and barriers by kind
    df = df.with_columns(pl.when(pl.col("memop")).then(-100 - pl.col("row")).otherwise("name")
                         .alias("name"))
    top = (df.group_by("cat", "kind", "name", "pid")
           .agg(pl.col("ns").sum(), pl.len().cast(pl.Int64).alias("count"), pl.col("row").first())
           .sort(["ns", "cat", "name", "pid"], descending=[True, False, False, False]).head(TOP))
    kn, mn = rows.kernels["short_name"], rows.memops["name"]
    labels = []
    for kd, r in zip(top["kind"].to_list(), top["row"].to_list(), strict=True):
        if kd == 0:
            labels.append(kn[r])
        elif kd in (1, 2):
            labels.append(mn[r])
        elif kd == 3:
            labels.append("CUDA API calls and the host between them")
        else:
            labels.append("collective barrier (last arrival)")
    cats = list(g.categories)
    return top.with_columns(
        pl.Series("name", labels, dtype=pl.String),
        pl.col("cat").replace_strict(list(range(len(cats))), cats, return_dtype=pl.String)
        .alias("category")).select(list(TOP_SCHEMA)).cast(TOP_SCHEMA)  # fmt: skip
