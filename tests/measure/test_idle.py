"""The GPU idle split (nsysmoe.measure.idle): hand-made timelines worked out in comments, and
random timelines against a plain per-nanosecond classification written out below."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.intervals import union_length
from nsysmoe.measure.idle import (
    GAP_SCHEMA,
    OPS_SCHEMA,
    SPLIT_COLUMNS,
    gaps,
    gaps_in_window,
    idle_split,
    idle_split_per_gpu,
    largest_gaps,
    launch_starts,
    split_in_windows,
)
from nsysmoe.measure.overlap import per_gpu
from nsysmoe.model import MEMOP_SCHEMA, NVTX_SCHEMA, RUNTIME_SCHEMA, Window
from tests.fixtures.frames import kernel_frame
from tests.fixtures.sets import covered, runs

Op = tuple[int, int, int, int, int | None, int | None]  # pid, device, start, end, api_start, tid


def ops(*rows: Op) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=OPS_SCHEMA, orient="row")


def gpu(*rows: tuple[int, int, int | None]) -> pl.DataFrame:
    """(start, end, api_start) rows of GPU (1, 0), launched from thread 7 where launched."""
    return ops(*((1, 0, s, e, a, None if a is None else 7) for s, e, a in rows))


def split(host: int = 0, dependency: int = 0, other: int = 0) -> dict[str, int]:
    return {"idle_ns": host + dependency + other, "idle_host_ns": host,
            "idle_dependency_ns": dependency, "idle_other_ns": other}  # fmt: skip


# ---- the brute force ---------------------------------------------------------------------------


def brute_gaps(rows: list[Op]) -> list[tuple[int, int, str, int | None]]:
    """One GPU's gaps (g0, g1, kind, deciding thread), found and classified nanosecond by
    nanosecond: walk every idle ns of the span to its gap's ends, then look at the real ops
    starting at the gap's end."""
    if not rows:
        return []
    lo, hi = min(r[2] for r in rows), max(r[3] for r in rows)
    busy = covered((r[2], r[3]) for r in rows)
    found: dict[tuple[int, int], tuple[str, int | None]] = {}
    for t in range(lo, hi):
        if t in busy:
            continue
        g0, g1 = t, t + 1
        while g0 > lo and g0 - 1 not in busy:
            g0 -= 1
        while g1 < hi and g1 not in busy:
            g1 += 1
        enders = [r for r in rows if r[2] == g1 and r[3] > r[2] and r[4] is not None]
        if not enders:
            found[g0, g1] = ("other", None)
            continue
        first = min(enders, key=lambda r: (r[4], r[5]))
        found[g0, g1] = ("host" if first[4] >= g0 else "dependency", first[5])
    return [(g0, g1, *found[g0, g1]) for g0, g1 in sorted(found)]


def brute_split(rows: list[Op]) -> dict[str, int]:
    out = split()
    for g0, g1, kind, _ in brute_gaps(rows):
        out[f"idle_{kind}_ns"] += g1 - g0
        out["idle_ns"] += g1 - g0
    return out


def by_gpu(rows: list[Op]) -> dict[tuple[int, int], list[Op]]:
    out: dict[tuple[int, int], list[Op]] = {}
    for r in rows:
        out.setdefault((r[0], r[1]), []).append(r)
    return dict(sorted(out.items()))


launch = st.one_of(st.none(), st.integers(0, 80))
op_rows = st.lists(
    st.tuples(
        st.integers(1, 2),
        st.integers(0, 1),
        st.integers(0, 60),
        st.sampled_from([0, 0, 1, 2, 3, 5, 8, 13]),
        launch,
        st.sampled_from([7, 8]),
    ).map(lambda r: (r[0], r[1], r[2], r[2] + r[3], r[4], None if r[4] is None else r[5])),
    max_size=14,
)


@given(op_rows)
@settings(max_examples=80, deadline=None)
def test_split_per_gpu_matches_brute_force(rows: list[Op]) -> None:
    got = idle_split_per_gpu(ops(*rows))
    assert got.columns == ["pid", "device", *SPLIT_COLUMNS]
    groups = by_gpu(rows)
    assert got.select("pid", "device").rows() == list(groups)
    for (pid, device), mine in groups.items():
        row = got.filter((pl.col("pid") == pid) & (pl.col("device") == device)).row(0, named=True)
        want = brute_split(mine)
        assert {c: row[c] for c in SPLIT_COLUMNS} == want
        assert idle_split(ops(*mine)) == want
        span = max(r[3] for r in mine) - min(r[2] for r in mine)
        union = union_length([r[2] for r in mine], [r[3] for r in mine])
        assert want["idle_ns"] == span - union == sum(want[c] for c in SPLIT_COLUMNS[1:])


