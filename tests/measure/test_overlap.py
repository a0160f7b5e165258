"""Per-GPU overlap metrics on small hand-built frames, every figure worked out by hand.

Also the analysis window (:class:`nsysmoe.model.Window`) as ``per_gpu`` applies it: bounded on
one side only, rows touching an edge, zero-length rows, exact clipping.
"""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from nsysmoe.classify import CLASSES, RULE_CLASSES
from nsysmoe.measure.collectives import compute_under_comm
from nsysmoe.measure.overlap import (
    GPU_COLUMNS,
    class_totals,
    gpu_overlap,
    hidden_ns,
    hidden_pct,
    hidden_pct_expr,
    per_gpu,
    per_gpu_and_busy,
    totals,
)
from nsysmoe.model import MEMOP_SCHEMA, WHOLE_TRACE, Window
from nsysmoe.results import Totals
from tests.fixtures.frames import kernel_frame

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def kernels(*rows: tuple[int, int, int, int, str]) -> pl.DataFrame:
    """(pid, device, start, end, class) rows as a classified kernel table."""
    full = [(p, d, 7, s, e, i, f"k{i}", f"k{i}", None, None, c)
            for i, (p, d, s, e, c) in enumerate(rows)]  # fmt: skip
    return kernel_frame(full, {"class": pl.String})


def memops(*rows: tuple[int, int, int, int, str]) -> pl.DataFrame:
    """(pid, device, start, end, kind) rows as a memory-op table."""
    full = [(p, d, 3, s, e, 100 + i, k, 64, f"[CUDA {k}]")
            for i, (p, d, s, e, k) in enumerate(rows)]  # fmt: skip
    return pl.DataFrame(full, schema=MEMOP_SCHEMA, orient="row")


# GPU (1, 0): comm [0,100) [200,260); gemm [50,150) [70,90); attention [60,80);
# elementwise [90,120) [240,300); memcpy [400,450), memset [440,500)
#   comm = 100 + 60 = 160; compute = [50,150) ∪ [240,300) = 160; all kernels = [0,150) ∪
#   [200,300) = 250; hidden = 160 + 160 - 250 = 70 ([50,100) + [240,260)); exposed = 90;
#   hidden % = 43.75; comm ∩ (gemm ∪ attention) = [50,100) = 50; active = 250 + [400,500) = 350;
#   span = 500 - 0; idle = 150
# GPU (2, 0): gemm [1000,1100), memcpy [1050,1200): no comm; span = active = 200
# GPU (2, 1): memset [10,20) only: no kernels at all
K = kernels(
    (1, 0, 0, 100, "comm"),
    (1, 0, 50, 150, "gemm"),
    (1, 0, 60, 80, "attention"),
    (1, 0, 70, 90, "gemm"),
    (1, 0, 90, 120, "elementwise"),
    (1, 0, 200, 260, "comm"),
    (1, 0, 240, 300, "elementwise"),
    (2, 0, 1000, 1100, "gemm"),
)
M = memops(
    (1, 0, 400, 450, "memcpy"),
    (1, 0, 440, 500, "memset"),
    (2, 0, 1050, 1200, "memcpy"),
    (2, 1, 10, 20, "memset"),
)
GPU_1_0 = {"pid": 1, "device": 0, "kernels": 7, "span_ns": 500, "active_ns": 350,
           "idle_ns": 150, "comm_ns": 160, "compute_ns": 160, "hidden_ns": 70, "exposed_ns": 90,
           "hidden_pct": 43.75, "comm_gemm_attn_ns": 50}  # fmt: skip
GPU_2_0 = {"pid": 2, "device": 0, "kernels": 1, "span_ns": 200, "active_ns": 200, "idle_ns": 0,
           "comm_ns": 0, "compute_ns": 100, "hidden_ns": 0, "exposed_ns": 0, "hidden_pct": None,
           "comm_gemm_attn_ns": 0}  # fmt: skip
GPU_2_1 = {"pid": 2, "device": 1, "kernels": 0, "span_ns": 10, "active_ns": 10, "idle_ns": 0,
           "comm_ns": 0, "compute_ns": 0, "hidden_ns": 0, "exposed_ns": 0, "hidden_pct": None,
           "comm_gemm_attn_ns": 0}  # fmt: skip
