"""Why a GPU sat idle: each idle gap split into host-bound, dependency and unexplained time.

Per GPU = (pid, device), over the ops already clipped to an analysis window: the idle gaps are
the maximal stretches of the span [first start, last end) of all GPU work (kernels ∪ memcpy ∪
memset, half-open integer ns) that no op covers. They add up to exactly :mod:`~nsysmoe.measure.
overlap`'s ``idle_ns = span_ns - active_ns``. A gap [g0, g1) is classified by the op(s) that end
it (start == g1) and the start of their launching CUDA API call, ``api_start`` (the runtime row
with the same (pid, corr_id), as in :mod:`nsysmoe.measure.projection`):

* ``host``: the call started at or after the gap began (``api_start >= g0``): the GPU had
  nothing queued, the CPU was late (launch overhead, Python, a data loader);
* ``dependency``: the call started before the gap began (``api_start < g0``): the work was
  already queued but waited on a stream/event sync or a peer;
* ``other``: no op ending the gap has a launch row (null corr_id, no runtime row), or nothing
  ends it at all (see below), so the cause is unknown.

Several ops starting at g1: the earliest-launched (smallest non-null ``api_start``, then the
smallest ``api_tid``) decides; ops without a launch row count only when none has one.

Zero-length ops (start == end) are not GPU activity: they add nothing to the union, never split
a gap and never end one, so they play no part in classifying. They still count for the span,
exactly as in overlap.py (``span = max(end) - min(start)`` over every row), so a zero-length op
before the first (after the last) real one opens a leading (trailing) gap. A leading gap is
ended, and classified, by the first real op; a trailing gap is ended by nothing: ``other``.
Inverted rows (end < start) cover nothing either; readers never produce them.

Everything is vectorised: one sort by (group, start, api_start, api_tid), the previous ops'
running maximum end as a per-group cumulative maximum, and the gap-ending op is the first row
of its start; no Python loop runs per op, per gap or per window (a window's cut takes a
slice of each GPU's gaps: one binary search per GPU, see :func:`gaps_in_window`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from nsysmoe.enclosing import enclosing_pairs
from nsysmoe.measure.iterations import assign_rows
from nsysmoe.measure.launch_calls import launch_table
from nsysmoe.measure.nvtx import display_name

HOST, DEPENDENCY, OTHER = "host", "dependency", "other"
KINDS = (HOST, DEPENDENCY, OTHER)
GPU = ["pid", "device"]

#: The op table of :func:`launch_starts` (api_* null without a launch row).
OPS_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "api_start": pl.Int64,
    "api_tid": pl.Int64,
}
#: The split's figures (ns); the three parts add up to ``idle_ns`` exactly.
SPLIT_COLUMNS = ("idle_ns", "idle_host_ns", "idle_dependency_ns", "idle_other_ns")
SPLIT_SCHEMA: dict[str, pl.DataType] = {c: pl.Int64 for c in SPLIT_COLUMNS}
GAP_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64,
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "gap_ns": pl.Int64,
    "kind": pl.String,
    "api_tid": pl.Int64,
    "nvtx": pl.String,
}


def launch_starts(
    kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame
) -> pl.DataFrame:
    """Kernels and memops (canonical tables) as one op table (:data:`OPS_SCHEMA`), each with the
    start and thread of its launching API call, joined in bulk on (pid, corr_id).

    When several runtime rows share a (pid, corr_id) the earliest start (then smallest tid)
    stands for the call: a gap is host-bound only if even the first sign of the launch came late.
    Null corr ids never match (polars joins do not equate nulls).
    """
    return launch_table(kernels, memops, runtime).ops.select(list(OPS_SCHEMA))


def gaps(ops: pl.DataFrame, by: Sequence[str] = GPU, *, launch: bool = False) -> pl.DataFrame:
    """Every idle gap of every ``by`` group: ``by`` columns, start_ns, end_ns, gap_ns, kind
    (:data:`KINDS`) and api_tid (the deciding call's thread; null for ``other``), in group and
    time order; with ``launch``, also api_start (the deciding call's start; null for
    ``other``), which :func:`gaps_in_window` needs. ``ops`` needs start, end, api_start and
    (optionally) api_tid."""
    by = list(by)
    tid = pl.col("api_tid") if "api_tid" in ops.columns else pl.lit(None, pl.Int64)
    ops = ops.select(
        *by,
        pl.col("start", "end", "api_start").cast(pl.Int64),
        tid.cast(pl.Int64).alias("api_tid"),
    )
    schema = {c: ops.schema[c] for c in by} | {
        c: GAP_SCHEMA[c] for c in ("start_ns", "end_ns", "gap_ns", "kind", "api_tid")
    } | ({"api_start": pl.Int64} if launch else {})
    if ops.is_empty():
        return pl.DataFrame(schema=schema)
    if not by:  # one group: a constant key keeps the grouped code below unchanged
        return gaps(ops.with_columns(_group=pl.lit(0)), ["_group"], launch=launch).drop("_group")
    groups = ops.select(by).unique().sort(by).with_row_index("_g")  # in the output's order
    # only the keys are joined, and the ops are read in place through row numbers: the op
    # table is not copied (a million rows each time)
    g_all = ops.select(by).join(groups, on=by, how="left", maintain_order="left",
                                nulls_equal=True)["_g"]  # fmt: skip
    bounds = (ops.select("start", "end").with_columns(_g=g_all).group_by("_g")
              .agg(lo=pl.col("start").min(), hi=pl.col("end").max()).sort("_g"))  # fmt: skip
    real = np.flatnonzero(ops.select((pl.col("end") > pl.col("start")).fill_null(False))
                          .to_series().to_numpy())  # fmt: skip
    g = g_all.to_numpy().astype(np.int64)[real]
    order = _start_order(g, ops, rows=real)
    at_op = real[order]  # the ops with a length, in (group, start, launch) order
    g, s, e = g[order], _ints(ops["start"], at_op), _ints(ops["end"], at_op)
    lo = bounds["lo"].fill_null(0).to_numpy()
    # each op's g0: the end of everything before it in its group, or for a group's first op
    # the span's start (a leading gap); only the first op of a start can open a gap (the
    # next ones' g0 is at least its end), and it is the earliest-launched: the deciding one
    reach = _group_cum_max(g, e)
    first = np.ones(g.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    g0 = np.empty_like(s)
    g0[1:] = reach[:-1]
    g0[first] = lo[g[first]]
    opens = np.flatnonzero(s > g0)
    # after each group's last real op (or all of a span with none): nothing ends it
    last_of = np.flatnonzero(np.r_[first[1:], True]) if g.size else np.zeros(0, np.int64)
    last = pl.DataFrame({"_g": g[last_of], "reach": reach[last_of]})
    trailing = (
        bounds.join(last, on="_g", how="left")
        .select("_g", pl.coalesce("reach", "lo").alias("start_ns"), pl.col("hi").alias("end_ns"))
        .filter(pl.col("end_ns") > pl.col("start_ns"))
    )
    # the gaps' own columns only, before they are built: each op's arrays are let go
    gap_g, gap_start, gap_end, ender = g[opens], g0[opens], s[opens], at_op[opens]
    del g, s, e, reach, g0, first, at_op, order, real, opens
    # a group's trailing gap starts after all its inner gaps: it goes right after them
    t_g = trailing["_g"].to_numpy().astype(np.int64)
    at = np.searchsorted(gap_g, t_g, side="right")
    decider = pl.Series(np.insert(ender, at, -1))  # the op ending each gap; -1: none
    api = ops.select(pl.col("api_start", "api_tid").gather(decider.set(decider < 0, None)))
    out = pl.DataFrame({
        "start_ns": np.insert(gap_start, at, trailing["start_ns"].to_numpy()),
        "end_ns": np.insert(gap_end, at, trailing["end_ns"].to_numpy()),
    }).hstack(api)  # fmt: skip
    del decider, api, gap_start, gap_end, ender
    launched = pl.col("api_start").is_not_null()  # else nothing launched it: ``other``
    kind = (
        pl.when(~launched)
        .then(KINDS.index(OTHER))
        .when(pl.col("api_start") >= pl.col("start_ns"))
        .then(KINDS.index(HOST))
        .otherwise(KINDS.index(DEPENDENCY))
    )
    # the kind's name by index (a string when/then builds a new string per row)
    kind = pl.Series("kind", KINDS).gather(out.select(kind.cast(pl.UInt32)).to_series())
    out = out.with_columns(
        kind,
        gap_ns=pl.col("end_ns") - pl.col("start_ns"),
        api_tid=pl.when(launched).then("api_tid"),  # an ``other`` gap has no thread
    )
    keys = groups.select(by)[np.insert(gap_g, at, t_g)]
    return keys.hstack(out).select(list(schema)).cast(schema)


def _ints(column: pl.Series, rows: np.ndarray) -> np.ndarray:
    """An Int64 ``column`` (no nulls at ``rows``) at ``rows``, exactly (a column with nulls
    would come out of numpy as floats)."""
    values = column.fill_null(0) if column.null_count() else column
    return values.to_numpy()[rows]


def gaps_in_window(whole: pl.DataFrame, window_ops: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """:func:`gaps` of ``window_ops`` (the ops a :class:`~nsysmoe.model.Window` selected, clipped
    to it; lazy or not: only each GPU's span is read) from ``whole`` = ``gaps(ops, launch=True)``
    of all the ops, per GPU, without a second sort of them.

    A GPU's idle time inside the window's span of its work is its whole timeline's idle time
    there (the window's ops are the whole ones clipped), so its gaps are the whole gaps clipped
    to that span, each ended by the same op. Two can change kind: a gap whose end was cut is
    ended by nothing in the window (``other``), and a gap whose start was cut is judged again
    against its new start (``host`` if the deciding call started at or after it, else
    ``dependency``)."""
    columns = ("start_ns", "end_ns", "gap_ns", "kind", "api_tid")
    schema = {c: whole.schema[c] for c in GPU} | {c: GAP_SCHEMA[c] for c in columns}
    span = (window_ops.lazy().group_by(GPU)
            .agg(lo=pl.col("start").min(), hi=pl.col("end").max()).collect())  # fmt: skip
    # each GPU's gaps are one run of ``whole``'s rows, disjoint and in time order: those that
    # meet the span are one slice of it (a view, not a copy), and only its first and last
    # rows can be cut; a span of one instant has no gap
    runs = (
        whole.select(GPU).with_row_index("first")
        .group_by(GPU, maintain_order=True).agg(pl.col("first").first(), n=pl.len())
        .join(span, on=GPU, how="inner", maintain_order="left")
        .filter(pl.col("hi") > pl.col("lo"))
    )  # fmt: skip
    starts, ends = whole["start_ns"].to_numpy(), whole["end_ns"].to_numpy()
    cuts = []
    for first, n, lo, hi in runs.select("first", "n", "lo", "hi").iter_rows():
        a = first + int(np.searchsorted(ends[first:first + n], lo, side="right"))
        b = first + int(np.searchsorted(starts[first:first + n], hi, side="left"))
        if a < b:
            cuts.append((a, b, lo, hi))
    if not cuts:
        return pl.DataFrame(schema=schema)
    ends_of = np.array([(a, b - 1) for a, b, _, _ in cuts]).ravel()
    bounds = pl.DataFrame({"lo": [c[2] for c in cuts for _ in "ab"],
                           "hi": [c[3] for c in cuts for _ in "ab"]})  # fmt: skip
    edges = _clipped(whole[ends_of].hstack(bounds)).select(list(schema)).cast(schema)
    whole = whole.select(list(schema)).cast(schema)
    pieces = []
    for i, (a, b, _, _) in enumerate(cuts):
        pieces.append(edges.slice(2 * i, 1))
        if b - a > 1:
            pieces += [whole.slice(a + 1, b - a - 2), edges.slice(2 * i + 1, 1)]
    return pl.concat(pieces)


def _clipped(rows: pl.DataFrame) -> pl.DataFrame:
    """Gaps (with their GPU's span, lo and hi) clipped to the span, kinds judged again where
    cut (see :func:`gaps_in_window`)."""
    cut_start, cut_end = pl.col("start_ns") < pl.col("lo"), pl.col("end_ns") > pl.col("hi")
    kind = (
        pl.when(cut_end | pl.col("api_start").is_null())
        .then(pl.lit(OTHER))
        .when(cut_start & (pl.col("api_start") < pl.col("lo")))
        .then(pl.lit(DEPENDENCY))
        .when(cut_start)
        .then(pl.lit(HOST))
        .otherwise("kind")
    )
    start = pl.max_horizontal("start_ns", "lo").alias("start_ns")
    end = pl.min_horizontal("end_ns", "hi").alias("end_ns")
    return rows.with_columns(kind.alias("kind"), start, end).with_columns(
        gap_ns=pl.col("end_ns") - pl.col("start_ns"),
        api_tid=pl.when(pl.col("kind") != OTHER).then("api_tid"),
    )


def _group_cum_max(g: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The running maximum of ``e`` within each run of equal ``g`` (``g`` non-decreasing): one
    accumulate over ``g`` above ``e``'s offset, or polars where that key would not fit 63 bits."""
    if not e.size:
        return e
    low, span = int(e.min()), int(e.max()) - int(e.min())
    shift = max(span, 1).bit_length()
    if shift + int(g.max()).bit_length() > 62:
        grouped = pl.DataFrame({"g": g, "e": e}).select(pl.col("e").cum_max().over("g"))
        return grouped["e"].to_numpy()
    base = g << shift
    run = e - low  # in place from here: one array of the rows' length besides ``base``
    run |= base
    np.maximum.accumulate(run, out=run)
    run -= base
    run += low
    return run


def _start_order(g: np.ndarray, ops: pl.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """The permutation sorting ``ops`` (start, api_start, api_tid; no null start) by (``g``,
    start, api_start, api_tid), nulls last; with ``rows``, of those rows of ``ops`` only (``g``
    is theirs), without copying them out.

    A multi-key sort of a million rows costs seconds, so: one stable sort of one int64 key
    (the group above the start's offset), then a three-key sort of only the rows whose
    (group, start) ties — they keep their places as a set, so sorting them among themselves
    finishes the order. Falls back to the plain sort when the key does not fit in 63 bits."""
    if not g.size:
        return np.zeros(0, dtype=np.int64)
    ops = ops.select("start", "api_start", "api_tid")
    at_op = np.arange(len(ops)) if rows is None else rows
    start = _ints(ops["start"], at_op)
    lo, span = int(start.min()), int(start.max()) - int(start.min())
    shift = max(span, 1).bit_length()
    if shift + int(g.max()).bit_length() > 62:
        keyed = ops[at_op].with_columns(_g=pl.Series(g), _i=pl.int_range(pl.len()))
        return keyed.sort(["_g", *ops.columns], nulls_last=True)["_i"].to_numpy()
    key = (g << shift) | (start - lo)
    order = np.argsort(key, kind="stable")
    k = key[order]
    tied = np.flatnonzero(k[1:] == k[:-1]) + 1
    if tied.size:
        at = np.union1d(tied - 1, tied)
        tied_rows = order[at]
        api, tid = (ops[c].gather(at_op[tied_rows]) for c in ("api_start", "api_tid"))
        order[at] = tied_rows[np.lexsort((tid.fill_null(0).to_numpy(), tid.is_null().to_numpy(),
                                          api.fill_null(0).to_numpy(), api.is_null().to_numpy(),
                                          key[tied_rows]))]  # fmt: skip
    return order


def _split(ops: pl.DataFrame | pl.LazyFrame, by: list[str],
           g: pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """The split per group of ``ops`` (every group with a row, zeros included), sorted; ``g``:
    their :func:`gaps`, when already computed."""
    keys = ops.lazy().select(by).unique().collect()
    g = gaps(ops, by) if g is None else g
    parts = g.group_by(by).agg(
        pl.col("gap_ns").filter(pl.col("kind") == k).sum().alias(f"idle_{k}_ns") for k in KINDS
    )
    out = keys.join(parts, on=by, how="left").fill_null(0)
    out = out.with_columns(idle_ns=pl.sum_horizontal([f"idle_{k}_ns" for k in KINDS]))
    return out.sort(by).select(*by, *SPLIT_COLUMNS).cast(SPLIT_SCHEMA)


def idle_split(ops: pl.DataFrame) -> dict[str, int]:
    """The split of ONE GPU's ops (already windowed; every row is taken as that GPU's):
    ``idle_ns`` (= span − |union|, overlap.py's figure) and its three parts, which add up to it."""
    if ops.is_empty():
        return dict.fromkeys(SPLIT_COLUMNS, 0)
    row = _split(ops.with_columns(_group=pl.lit(0)), ["_group"]).row(0, named=True)
    return {c: int(row[c]) for c in SPLIT_COLUMNS}


def idle_split_per_gpu(ops: pl.DataFrame | pl.LazyFrame,
                       gap_table: pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """pid, device and the split (:data:`SPLIT_COLUMNS`) for every GPU with an op, sorted; all
    GPUs at once in one grouped pass (``gap_table``: ``gaps(ops)``, when already computed;
    then ``ops`` may be lazy: only which GPUs have an op is read)."""
    if gap_table is None and isinstance(ops, pl.LazyFrame):
        ops = ops.collect()
    return _split(ops.select(*GPU, "start", "end", "api_start", _tid(ops)), GPU, gap_table)


def split_in_windows(ops: pl.DataFrame, windows: Sequence[tuple[int, int]]) -> pl.DataFrame:
    """The split per (window, GPU): window (index into ``windows``), pid, device, the split.

    Each window [lo, hi) takes the ops :meth:`nsysmoe.model.Window.select` would (a real op
    meeting it, a zero-length one whose instant lies in it), clipped to it, so a row equals
    :func:`idle_split` of ``Window(lo, hi).select(ops)``. Windows may overlap; an op is
    matched to all of them at once by two inequality joins, not one filter per window. Idle
    time is that of overlap.py (inside the span of the window's work), not iterations.py's
    window length minus active time. A GPU without work in a window has no row.
    """
    schema = {"window": pl.Int64} | {c: OPS_SCHEMA[c] for c in GPU} | SPLIT_SCHEMA
    ops = ops.select(*GPU, "start", "end", "api_start", _tid(ops))
    if not windows or ops.is_empty():
        return pl.DataFrame(schema=schema)
    win = pl.DataFrame(
        {
            "window": range(len(windows)),
            "lo": [w[0] for w in windows],
            "hi": [w[1] for w in windows],
        },
        schema={"window": pl.Int64, "lo": pl.Int64, "hi": pl.Int64},
    )
    real = pl.col("end") > pl.col("start")
    before_hi = pl.col("start") < pl.col("hi")
    matched = pl.concat([
        ops.filter(real).join_where(win, pl.col("end") > pl.col("lo"), before_hi),
        ops.filter(~real).join_where(win, pl.col("start") >= pl.col("lo"), before_hi),
    ])  # fmt: skip
    clipped = matched.with_columns(
        pl.col("start").clip(pl.col("lo"), pl.col("hi")),
        pl.col("end").clip(pl.col("lo"), pl.col("hi")),
    ).drop("lo", "hi")
    if clipped.is_empty():
        return pl.DataFrame(schema=schema)
    return _split(clipped, ["window", *GPU]).cast(schema)


def largest_gaps(
    ops: pl.DataFrame | pl.LazyFrame,
    nvtx: pl.DataFrame,
    top: int = 5,
    gap_table: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per GPU the ``top`` longest gaps (:data:`GAP_SCHEMA`), longest first, an earlier gap
    first among equals; sorted by (pid, device).

    ``nvtx``: the innermost NVTX range the launching thread (``api_tid``) was in when the gap
    began — same thread, ``range.start <= start_ns < range.end``, not cross-thread; innermost =
    latest start, then earliest end, then the later row. Null for ``other`` gaps (no thread)
    or when the thread was in no range. Shown as ``Domain:name`` in a named domain.
    ``gap_table``: ``gaps(ops)``, when already computed (then ``ops`` is not read).
    """
    if gap_table is None:
        ops = ops.lazy().select(*GPU, "start", "end", "api_start", _tid(ops)).collect()
        gap_table = gaps(ops, GPU)
    # a GPU's ``top`` longest gaps are among those at least as long as its top-th longest:
    # only they are sorted (a full multi-key sort of a million gaps costs seconds)
    g = gap_table.filter(pl.col("gap_ns") >= pl.col("gap_ns").top_k(top).min().over(GPU))
    g = g.sort([*GPU, "gap_ns", "start_ns"], descending=[False, False, True, False])
    g = g.filter(pl.int_range(pl.len()).over(GPU) < top).with_row_index("call_id")
    # only ranges around some gap start can hold one: a searchsorted test per range prunes the
    # millions of op ranges before anything else is done with them
    calls = g.filter(pl.col("api_tid").is_not_null()).select(
        "call_id",
        pl.col("api_tid").alias("tid"),
        pl.col("start_ns").alias("start"),
        (pl.col("start_ns") + 1).alias("end"),  # [g0, g0 + 1) inside ⇔ start <= g0 < end
    )
    t = np.sort(calls["start"].to_numpy())
    cols = nvtx.select(
        usable=~pl.col("cross_thread").fill_null(False)
        & pl.all_horizontal(pl.col("tid", "start", "end").is_not_null()),
        lo=pl.col("start").fill_null(0),
        hi=pl.col("end").fill_null(0),
    )
    usable, lo, hi = (cols[c].to_numpy() for c in ("usable", "lo", "hi"))
    around = usable & (np.searchsorted(t, lo, side="left") < np.searchsorted(t, hi, "left"))
    ranges = (
        nvtx.with_row_index("range_id")
        .filter(around)
        .with_columns(pl.col("range_id").cast(pl.Int64), name=display_name())
        .select("range_id", "tid", "start", "end", "name")
    )
    pairs = enclosing_pairs(ranges.select("range_id", "tid", "start", "end"), calls)
    inner = (
        pairs.join(ranges, on="range_id")
        .sort(["call_id", "start", "end", "range_id"], descending=[False, True, False, True])
        .unique("call_id", keep="first")
        .select(pl.col("call_id").cast(pl.UInt32), pl.col("name").alias("nvtx"))
    )
    out = g.join(inner, on="call_id", how="left", maintain_order="left")
    return out.select(list(GAP_SCHEMA)).cast(GAP_SCHEMA)


def _tid(ops: pl.DataFrame | pl.LazyFrame) -> pl.Expr:
    """``api_tid``, or a null one for op tables built without it."""
    if "api_tid" in ops.collect_schema().names():
        return pl.col("api_tid")
    return pl.lit(None, pl.Int64).alias("api_tid")


def idle_per_iteration(
    ops: pl.DataFrame,
    windows: pl.DataFrame,
    iterations: pl.DataFrame,
    gap_table: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per step: ``idle_host_ns``, ``idle_dependency_ns``, ``idle_other_ns``, adding up exactly
    to the iteration table's ``idle_ns`` (:mod:`nsysmoe.measure.iterations`: each GPU with work
    in the window, window length − active time, summed).

    The gaps are those of each GPU's whole timeline (so the gap before the next iteration's
    first op is classified by that op), clipped to each process's iteration windows
    (``windows``: pid, step, start_ns, end_ns); a GPU's time in a window that lies in no gap
    of its timeline (before its first op, after its last) is ``other``.
    """
    return with_other(iterations, judged_per_iteration(ops, windows, gap_table))


#: :func:`judged_per_iteration`: per step, the host and dependency parts of its idle time
JUDGED_SCHEMA: dict[str, pl.DataType] = {"step": pl.Int64, "idle_host_ns": pl.Int64,
                                         "idle_dependency_ns": pl.Int64}  # fmt: skip


def judged_per_iteration(ops: pl.DataFrame, windows: pl.DataFrame,
                         gap_table: pl.DataFrame | None = None) -> pl.DataFrame:  # fmt: skip
    """Per step of ``windows``, what :func:`idle_per_iteration` reads from the gaps: the host
    and dependency time (:data:`JUDGED_SCHEMA`); an analysis takes it while the gap table is
    at hand, and the iteration table's idle time later (:func:`with_other`)."""
    if windows.is_empty():
        return pl.DataFrame(schema=JUDGED_SCHEMA)
    g = gaps(ops) if gap_table is None else gap_table
    # host and dependency time per (pid, window) of a GPU with work in it; "other" is the rest
    judged = g.filter(pl.col("kind") != OTHER).select(
        "pid", "device", "start_ns", "end_ns", (pl.col("kind") == DEPENDENCY).alias("dep"))
    parts = []
    for (pid,), w in windows.partition_by("pid", as_dict=True, maintain_order=True).items():
        w = w.sort("start_ns")
        lo, hi = w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        work = ops.filter(pl.col("pid") == pid).select("device", "start", "end")
        mine = judged.filter(pl.col("pid") == pid)
        devices = np.unique(work["device"].to_numpy())
        # (window, device) pairs with a piece of work: a gap's piece counts only in them
        rows, win, _, _ = assign_rows(work["start"].to_numpy(), work["end"].to_numpy(), lo, hi)
        dev = np.searchsorted(devices, work["device"].to_numpy()[rows])
        present = np.zeros(lo.size * devices.size, dtype=bool)
        present[win * devices.size + dev] = True
        rows, win, s, e = assign_rows(mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy(),
                                      lo, hi)  # fmt: skip
        gap_device = mine["device"].to_numpy()[rows]
        dev = np.searchsorted(devices, gap_device)
        ok = dev < devices.size  # the piece's GPU has work in its window
        ok[ok] = devices[dev[ok]] == gap_device[ok]
        ok[ok] = present[win[ok] * devices.size + dev[ok]]
        sums = np.zeros((lo.size, 2), dtype=np.int64)  # host, dependency: exact int64 sums
        np.add.at(sums, (win[ok], mine["dep"].to_numpy()[rows][ok].astype(np.intp)),
                  (e - s)[ok])  # fmt: skip
        parts.append(pl.DataFrame({"step": w["step"], "idle_host_ns": sums[:, 0],
                                   "idle_dependency_ns": sums[:, 1]}))  # fmt: skip
    return pl.concat(parts).group_by("step").agg(pl.all().sum()).cast(JUDGED_SCHEMA)


def with_other(iterations: pl.DataFrame, judged: pl.DataFrame) -> pl.DataFrame:
    """:func:`idle_per_iteration`'s table from the iteration table and its
    :func:`judged_per_iteration`: ``idle_other_ns`` is the rest of each step's idle time."""
    schema = {"step": pl.Int64} | {f"idle_{k}_ns": pl.Int64 for k in KINDS}
    if judged.is_empty() or iterations.is_empty():
        return pl.DataFrame(schema=schema)
    out = iterations.select("step", "idle_ns").join(judged, on="step", how="left").fill_null(0)
    residual = pl.col("idle_ns") - pl.col("idle_host_ns") - pl.col("idle_dependency_ns")
    return out.with_columns(residual.alias("idle_other_ns")).select(list(schema)).cast(schema)