@given(op_rows)
@settings(max_examples=100, deadline=None)
def test_gaps_match_brute_force(rows: list[Op]) -> None:
    got = gaps(ops(*rows))
    want = [(p, d, g0, g1, g1 - g0, kind, tid)
            for (p, d), mine in by_gpu(rows).items()
            for g0, g1, kind, tid in brute_gaps(mine)]  # fmt: skip
    assert got.rows() == want
    # runs of idle ns are exactly the gaps: none is split, none merged
    for (p, d), mine in by_gpu(rows).items():
        lo, hi = min(r[2] for r in mine), max(r[3] for r in mine)
        idle = set(range(lo, hi)) - covered((r[2], r[3]) for r in mine)
        mine_got = got.filter((pl.col("pid") == p) & (pl.col("device") == d))
        assert mine_got.select("start_ns", "end_ns").rows() == runs(idle)
    # the same timeline stretched over most of int64: the sorts' and running maximum's
    # one-key forms no longer fit, their plain forms give the same gaps
    k = 2**56
    wide = gaps(ops(*rows).with_columns((pl.col("start", "end", "api_start") - 40) * k))
    assert wide.rows() == [(p, d, (g0 - 40) * k, (g1 - 40) * k, n * k, kind, tid)
                           for p, d, g0, g1, n, kind, tid in want]  # fmt: skip


# ---- from the canonical tables -----------------------------------------------------------------


def kernel_table(rows: list[tuple[int, int, int, int, int | None]]) -> pl.DataFrame:
    """(pid, device, start, end, corr_id) as a classified kernel table."""
    full = [(p, d, 7, s, e, c, "k", "k", None, None, "gemm") for p, d, s, e, c in rows]
    return kernel_frame(full, {"class": pl.String})


def memop_table(rows: list[tuple[int, int, int, int, int | None]]) -> pl.DataFrame:
    full = [(p, d, 3, s, e, c, "memcpy", 8, "[CUDA memcpy DtoD]") for p, d, s, e, c in rows]
    return pl.DataFrame(full, schema=MEMOP_SCHEMA, orient="row")


def runtime_table(rows: list[tuple[int, int, int, int | None]]) -> pl.DataFrame:
    """(pid, tid, start, corr_id) API calls, 1 ns long."""
    full = [(p, t, s, s + 1, c, None) for p, t, s, c in rows]
    return pl.DataFrame(full, schema=RUNTIME_SCHEMA, orient="row")


def test_launch_starts_joins_on_pid_and_corr_id_earliest_call_wins() -> None:
    k = kernel_table([(1, 0, 0, 10, 5), (1, 0, 20, 30, 6), (1, 0, 40, 50, None)])
    m = memop_table([(2, 0, 0, 10, 5), (1, 1, 60, 70, 9)])
    r = runtime_table([
        (1, 100, 4, 5), (1, 101, 2, 5), (1, 102, 2, 5),  # three rows for (1, 5): 2, thread 101
        (2, 200, 9, 5),  # corr id 5 again, in another process: its own call
        (1, 100, 3, None),  # no corr id: matches nothing, not even the null-corr kernel
        (1, 100, 1, 6), (2, 200, 0, 6),  # (2, 6) launched nothing on pid 1
    ])  # fmt: skip
    got = launch_starts(k, m, r)
    assert got.schema == pl.Schema(OPS_SCHEMA)
    assert got.rows() == [
        (1, 0, 0, 10, 2, 101),
        (1, 0, 20, 30, 1, 100),
        (1, 0, 40, 50, None, None),  # null corr_id
        (2, 0, 0, 10, 9, 200),
        (1, 1, 60, 70, None, None),  # no runtime row
    ]
    empty = launch_starts(k.clear(), m.clear(), r.clear())
    assert empty.is_empty() and empty.schema == pl.Schema(OPS_SCHEMA)