#: per class on GPU (1, 0): (count, sum of durations, union)
CLASSES_1_0 = {"comm": (2, 160, 160), "gemm": (2, 120, 100), "attention": (1, 20, 20),
               "moe_glue": (0, 0, 0), "elementwise": (2, 90, 90), "other": (0, 0, 0)}  # fmt: skip


def test_column_order() -> None:
    assert GPU_COLUMNS == ("pid", "device", "kernels", "span_ns", "active_ns", "idle_ns",
                           "comm_ns", "compute_ns", "hidden_ns", "exposed_ns", "hidden_pct",
                           "comm_gemm_attn_ns")  # fmt: skip


def test_per_gpu_exact_columns() -> None:
    gpus, classes = per_gpu(K, M)
    assert gpus.columns == list(GPU_COLUMNS)
    assert gpus.schema["hidden_pct"] == pl.Float64
    assert all(gpus.schema[c] == pl.Int64 for c in GPU_COLUMNS if c != "hidden_pct")
    assert gpus.to_dicts() == [GPU_1_0, GPU_2_0, GPU_2_1]  # sorted by (pid, device)
    assert per_gpu(K, M, WHOLE_TRACE)[0].equals(gpus)


def test_per_gpu_classes_table_lists_every_class_with_zeros() -> None:
    _, classes = per_gpu(K, M)
    assert classes.columns == ["pid", "device", "class", "count", "sum_ns", "union_ns"]
    assert list(CLASSES) == ["comm", "gemm", "attention", "moe_glue", "elementwise", "other",
                             "graph"]  # fmt: skip
    listed = RULE_CLASSES  # "graph" only where whole-graph rows ran
    want = [(1, 0, c, *CLASSES_1_0[c]) for c in listed]
    want += [(2, 0, c, *((1, 100, 100) if c == "gemm" else (0, 0, 0))) for c in listed]
    want += [(2, 1, c, 0, 0, 0) for c in listed]
    assert classes.rows() == want


def test_gpu_overlap_and_class_totals_directly() -> None:
    k, m = K.filter(pl.col("pid") == 1), M.filter(pl.col("pid") == 1)
    got = gpu_overlap(k, m)
    assert got == {c: v for c, v in GPU_1_0.items() if c not in ("pid", "device")}
    assert [(r["class"], r["count"], r["sum_ns"], r["union_ns"]) for r in class_totals(k)] == [
        (c, *CLASSES_1_0[c]) for c in RULE_CLASSES
    ]
    # kernels only (no memops): the span is that of the kernels
    assert gpu_overlap(k, m.clear())["span_ns"] == 300
    assert gpu_overlap(k, m.clear())["idle_ns"] == 50


def test_gpu_overlap_of_nothing() -> None:
    got = gpu_overlap(K.clear(), M.clear())
    assert got == {"kernels": 0, "span_ns": 0, "active_ns": 0, "idle_ns": 0, "comm_ns": 0,
                   "compute_ns": 0, "hidden_ns": 0, "exposed_ns": 0, "hidden_pct": None,
                   "comm_gemm_attn_ns": 0}  # fmt: skip
    assert per_gpu(K.clear(), M.clear())[0].is_empty()


def test_comm_fully_hidden_and_fully_exposed() -> None:
    hidden = gpu_overlap(kernels((0, 0, 10, 20, "comm"), (0, 0, 0, 30, "moe_glue")), M.clear())
    assert (hidden["hidden_ns"], hidden["exposed_ns"], hidden["hidden_pct"]) == (10, 0, 100.0)
    assert hidden["comm_gemm_attn_ns"] == 0  # moe_glue is compute but not gemm/attention
    exposed = gpu_overlap(kernels((0, 0, 0, 10, "comm"), (0, 0, 10, 30, "gemm")), M.clear())
    assert (exposed["hidden_ns"], exposed["exposed_ns"], exposed["hidden_pct"]) == (0, 10, 0.0)
    assert exposed["span_ns"] == 30 and exposed["idle_ns"] == 0


def test_hidden_ns_and_hidden_pct() -> None:
    assert hidden_ns(160, 160, 250) == 70
    assert hidden_ns(10, 0, 10) == 0
    assert hidden_pct(70, 160) == 43.75
    assert hidden_pct(1, 3) == 100.0 / 3
    assert hidden_pct(0, 5) == 0.0
    assert hidden_pct(0, 0) is None
    assert hidden_pct(5, 0) is None


