"""The shared launch-call join against a brute-force lookup, and the stages that use it against
their own general paths (which join the runtime table themselves)."""

from __future__ import annotations

import gc

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.measure import launch_calls
from nsysmoe.measure.launch_calls import launch_table, launches_of, only_processes
from nsysmoe.measure.phases import DEFAULT_PHASES, memberships, phase_tables
from nsysmoe.measure.projection import project_nvtx
from nsysmoe.model import Trace

OP = {"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
      "corr_id": pl.Int64}  # fmt: skip
RT = {"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64, "corr_id": pl.Int64}


def brute(ops: list[dict], runtime: list[dict]) -> list[tuple]:
    """Per op: (api_start, api_end, api_tid) of the matching runtime row that comes first by
    (start, tid, end), nulls last; all null without one."""
    out = []
    for op in ops:
        rows = [r for r in runtime if op["corr_id"] is not None and r["pid"] == op["pid"]
                and r["corr_id"] == op["corr_id"] and r["start"] is not None]  # fmt: skip

        def order(r: dict) -> tuple:
            return tuple((v is None, v or 0) for v in (r["start"], r["tid"], r["end"]))

        best = min(rows, key=order) if rows else None
        found = (best["start"], best["end"], best["tid"]) if best else (None, None, None)
        out.append(found)
    return out


pids = st.sampled_from([0, 1, 7, 2**31 - 1])
corrs = st.one_of(st.none(), st.integers(0, 6), st.just(2**32 - 1))


@st.composite
def tables(draw: st.DrawFn, wide: bool = False) -> tuple[list[dict], list[dict], list[dict]]:
    pid = st.sampled_from([-3, 2**31, 2**40]) | pids if wide else pids
    corr = st.one_of(corrs, st.sampled_from([-1, 2**32, 2**45])) if wide else corrs
    t = st.integers(0, 50)

    def op() -> dict:
        start = draw(t)
        return {"pid": draw(pid), "device": draw(st.integers(0, 1)), "start": start,
                "end": start + draw(st.integers(0, 5)), "corr_id": draw(corr)}  # fmt: skip

    def call() -> dict:
        start = draw(st.one_of(st.none(), t) | t)
        tid = st.one_of(st.none(), st.integers(0, 2)) | st.integers(0, 2)
        return {"pid": draw(pid), "tid": draw(tid),
                "start": start, "end": draw(st.one_of(st.none(), t) | t),
                "corr_id": draw(corr)}  # fmt: skip

    kernels = [op() for _ in range(draw(st.integers(0, 12)))]
    memops = [op() for _ in range(draw(st.integers(0, 4)))]
    runtime = [call() for _ in range(draw(st.integers(0, 14)))]
    return kernels, memops, runtime


def frames(kernels: list[dict], memops: list[dict], runtime: list[dict]) -> tuple:
    return (pl.DataFrame(kernels, schema=OP), pl.DataFrame(memops, schema=OP),
            pl.DataFrame(runtime, schema=RT))  # fmt: skip


def check(case: tuple[list[dict], list[dict], list[dict]]) -> None:
    kernels, memops, runtime = case
    got = launch_table(*frames(*case))
    assert got.n_kernels == len(kernels)
    assert got.ops.select("pid", "device", "start", "end", "corr_id").to_dicts() == kernels + memops
    assert list(got.ops.select("api_start", "api_end", "api_tid").iter_rows()) == brute(
        kernels + memops, runtime)  # fmt: skip
    keys = [(r["pid"], r["corr_id"]) for r in runtime
            if None not in (r["pid"], r["corr_id"], r["start"])]  # fmt: skip
    assert got.unique == (len(keys) == len(set(keys)))


@settings(max_examples=300, deadline=None)
@given(tables())
def test_matches_brute_force(case: tuple) -> None:
    check(case)


@settings(max_examples=150, deadline=None)
@given(tables(wide=True))
def test_ids_beyond_the_combined_key(case: tuple) -> None:
    """Negative or wide pids / corr ids take the two-column join: the same answer."""
    check(case)


def _trace(kernels: pl.DataFrame, memops: pl.DataFrame, runtime: pl.DataFrame) -> Trace:
    empty = pl.DataFrame()
    return Trace("t", "nsys-sqlite", None, None, kernels, memops, runtime, empty, empty, empty)


def test_cached_per_trace_and_restricted() -> None:
    k, m, r = frames(
        [{"pid": p, "device": 0, "start": i, "end": i + 1, "corr_id": i} for i, p in
         enumerate([1, 2, 1, 2])],
        [{"pid": 2, "device": 0, "start": 9, "end": 10, "corr_id": 9}],
        [{"pid": p, "tid": 5, "start": c, "end": c + 1, "corr_id": c} for c, p in
         [(0, 1), (1, 2), (2, 1), (3, 2), (9, 2)]],
    )  # fmt: skip
    trace = _trace(k, m, r)
    first = launches_of(trace)
    assert launches_of(trace) is first
    alone = only_processes(first, [2])
    fresh = launch_table(k.filter(pl.col("pid") == 2), m.filter(pl.col("pid") == 2),
                         r.filter(pl.col("pid") == 2))  # fmt: skip
    assert alone.ops.equals(fresh.ops) and alone.n_kernels == fresh.n_kernels == 2
    key = id(trace)
    del trace, first
    gc.collect()
    assert key not in launch_calls._CACHE


NVTX = {"pid": pl.Int64, "tid": pl.Int64, "start": pl.Int64, "end": pl.Int64,
        "name": pl.String, "domain": pl.String, "style": pl.String,
        "cross_thread": pl.Boolean}  # fmt: skip


@st.composite
def projection_cases(draw: st.DrawFn) -> tuple:
    kernels, memops, runtime = draw(tables())
    runtime = [r | {"start": r["start"] or 0} for r in runtime]
    ranges = []
    for _ in range(draw(st.integers(0, 8))):
        start = draw(st.integers(0, 50))
        ranges.append({"pid": draw(pids), "tid": draw(st.integers(0, 2)), "start": start,
                       "end": start + draw(st.integers(0, 30)),
                       "name": draw(st.sampled_from(["layer_1f", "moe_dispatch forward", "x"])),
                       "domain": None, "style": "pushpop",
                       "cross_thread": draw(st.booleans())})  # fmt: skip
    klass = [draw(st.sampled_from(["comm", "gemm"])) for _ in kernels]
    return kernels, memops, runtime, ranges, klass


@settings(max_examples=200, deadline=None)
@given(projection_cases())
def test_projection_and_phases_same_with_shared_join(case: tuple) -> None:
    kernels, memops, runtime, ranges, klass = case
    k, m, r = frames(kernels, memops, runtime)
    k = k.with_columns(pl.Series("class", klass, pl.String))
    nvtx = pl.DataFrame(ranges, schema=NVTX)
    launches = launch_table(k, m, r)
    general = project_nvtx(nvtx, k, m, r)
    shared = project_nvtx(nvtx, k, m, r, launches=launches)
    if launches.unique:
        assert shared.equals(general)
        launched = launches.kernels.select("api_tid", "api_start", "api_end")
        on = ["row", "range_id", "phase"]
        a = memberships(k, r, nvtx, DEFAULT_PHASES).sort(on)
        b = memberships(k.hstack(launched), r, nvtx, DEFAULT_PHASES).sort(on)
        assert a.equals(b)
        k = k.with_columns(stream=pl.lit(0, pl.Int64), channel=pl.lit(None, pl.String))
        assert all(x.equals(y) for x, y in zip(
            phase_tables(k, r, nvtx), phase_tables(k, r, nvtx, launched=launched), strict=True))