table_rows = st.lists(
    st.tuples(st.integers(1, 2), st.integers(0, 1), st.integers(0, 50),
              st.sampled_from([0, 1, 3, 6, 10]), st.one_of(st.none(), st.integers(0, 6))),
    max_size=10,
)  # fmt: skip
call_rows = st.lists(
    st.tuples(st.integers(1, 2), st.sampled_from([7, 8]), st.integers(0, 70),
              st.one_of(st.none(), st.integers(0, 6))),
    max_size=10,
)  # fmt: skip


@given(table_rows, table_rows, call_rows)
@settings(max_examples=50, deadline=None)
def test_from_canonical_tables_matches_brute_force_and_overlap(
    k_rows: list[tuple], m_rows: list[tuple], calls: list[tuple]
) -> None:
    """launch_starts + split against a plain lookup of each op's earliest call, and idle_ns
    against overlap.py's own per-GPU figure."""
    k_rows = [(p, d, s, s + n, c) for p, d, s, n, c in k_rows]
    m_rows = [(p, d, s, s + n, c) for p, d, s, n, c in m_rows]
    k, m, r = kernel_table(k_rows), memop_table(m_rows), runtime_table(calls)
    plain: list[Op] = []
    for p, d, s, e, c in k_rows + m_rows:
        mine = sorted((cs, t) for cp, t, cs, cc in calls if c is not None and (cp, cc) == (p, c))
        plain.append((p, d, s, e, *(mine[0] if mine else (None, None))))
    launched = launch_starts(k, m, r)
    assert launched.rows() == plain
    got = idle_split_per_gpu(launched)
    want = [(*key, *brute_split(mine).values()) for key, mine in by_gpu(plain).items()]
    assert got.rows() == want
    overlap = per_gpu(k, m)[0]
    assert got.select("pid", "device", "idle_ns").rows() == overlap.select(
        "pid", "device", "idle_ns"
    ).rows()


# ---- windows -----------------------------------------------------------------------------------

windows = st.lists(
    st.tuples(st.integers(-5, 70), st.integers(0, 40)).map(lambda w: (w[0], w[0] + w[1])),
    max_size=4,
)


@given(op_rows, windows)
@settings(max_examples=80, deadline=None)
def test_split_in_windows_equals_each_window_selected(rows: list[Op], wins: list) -> None:
    table = ops(*rows)
    got = split_in_windows(table, wins)
    assert got.columns == ["window", "pid", "device", *SPLIT_COLUMNS]
    want = [(i, *row) for i, (lo, hi) in enumerate(wins)
            for row in idle_split_per_gpu(Window(lo, hi).select(table)).rows()]  # fmt: skip
    assert got.rows() == want


@given(op_rows, windows)
@settings(max_examples=150, deadline=None)
def test_gaps_in_window_are_the_windowed_ops_gaps(rows: list[Op], wins: list) -> None:
    """The whole timeline's gaps clipped to a window's span of work, kinds re-judged where a
    gap was cut, are the gaps of the window's ops measured alone."""
    table = ops(*rows)
    whole = gaps(table, launch=True)
    assert whole.drop("api_start").equals(gaps(table))
    for lo, hi in wins:
        selected = Window(lo, hi).select(table)
        assert gaps_in_window(whole, selected).rows() == gaps(selected).rows()
        # the pipeline passes the window's ops lazily: only their GPUs and spans are read
        lazy = Window(lo, hi).select(table.lazy())
        cut = gaps_in_window(whole, lazy)
        assert cut.rows() == gaps(selected).rows()
        assert idle_split_per_gpu(lazy, cut).equals(idle_split_per_gpu(selected))


def test_gaps_in_window_of_work_at_one_instant_is_none() -> None:
    """A window whose only work is a zero-length op has an empty span, so no gap: the whole
    timeline's gap around that instant is not cut down to a zero-length row (found by the
    property above)."""
    table = gpu((0, 0, None), (1, 1, None), (2, 2, None))
    selected = Window(1, 2).select(table)
    assert gaps(selected).is_empty()
    assert gaps_in_window(gaps(table, launch=True), selected).is_empty()