def test_polars_forms() -> None:
    df = pl.DataFrame({"c": [160, 0, 3, 10, 1], "k": [160, 5, 0, 0, 1], "u": [250, 5, 3, 10, 1]})
    out = df.select(
        hidden_ns(pl.col("c"), pl.col("k"), pl.col("u")).alias("h"),
        hidden_pct_expr(hidden_ns(pl.col("c"), pl.col("k"), pl.col("u")), pl.col("c")).alias("p"),
    )
    # 1 ns of communication, hidden: already a share (100 %), not "no communication"
    assert out.rows() == [(70, 43.75), (0, None), (0, 0.0), (0, 0.0), (1, 100.0)]


def test_totals_sum_the_gpus_and_take_hidden_pct_of_the_sums() -> None:
    gpus, _ = per_gpu(K, M)
    assert totals(gpus) == Totals(span_ns=710, active_ns=560, idle_ns=150, comm_ns=160,
                                  compute_ns=260, hidden_ns=70, exposed_ns=90, hidden_pct=43.75,
                                  comm_gemm_attn_ns=50, kernels=8)  # fmt: skip
    two = pl.DataFrame([GPU_1_0, {**GPU_1_0, "comm_ns": 40, "hidden_ns": 40, "exposed_ns": 0,
                                  "hidden_pct": 100.0}])  # fmt: skip
    t = totals(two)
    assert (t.comm_ns, t.hidden_ns, t.hidden_pct) == (200, 110, 55.0)  # not the mean of 43.75, 100
    assert totals(per_gpu(K.filter(pl.col("pid") == 2), M)[0]).hidden_pct is None


# ---- the window --------------------------------------------------------------------------------


def test_window_start_only() -> None:
    # from 100: comm [0,100) ends at the start (out); gemm [50,150) → [100,150); attention and
    # the gemm [70,90) end before it (out); elementwise [90,120) → [100,120)
    gpus, classes = per_gpu(K, M, Window(start_ns=100))
    g = gpus.row(0, named=True)
    assert (g["kernels"], g["comm_ns"], g["compute_ns"], g["hidden_ns"]) == (4, 60, 110, 20)
    assert (g["span_ns"], g["active_ns"], g["idle_ns"]) == (400, 250, 150)  # 100 → 500
    assert g["comm_gemm_attn_ns"] == 0
    per_class = {r[2]: r[3:] for r in classes.rows() if r[:2] == (1, 0)}
    assert per_class["gemm"] == (1, 50, 50) and per_class["comm"] == (1, 60, 60)
    assert per_class["attention"] == (0, 0, 0)
    assert gpus["pid"].to_list() == [1, 2]  # GPU (2, 1) only worked at 10-20


def test_window_end_only() -> None:
    # up to 200: comm [200,260) starts at the end (out), elementwise [240,300) out; memops out
    gpus, _ = per_gpu(K, M, Window(end_ns=200))
    assert gpus.select("pid", "device").rows() == [(1, 0), (2, 1)]
    g = gpus.row(0, named=True)
    assert (g["kernels"], g["comm_ns"], g["compute_ns"], g["hidden_ns"]) == (5, 100, 100, 50)
    assert (g["span_ns"], g["active_ns"], g["idle_ns"], g["hidden_pct"]) == (150, 150, 0, 50.0)
    assert gpus.row(1, named=True)["span_ns"] == 10


def test_window_both_sides_clips_exactly() -> None:
    gpus, classes = per_gpu(K, M, Window(60, 250))
    g = gpus.row(0, named=True)
    # comm [60,100) [200,250); compute [60,150) [240,250); all kernels [60,150) [200,250)
    assert (g["comm_ns"], g["compute_ns"], g["hidden_ns"], g["exposed_ns"]) == (90, 100, 50, 40)
    assert (g["kernels"], g["span_ns"], g["active_ns"], g["idle_ns"]) == (7, 190, 140, 50)
    per_class = {r[2]: r[3:] for r in classes.rows() if r[:2] == (1, 0)}
    assert per_class["comm"] == (2, 90, 90) and per_class["elementwise"] == (2, 40, 40)
    assert per_class["gemm"] == (2, 110, 90)


