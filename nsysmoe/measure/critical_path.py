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
half the time) and the replay predicts every event again. The predicted step of an iteration is
the slowest process's replayed window; a scenario's figure is the median over the window's
iterations. A part that takes no time (``*0``) is an upper bound on any knob that shortens it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from nsysmoe.depgraph.build import DepGraph, build_graph
from nsysmoe.errors import NsysmoeError
from nsysmoe.model import ClassifiedTrace
from nsysmoe.results import CriticalPath, PathIteration, WhatIf

#: a scenario: a target (a category, a channel glob like ``nccl.*``, or ``comm`` for every
#: channel) and the factor its time is multiplied by
SCENARIO = re.compile(
    r"^\s*(?P<target>[A-Za-z0-9_.?*\[\]-]+?)\s*\*\s*(?P<factor>\d+(?:\.\d*)?|\.\d+)\s*$")
STRAGGLER = "straggler"
#: the knob a target stands for (seeds' knobs); channels not named here are "communication"
KNOBS = {
    "ep.dispatch": "EP overlap / a faster dispatcher (dispatch)",
    "ep.combine": "EP overlap / a faster dispatcher (combine)",
    "ep.sync": "EP overlap (dispatcher syncs)",
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
    names = chans | {f"{c}.transfer" for c in chans}
    return np.array([i for i, c in enumerate(cats) if c in names and not c.endswith(".wait")],
                    np.int64)  # fmt: skip


@dataclass(frozen=True)
class _Solved:
    g: DepGraph
    order: np.ndarray
    bind: np.ndarray
    delay: np.ndarray


def solve(g: DepGraph) -> _Solved:
    from nsysmoe.depgraph import core  # numba compiles (or loads) on first use only

    order = core.topological_order(g.indptr, g.src, g.t)
    bind, delay = core.settle(order, g.indptr, g.src, g.w, g.t)
    return _Solved(g, order, bind, delay)


def replay_times(s: _Solved, w: np.ndarray | None = None, delay: np.ndarray | None = None
                 ) -> np.ndarray:  # fmt: skip
    """Every event's replayed time with weights ``w`` and delays ``delay`` (measured ones
    where None)."""
    from nsysmoe.depgraph import core

    return core.replay(s.order, s.g.indptr, s.g.src, s.g.w if w is None else w, s.g.t, s.bind,
                       s.delay if delay is None else delay)  # fmt: skip


def scaled(s: _Solved, sc: Scenario, straggler: tuple[np.ndarray, np.ndarray] | None
           ) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """The weights and delays of a scenario (None: it names nothing in this trace)."""
    g = s.g
    w, delay = g.w.copy(), s.delay.copy()
    if sc.target == STRAGGLER:
        if straggler is None:
            return None
        edges, new = straggler
        w[edges] = new
        return w, delay
    codes = _targets(g, sc.target)
    if codes.size == 0 and sc.target not in ("host",):
        return None
    if sc.target == "host":
        codes = np.array([g.categories.index("host")], np.int64)
    hit = np.isin(g.weight_cat, codes) & (g.kind == 0)  # an op's own time
    hit |= np.isin(g.weight_cat, codes) & (g.wait_edge >= 0)  # a collective's transfer
    w[hit] = np.rint(w[hit] * sc.factor).astype(np.int64)
    bound = s.bind >= 0
    dhit = np.zeros_like(bound)
    dhit[bound] = np.isin(g.delay_cat[s.bind[bound]], codes)
    delay[dhit] = np.rint(delay[dhit] * sc.factor).astype(np.int64)
    return w, delay


def _boundaries(g: DepGraph, windows: pl.DataFrame) -> pl.DataFrame:
    """Per (pid, step) window: the start event of its first op (``b0``) and the event the path
    ends at (``b1``: the next op's start; after a process's last op, that op's end)."""
    ops = g.nodes.filter(pl.col("kind") != "api", pl.col("kind") != "barrier").select(
        "node", "pid", "start", "end").sort("pid", "start", "node")  # fmt: skip
    w = windows.select("pid", "step", "start_ns", "end_ns").sort("start_ns")
    first = w.join_asof(ops.select("pid", pl.col("start").alias("s0"), pl.col("node").alias("n0")),
                        left_on="start_ns", right_on="s0", by="pid", strategy="forward",
                        check_sortedness=False).sort("end_ns")  # fmt: skip
    nxt = first.join_asof(ops.select("pid", pl.col("start").alias("s1"),
                                     pl.col("node").alias("n1")),
                          left_on="end_ns", right_on="s1", by="pid", strategy="forward",
                          check_sortedness=False)  # fmt: skip
    last = ops.group_by("pid").agg(pl.col("node").sort_by("end").last().alias("nl"))
    out = nxt.join(last, on="pid", how="left").with_columns(
        (2 * pl.col("n0")).alias("b0"),
        pl.when(pl.col("n1").is_not_null()).then(2 * pl.col("n1"))
        .otherwise(2 * pl.col("nl") + 1).alias("b1"),
    )  # fmt: skip
    return out.drop_nulls(["b0", "b1"]).select("pid", "step", "start_ns", "end_ns", "b0", "b1")


def _walk(s: _Solved, end: int, stop: int, follow: bool
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    from nsysmoe.depgraph import core

    g = s.g
    return core.walk(end, stop, g.t, g.src, g.w, s.bind, g.weight_cat, g.delay_cat, g.wait_edge,
                     g.wait_cat, g.categories.index("unexplained"), follow)  # fmt: skip


def _straggler(s: _Solved, windows: pl.DataFrame, names: pl.Series
               ) -> tuple[np.ndarray, np.ndarray] | None:  # fmt: skip
    """The straggler scenario's duration edges and their new weights: on the process whose
    matched compute kernels took longest (the k-th launch of one kernel name in one iteration,
    present on every process), each of them at the median duration of the others'."""
    g = s.g
    k = g.nodes.filter(pl.col("kind") == "kernel",
                       pl.col("category").is_in(["gemm", "attention", "compute.other"]))
    if k["pid"].n_unique() < 2:
        return None
    w = windows.select("pid", "step", "start_ns", "end_ns").sort("start_ns")
    k = (k.with_columns(names.gather(k["row"]).alias("kernel_name"),
                        (pl.col("end") - pl.col("start")).alias("dur"))
         .sort("start").join_asof(w, left_on="start", right_on="start_ns", by="pid",
                                  check_sortedness=False)
         .filter(pl.col("start") < pl.col("end_ns"))
         .sort("pid", "start", "node")
         .with_columns(pl.int_range(pl.len()).over("pid", "step", "kernel_name").alias("k")))
    n = k["pid"].n_unique()
    key = ["step", "kernel_name", "k"]
    full = k.group_by(key).agg(pl.len().alias("n")).filter(pl.col("n") == n)
    k = k.join(full.drop("n"), on=key)
    if k.is_empty():
        return None
    slow = k.group_by("pid").agg(pl.col("dur").sum()).sort(["dur", "pid"],
                                                            descending=[True, False])["pid"][0]
    others = k.filter(pl.col("pid") != slow).group_by(key).agg(
        pl.col("dur").median().round().cast(pl.Int64).alias("median"))
    mine = k.filter(pl.col("pid") == slow).join(others, on=key)
    # the duration edge sorts first among an event's edges (kind 0)
    edges = g.indptr[2 * mine["node"].to_numpy() + 1]
    return edges, mine["median"].to_numpy()


def critical_path(source: ClassifiedTrace, windows: pl.DataFrame, kept: list[int],
                  matched: pl.DataFrame | None = None,
                  asked: tuple[str, ...] = ()) -> CriticalPath | None:  # fmt: skip
    """The critical path of each kept iteration and the what-if replays (module docstring);
    ``windows``: each process's iteration windows (:func:`nsysmoe.measure.steps.process_windows`);
    ``matched``: collectives matched across the trace's GPUs; ``asked``: the user's scenarios
    (parsed already). None without iterations to walk."""
    trace = source.trace
    scenarios = [parse_scenario(a) for a in asked]
    windows = windows.filter(pl.col("step").is_in(kept))
    if windows.is_empty() or source.kernels.is_empty():
        return None
    g = build_graph(source.kernels, trace.memops, trace.runtime, trace.syncs,
                    trace.event_records, matched)  # fmt: skip
    s = solve(g)
    b = _boundaries(g, windows)
    if b.is_empty():
        return None
    return _measure(s, b, windows, scenarios, source)


def _measure(s: _Solved, b: pl.DataFrame, windows: pl.DataFrame, asked: list[Scenario],
             source: ClassifiedTrace) -> CriticalPath:  # fmt: skip
    g = s.g
    t = g.t
    b1 = b["b1"].to_numpy()
    start_ns, end_ns = b["start_ns"].to_numpy(), b["end_ns"].to_numpy()
    # a path ending at an op's end (a process's last op) leaves the rest of its window idle
    tail = np.where(b1 % 2 == 1, np.maximum(end_ns - t[b1], 0), 0)
    measured = end_ns - start_ns
    b = b.with_columns(pl.Series("measured", measured), pl.Series("tail", tail))
    cats = g.categories
    idle = cats.index("idle")
    pids_of_node = g.nodes["pid"].fill_null(-1).to_numpy()
    rank_rows: list[tuple[int, int, int, int, int]] = []
    for i, (pid, step) in enumerate(zip(b["pid"].to_list(), b["step"].to_list(), strict=True)):
        c, ns, _, peer = _walk(s, int(b1[i]), int(start_ns[i]), follow=False)
        peer_pid = np.full(peer.size, -1, np.int64)
        if (peer >= 0).any():
            peer_pid[peer >= 0] = _event_pid(peer[peer >= 0], s, pids_of_node)
        rank_rows += [(pid, step, int(ci), int(n), int(p)) for ci, n, p in zip(c, ns, peer_pid,
                                                                              strict=True)]
        if tail[i]:
            rank_rows.append((pid, step, idle, int(tail[i]), -1))
    per_rank = pl.DataFrame(rank_rows, schema={"pid": pl.Int64, "step": pl.Int64,
                                               "cat": pl.Int64, "ns": pl.Int64,
                                               "peer": pl.Int64}, orient="row")  # fmt: skip
    per_rank = per_rank.group_by("pid", "step", "cat", "peer").agg(pl.col("ns").sum()).with_columns(
        pl.col("cat").replace_strict(list(range(len(cats))), list(cats), return_dtype=pl.String)
        .alias("category")).select(list(PATH_SCHEMA)).sort("pid", "step", "category", "peer")
    identity = replay_times(s)
    slowest = b.sort(["step", "measured", "pid"], descending=[False, True, False]).unique(
        "step", keep="first", maintain_order=True)  # fmt: skip
    iterations, seg_rows = [], []
    for row in slowest.iter_rows(named=True):
        c, ns, at, _ = _walk(s, row["b1"], row["start_ns"], follow=True)
        seg = np.bincount(c, weights=ns, minlength=len(cats)).astype(np.int64)
        seg[idle] += row["tail"]
        rep = _replayed(identity, b.filter(pl.col("step") == row["step"]))
        iterations.append(PathIteration(
            row["step"], row["pid"], row["measured"], int(seg.sum()), int(rep),
            int(seg[cats.index("unexplained")]),
            {cats[j]: int(seg[j]) for j in range(len(cats)) if seg[j]}))  # fmt: skip
        seg_rows.append((c, ns, at))
    composition: dict[str, int] = {}
    for it in iterations:
        for k, v in it.segments.items():
            composition[k] = composition.get(k, 0) + v
    errors = [abs(i.replay_step_ns - i.step_ns) / i.step_ns for i in iterations if i.step_ns]
    what_if = _what_if(s, b, windows, asked, source.kernels["name"])
    return CriticalPath(
        iterations=tuple(iterations),
        composition=dict(sorted(composition.items(), key=lambda kv: (-kv[1], kv[0]))),
        top=_top(g, seg_rows, source),
        per_rank=per_rank,
        what_if=what_if,
        edges={k: v for k, v in g.edge_counts.items()},
        dropped=dict(g.dropped),
        unmatched_waits=g.unmatched_waits,
        replay_error_pct=100 * float(np.median(errors)) if errors else 0.0,
    )


def _event_pid(events: np.ndarray, s: _Solved, pids: np.ndarray) -> np.ndarray:
    """The pid of each barrier event's last arrival (its binding predecessor's node)."""
    member = s.g.src[s.bind[events - 1]] // 2  # barrier end ← its start ← the last arrival
    return pids[member]


def _replayed(times: np.ndarray, rows: pl.DataFrame) -> int:
    """The job's replayed step: the slowest process's replayed window."""
    b0, b1 = rows["b0"].to_numpy(), rows["b1"].to_numpy()
    return int(np.max(times[b1] - times[b0] + rows["tail"].to_numpy()))


def _what_if(s: _Solved, b: pl.DataFrame, windows: pl.DataFrame, asked: list[Scenario],
             names: pl.Series) -> tuple[WhatIf, ...]:  # fmt: skip
    g = s.g
    channels = [c.removesuffix(".transfer") for c in g.categories if c.endswith(".transfer")]
    defaults = [Scenario(f"{c}*0", c, 0.0) for c in channels]
    if len(channels) > 1:
        defaults.append(Scenario("comm*0", "comm", 0.0))
    defaults.append(Scenario("host*0", "host", 0.0))
    straggler = (_straggler(s, windows, names) if b["pid"].n_unique() > 1
                 else None)
    if straggler is not None:
        defaults.append(Scenario(STRAGGLER, STRAGGLER, 1.0))
    seen, out = set(), []
    measured = b.group_by("step").agg(pl.col("measured").max())["measured"].to_numpy()
    med_measured = float(np.median(measured))
    for sc in [*defaults, *asked]:
        if sc.text in seen:
            continue
        seen.add(sc.text)
        change = scaled(s, sc, straggler)
        if change is None:
            continue
        times = replay_times(s, *change)
        steps = [_replayed(times, rows) for _, rows in b.group_by("step")]
        predicted = float(np.median(steps))
        out.append(WhatIf(sc.text, sc.knob, predicted, med_measured, med_measured - predicted,
                          sc.bound))  # fmt: skip
    return tuple(sorted(out, key=lambda w: -w.gain_ns))


def _top(g: DepGraph, seg_rows: list, source: ClassifiedTrace) -> pl.DataFrame:
    """The path's largest parts over the window: per (category, op name, pid)."""
    if not seg_rows:
        return pl.DataFrame(schema=TOP_SCHEMA)
    cats = np.concatenate([r[0] for r in seg_rows])
    ns = np.concatenate([r[1] for r in seg_rows])
    node = np.concatenate([r[2] for r in seg_rows]) // 2
    nodes = g.nodes.select("kind", "pid", "row")
    df = pl.DataFrame({"cat": cats, "ns": ns, "node": node}).join(
        nodes.with_row_index("node").with_columns(pl.col("node").cast(pl.Int64)), on="node")
    names = _names(df, source)
    df = df.with_columns(names.alias("name")).group_by("cat", "name", "pid").agg(
        pl.col("ns").sum(), pl.len().cast(pl.Int64).alias("count")).sort("ns", descending=True
    ).head(TOP)  # fmt: skip
    return df.with_columns(pl.col("cat").replace_strict(
        list(range(len(g.categories))), list(g.categories), return_dtype=pl.String
    ).alias("category")).select(list(TOP_SCHEMA))  # fmt: skip


def _names(df: pl.DataFrame, source: ClassifiedTrace) -> pl.Series:
    """What each segment's node is called: a kernel's short name, a memop's name, "CUDA API"
    for a call (the export's call names are not read), the channel for a barrier."""
    kname = source.kernels["short_name"]
    mname = source.trace.memops["name"]
    kind, row = df["kind"], df["row"].fill_null(0)
    out = pl.select(
        pl.when(kind == "kernel").then(kname.gather(row.clip(0, max(len(kname) - 1, 0)))
                                        if len(kname) else pl.lit(None, pl.String))
        .when(kind.is_in(["memcpy", "memset"])).then(
            mname.gather(row.clip(0, max(len(mname) - 1, 0))) if len(mname)
            else pl.lit(None, pl.String))
        .when(kind == "api").then(pl.lit("CUDA API calls and the host between them"))
        .otherwise(pl.lit("collective barrier")).alias("name")).to_series()  # fmt: skip
    return out