def test_gaps_in_window_cut_kinds() -> None:
    # [0,10) api 0, [20,30) api 15, [40,50) api 35; window [12, 45): span [20, 45)
    t = gpu((0, 10, 0), (20, 30, 15), (40, 50, 35))
    whole = gaps(t, launch=True)
    assert whole.select("start_ns", "end_ns", "kind").rows() == [(10, 20, "host"),
                                                                  (30, 40, "host")]
    # the window's span starts at 20: the gap [10,20) is outside it; [30,40) stays host
    got = gaps_in_window(whole, Window(12, 45).select(t))
    assert got.select("start_ns", "end_ns", "kind").rows() == [(30, 40, "host")]
    # [5, 35) with a zero-length op at 33: span [5, 33); [10,20) kept as it was, [30,40) cut
    # at its end to [30,33): nothing in the window ends it, so other, with no thread
    z = pl.concat([t, gpu((33, 33, 33))])
    got = gaps_in_window(gaps(z, launch=True), Window(5, 35).select(z))
    assert got.select("start_ns", "end_ns", "kind", "api_tid").rows() == [
        (10, 20, "host", 7), (30, 33, "other", None)]
    assert got.rows() == gaps(Window(5, 35).select(z)).rows()
    # a zero-length op at 16 opens the window's span inside the gap: [16,20) is judged
    # against 16, and the call at 15 came before it: dependency
    z = pl.concat([t, gpu((16, 16, 16))])
    got = gaps_in_window(gaps(z, launch=True), Window(14, 25).select(z))
    assert got.select("start_ns", "end_ns", "kind").rows() == [(16, 20, "dependency")]
    assert got.rows() == gaps(Window(14, 25).select(z)).rows()


def test_split_in_windows_clips_like_window_select() -> None:
    # [0,10) api 0, [20,30) api 15, [40,50) api 0, zero-length at 60 (api 60)
    t = gpu((0, 10, 0), (20, 30, 15), (40, 50, 0), (60, 60, 60))
    got = split_in_windows(t, [(5, 45), (25, 61), (0, 0), (100, 200), (60, 61)])
    # window 0: [5,10) [20,30) [40,45): gap [10,20) host (15 >= 10), [30,40) dependency (0 < 30)
    # window 1: [25,30) [40,50) and the zero-length op at 60: [30,40) dep, [50,60) other
    # window 4: the zero-length op only: span 0
    assert got.rows() == [(0, 1, 0, 20, 10, 10, 0), (1, 1, 0, 20, 0, 10, 10),
                          (4, 1, 0, 0, 0, 0, 0)]  # fmt: skip
    assert split_in_windows(t, []).is_empty()
    assert split_in_windows(t.clear(), [(0, 10)]).columns == got.columns


# ---- hand-made cases ---------------------------------------------------------------------------


def test_host_bound_gap() -> None:
    # [0,10) then [20,30) whose launch call started at 15, after the GPU ran dry at 10
    assert idle_split(gpu((0, 10, 0), (20, 30, 15))) == split(host=10)


def test_launch_exactly_at_the_gap_start_is_host_bound() -> None:
    assert idle_split(gpu((0, 10, 0), (20, 30, 10))) == split(host=10)
    assert idle_split(gpu((0, 10, 0), (20, 30, 9))) == split(dependency=10)


def test_dependency_gap_event_wait() -> None:
    # the second kernel was launched at 2, long before its stream's event let it run at 20
    assert idle_split(gpu((0, 10, 0), (20, 30, 2))) == split(dependency=10)


def test_host_and_dependency_are_not_swapped() -> None:
    # gap [10,20) host (launched at 18), gap [30,33) dependency (launched at 11): 10 vs 3
    got = idle_split(gpu((0, 10, 0), (20, 30, 18), (33, 40, 11)))
    assert (got["idle_host_ns"], got["idle_dependency_ns"]) == (10, 3)
    g = gaps(gpu((0, 10, 0), (20, 30, 18), (33, 40, 11)))
    assert g.select("start_ns", "end_ns", "kind").rows() == [(10, 20, "host"),
                                                             (30, 33, "dependency")]  # fmt: skip


def test_gap_ended_by_an_op_without_launch_row() -> None:
    assert idle_split(gpu((0, 10, 0), (20, 30, None))) == split(other=10)
    # the launch table: a null corr_id and a corr_id without runtime row are both unlaunched
    k = kernel_table([(1, 0, 0, 10, 1), (1, 0, 20, 30, None), (1, 0, 35, 40, 99)])
    got = idle_split(launch_starts(k, memop_table([]), runtime_table([(1, 7, 0, 1)])))
    assert got == split(other=15)