def test_rows_touching_the_window_edges() -> None:
    k = kernels(
        (0, 0, 50, 100, "comm"),  # ends at the window start: out
        (0, 0, 200, 250, "comm"),  # starts at the window end: out
        (0, 0, 100, 100, "gemm"),  # zero-length at the window start: in
        (0, 0, 200, 200, "gemm"),  # zero-length at the window end: out
        (0, 0, 99, 101, "elementwise"),  # crosses the start: [100,101)
        (0, 0, 199, 201, "elementwise"),  # crosses the end: [199,200)
        (0, 0, 90, 90, "other"),  # zero-length before the window: out
    )
    win = Window(100, 200)
    assert win.select(k).select("start", "end", "class").rows() == [
        (100, 100, "gemm"),
        (100, 101, "elementwise"),
        (199, 200, "elementwise"),
    ]
    gpus, classes = per_gpu(k, M.clear(), win)
    g = gpus.row(0, named=True)
    assert (g["kernels"], g["comm_ns"], g["compute_ns"], g["span_ns"], g["active_ns"]) == (
        3, 0, 2, 100, 2,
    )  # fmt: skip
    assert {r[2]: r[3] for r in classes.rows()}["gemm"] == 1


def test_window_select_one_sided_and_exact_clip() -> None:
    df = pl.DataFrame({"start": [-5, 0, 10, 20, 30, 30], "end": [0, 10, 25, 20, 40, 30]})
    assert Window(start_ns=10).select(df).rows() == [(10, 25), (20, 20), (30, 40), (30, 30)]
    assert Window(end_ns=20).select(df).rows() == [(-5, 0), (0, 10), (10, 20)]
    assert Window(start_ns=0, end_ns=30).select(df).rows() == [(0, 10), (10, 25), (20, 20)]
    assert Window(26, 28).select(df).rows() == []  # a window in a gap selects nothing
    assert WHOLE_TRACE.select(df) is df


def test_window_bounds_and_anchoring() -> None:
    assert WHOLE_TRACE.bounds() == (INT64_MIN, INT64_MAX) and not WHOLE_TRACE.bounded
    assert Window(start_ns=5).bounds() == (5, INT64_MAX) and Window(start_ns=5).bounded
    assert Window(end_ns=0).bounds() == (INT64_MIN, 0) and Window(end_ns=0).bounded
    assert Window(start_ns=0).bounded and Window(0, 0).bounds() == (0, 0)
    rel = Window(2, 5, relative=True)
    assert rel.anchored(100) == Window(102, 105) and not rel.anchored(100).relative
    assert Window(None, 5, relative=True).anchored(100) == Window(None, 105)
    assert Window(2, None, relative=True).anchored(-100) == Window(-98, None)
    assert Window(2, 5).anchored(100) == Window(2, 5) and not Window(2, 5).relative
    assert len({Window(1, 2), Window(1, 2), WHOLE_TRACE}) == 2  # frozen: hashable, a dict key
    with pytest.raises(dataclasses.FrozenInstanceError):
        WHOLE_TRACE.start_ns = 0  # type: ignore[misc]


def test_rows_at_the_int64_extremes() -> None:
    df = pl.DataFrame({"start": [INT64_MIN, INT64_MAX - 1, INT64_MAX],
                       "end": [INT64_MIN + 1, INT64_MAX, INT64_MAX]})  # fmt: skip
    assert WHOLE_TRACE.select(df).rows() == df.rows()  # unbounded keeps even [max, max)
    assert Window(start_ns=INT64_MAX - 1).select(df).rows() == [(INT64_MAX - 1, INT64_MAX)]
    assert Window(end_ns=INT64_MIN + 1).select(df).rows() == [(INT64_MIN, INT64_MIN + 1)]
    k = kernels((0, 0, INT64_MAX - 10, INT64_MAX, "comm"), (0, 0, INT64_MAX - 4, INT64_MAX, "gemm"))
    got = per_gpu(k, M.clear())[0].row(0, named=True)
    assert (got["span_ns"], got["comm_ns"], got["hidden_ns"]) == (10, 10, 4)
    assert got["hidden_pct"] == 40.0
    got = per_gpu(k, M.clear(), Window(start_ns=INT64_MAX - 5))[0].row(0, named=True)
    assert (got["span_ns"], got["comm_ns"], got["compute_ns"], got["hidden_ns"]) == (5, 5, 4, 4)


@pytest.mark.parametrize("lo", [None, 0, 100, 150, 500])
@pytest.mark.parametrize("hi", [None, 100, 260, 450])
def test_window_matches_brute_force(lo: int | None, hi: int | None) -> None:
    """comm/compute/active/kernels per window against per-nanosecond sets (GPU (1, 0))."""
    a, b = INT64_MIN if lo is None else lo, INT64_MAX if hi is None else hi
    ks = [r for r in K.filter(pl.col("pid") == 1).iter_rows(named=True)]
    ms = [r for r in M.filter(pl.col("pid") == 1).iter_rows(named=True)]

    def ns(rows: list[dict]) -> set[int]:
        return {t for r in rows for t in range(max(r["start"], a), min(r["end"], b))}

    inside = [r for r in ks if r["end"] > a and r["start"] < b]
    comm = ns([r for r in ks if r["class"] == "comm"])
    compute = ns([r for r in ks if r["class"] != "comm"])
    gpus, _ = per_gpu(K.filter(pl.col("pid") == 1), M.filter(pl.col("pid") == 1), Window(lo, hi))
    if not inside and not [r for r in ms if r["end"] > a and r["start"] < b]:
        assert gpus.is_empty()
        return
    g = gpus.row(0, named=True)
    assert (g["comm_ns"], g["compute_ns"], g["hidden_ns"]) == (
        len(comm), len(compute), len(comm & compute),
    )  # fmt: skip
    assert g["active_ns"] == len(ns(ks) | ns(ms)) and g["kernels"] == len(inside)


@pytest.mark.parametrize("lo", [None, 0, 75, 250])
@pytest.mark.parametrize("hi", [None, 95, 260])
def test_busy_is_compute_under_comm_per_nanosecond(lo: int | None, hi: int | None) -> None:
    """per_gpu_and_busy's ⋃K ∩ ⋃C against the per-nanosecond set (a kernel without a class is
    neither; copies are not compute) and against compute_under_comm of the same windowed
    kernels; its first two tables are per_gpu's."""
    k = pl.concat([K, kernels((1, 0, 95, 98, "comm"), (3, 0, 0, 40, None), (3, 0, 5, 20, "gemm"),
                              (3, 0, 8, 30, "comm"), (3, 0, 20, 25, "elementwise"))])
    a, b = INT64_MIN if lo is None else lo, INT64_MAX if hi is None else hi
    w = Window(lo, hi)
    gpus, classes, busy = per_gpu_and_busy(k, M, w)
    want_gpus, want_classes = per_gpu(k, M, w)
    assert gpus.equals(want_gpus) and classes.equals(want_classes)
    assert busy.equals(compute_under_comm(w.select(k)))
    for (pid, device), rows in k.partition_by("pid", "device", as_dict=True).items():

        def ns(klass: pl.Expr, rows: pl.DataFrame = rows) -> set[int]:
            return {t for r in rows.filter(klass).iter_rows(named=True)
                    for t in range(max(r["start"], a), min(r["end"], b))}  # fmt: skip

        comm = pl.col("class") == "comm"
        want = ns(comm) & ns(~comm)  # a null class passes neither filter
        mine = busy.filter(pl.col("pid") == pid, pl.col("device") == device)
        got = [t for r in mine.iter_rows(named=True) for t in range(r["start"], r["end"])]
        assert len(got) == len(set(got)) and set(got) == want, (pid, device)
        assert (mine["start"][1:] > mine["end"][:-1]).all()  # sorted, disjoint, not touching


def test_by_gpu_mask_and_partition_paths_agree(monkeypatch) -> None:
    """Past the few-GPU limit the rows are split by a partition instead of a mask per GPU: the
    same arrays per GPU (its key columns left out), rows in table order."""
    import numpy as np

    from nsysmoe.measure import overlap

    df = pl.DataFrame({"pid": [2, 1, 2, 1, 2], "device": [0, 1, 0, 1, 1],
                       "start": [5, 4, 3, 2, 1], "code": [1, 2, 3, 4, 5]})  # fmt: skip
    keys = overlap.gpu_keys(df)
    masked = overlap.by_gpu(df, keys)
    monkeypatch.setattr(overlap, "_FEW_GPUS", 0)
    parted = overlap.by_gpu(df, keys)
    assert list(masked) == keys and sorted(parted) == keys
    for key in keys:
        assert set(masked[key]) == set(parted[key]) == {"start", "code"}
        for c in ("start", "code"):
            assert np.array_equal(masked[key][c], parted[key][c])
    assert masked[(2, 0)]["start"].tolist() == [5, 3]