def test_two_ops_at_the_gap_end_earliest_launch_decides() -> None:
    # at 20: one launched at 15 (host) and one at 5 (dependency): the earlier one decides
    assert idle_split(gpu((0, 10, 0), (20, 25, 15), (20, 30, 5))) == split(dependency=10)
    # an op without launch row is ignored while another one has a launch row
    assert idle_split(gpu((0, 10, 0), (20, 25, None), (20, 30, 15))) == split(host=10)
    assert idle_split(gpu((0, 10, 0), (20, 25, None), (20, 30, None))) == split(other=10)
    # the deciding op's thread is the one reported
    g = gaps(ops((1, 0, 0, 10, 0, 7), (1, 0, 20, 25, 15, 8), (1, 0, 20, 30, 5, 9)))
    assert g.select("kind", "api_tid").rows() == [("dependency", 9)]


def test_overlapping_and_nested_ops() -> None:
    # [0,10) ∪ [5,15): one busy stretch; gap [15,30) ended by [30,40) launched at 20 (≥ 15)
    assert idle_split(gpu((0, 10, 0), (5, 15, 0), (30, 40, 20))) == split(host=15)
    # [10,20) nested in [0,100): no gap inside; [100,120) ended by [120,130), launched at 1;
    # the nested op's late launch (90) ends no gap
    got = idle_split(gpu((0, 100, 0), (10, 20, 90), (120, 130, 1)))
    assert got == split(dependency=20)
    # touching ops leave no gap
    assert idle_split(gpu((0, 10, 0), (10, 20, 50))) == split()


def test_zero_length_ops() -> None:
    # inside a gap: does not split it ([10,20) stays one gap, decided by [20,30))
    assert idle_split(gpu((0, 10, 0), (15, 15, 15), (20, 30, 2))) == split(dependency=10)
    # at the gap's end, launched earlier than the real op there: ignored
    assert idle_split(gpu((0, 10, 0), (20, 20, 0), (20, 30, 15))) == split(host=10)
    # before the first / after the last real op: they stretch the span (as overlap.py's
    # span does): a leading gap decided by the first real op, a trailing one that nothing ends
    t = gpu((-5, -5, 0), (0, 10, -10), (50, 50, 40))
    assert idle_split(t) == split(dependency=5, other=40)
    assert gaps(t).select("start_ns", "end_ns", "kind").rows() == [
        (-5, 0, "dependency"), (10, 50, "other"),
    ]  # fmt: skip
    # zero-length ops only: the span is idle, and unexplained
    assert idle_split(gpu((0, 0, 0), (7, 7, 0))) == split(other=7)
    assert idle_split(gpu((3, 3, 0))) == split()


def test_zero_length_ops_agree_with_overlap_idle() -> None:
    k = kernel_table([(1, 0, -5, -5, 1), (1, 0, 0, 10, 2), (1, 0, 20, 30, 3)])
    m = memop_table([(1, 0, 50, 50, 4), (1, 0, 25, 45, None)])
    r = runtime_table([(1, 7, -9, 1), (1, 7, -10, 2), (1, 7, 15, 3), (1, 7, 0, 4)])
    got = idle_split_per_gpu(launch_starts(k, m, r))
    assert got.rows() == [(1, 0, 20, 10, 5, 5)]  # [-5,0) dep, [10,20) host, [45,50) other
    assert got["idle_ns"].to_list() == per_gpu(k, m)[0]["idle_ns"].to_list()


def test_empty_tables() -> None:
    empty = ops()
    assert idle_split(empty) == split()
    assert idle_split_per_gpu(empty).columns == ["pid", "device", *SPLIT_COLUMNS]
    assert idle_split_per_gpu(empty).is_empty()
    assert gaps(empty).is_empty()
    nvtx = pl.DataFrame(schema=NVTX_SCHEMA)
    assert largest_gaps(empty, nvtx).schema == pl.Schema(GAP_SCHEMA)
    assert split_in_windows(empty, [(0, 10)]).is_empty()


def test_several_gpus_are_separate() -> None:
    # GPU (1, 0) idles [10,20) host; GPU (1, 1) runs [12,18) meanwhile, which must not fill it
    t = ops((1, 0, 0, 10, 0, 7), (1, 0, 20, 30, 15, 7), (1, 1, 12, 18, 0, 7),
            (2, 0, 0, 5, None, None), (2, 0, 9, 10, None, None))  # fmt: skip
    assert idle_split_per_gpu(t).rows() == [(1, 0, 10, 10, 0, 0), (1, 1, 0, 0, 0, 0),
                                            (2, 0, 4, 0, 0, 4)]  # fmt: skip


# ---- largest gaps and their NVTX ranges --------------------------------------------------------


def nvtx_table(rows: list[tuple[int, int, int, str, str | None, bool]]) -> pl.DataFrame:
    """(tid, start, end, name, domain, cross_thread) ranges of process 1."""
    full = [(1, t, s, e, n, d, "startend" if x else "pushpop", x) for t, s, e, n, d, x in rows]
    return pl.DataFrame(full, schema=NVTX_SCHEMA, orient="row")


def test_largest_gaps_with_innermost_nvtx_range() -> None:
    nvtx = nvtx_table([
        (7, 0, 1000, "step", None, False),
        (7, 0, 500, "forward", None, False),
        (7, 100, 200, "mm", "D", False),  # innermost at 150
        (7, 150, 160, "xthread", None, True),  # would be inner still, but crosses threads
        (7, 0, 150, "ends_at_150", None, False),  # ends where the gap begins: not in it
        (8, 0, 2000, "other_thread", None, False),
    ])  # fmt: skip
    t = ops(
        (1, 0, 0, 150, 0, 7),
        (1, 0, 200, 300, 160, 7),  # gap [150,200) host, thread 7 in D:mm
        (1, 0, 350, 700, 310, 7),  # gap [300,350) host: forward
        (1, 0, 720, 1500, 500, 7),  # gap [700,720) dependency: step
        (1, 0, 1520, 1600, 1400, 7),  # gap [1500,1520) dependency: no range on thread 7
        (1, 0, 1650, 1700, None, None),  # gap [1600,1650) other: no thread, no range
        (1, 1, 0, 10, 0, 8),
        (1, 1, 60, 70, 5, 8),  # GPU (1, 1): gap [10,60) dependency, thread 8
    )
    got = largest_gaps(t, nvtx)
    assert got.schema == pl.Schema(GAP_SCHEMA)
    assert got.rows() == [
        (1, 0, 150, 200, 50, "host", 7, "D:mm"),
        (1, 0, 300, 350, 50, "host", 7, "forward"),  # tie on 50 ns: the earlier gap first
        (1, 0, 1600, 1650, 50, "other", None, None),
        (1, 0, 700, 720, 20, "dependency", 7, "step"),
        (1, 0, 1500, 1520, 20, "dependency", 7, None),
        (1, 1, 10, 60, 50, "dependency", 8, "other_thread"),
    ]
    top2 = largest_gaps(t, nvtx, top=2)
    assert top2.select("device", "start_ns").rows() == [(0, 150), (0, 300), (1, 10)]
    assert largest_gaps(t, nvtx.clear())["nvtx"].null_count() == 6


_ORDER_KEYS = ["pid", "device", "start", "api_start", "api_tid"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 3, 2**40]), st.integers(0, 2),
                          st.integers(-5, 20) | st.sampled_from([2**61, -(2**61)]),
                          st.none() | st.integers(0, 4), st.none() | st.integers(0, 2)),
                max_size=40))  # fmt: skip
def test_start_order_is_the_multi_key_sort(rows: list[tuple]) -> None:
    """The one-key sort with tied rows fixed up orders as the plain five-key sort does (rows
    equal in every key are interchangeable, so the key columns are compared); the starts'
    extremes force the plain sort's fallback."""
    import numpy as np

    from nsysmoe.measure.idle import _start_order

    ops = pl.DataFrame(rows, schema=_ORDER_KEYS, orient="row").filter(pl.col("start").is_not_null())
    want = ops.sort(_ORDER_KEYS, nulls_last=True)
    group = ops.select(pl.struct("pid", "device").rank("dense") - 1)["pid"].to_numpy()
    keys = ["start", "api_start", "api_tid"]
    got = ops[_start_order(group.astype(np.int64), ops.select(keys))]
    assert got.equals(want)
    one = ops[_start_order(np.zeros(len(ops), dtype=np.int64), ops.select(keys))]
    assert one.select(keys).equals(ops.sort(keys, nulls_last=True).select(keys))
    # ``rows``: every other row, ordered in place (their positions among themselves)
    rows = np.arange(0, len(ops), 2)
    some = ops[rows]
    got = some[_start_order(group.astype(np.int64)[rows], ops.select(keys), rows=rows)]
    assert got.equals(some.sort(_ORDER_KEYS, nulls_last=True))
