"""Communication per step phase (nsysmoe.measure.phases) against a brute force: membership by
plain containment of the launching call, unions and hidden time painted per nanosecond."""

from __future__ import annotations

import json
from collections import defaultdict

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.api import analyze, example_paths, load, render
from nsysmoe.errors import NsysmoeError
from nsysmoe.measure.phases import LAYER, phase_pattern, phase_tables, phase_totals
from nsysmoe.model import NVTX_SCHEMA, RUNTIME_SCHEMA, WHOLE, Window
from nsysmoe.pipeline import prepare
from tests.fixtures.generate import EXAMPLES_TRUTH_DIR

PID, TIDS = 7, (7 << 24 | 1, 7 << 24 | 2)
NAMES = ("moe_dispatch forward", "layer_1f", "layer_0f-layer_2b", "aten::mm")


def frames(ranges, kernels):
    nvtx = pl.DataFrame([(PID, TIDS[t], s, e, n, None, "pushpop", False) for t, s, e, n in ranges],
                        schema=NVTX_SCHEMA, orient="row")  # fmt: skip
    runtime = pl.DataFrame([(PID, TIDS[k[4]], k[5], k[5] + 1, i, None)
                            for i, k in enumerate(kernels)], schema=RUNTIME_SCHEMA, orient="row")
    k = pl.DataFrame([(PID, 0, s, e, i, c) for i, (s, e, c, _, _, _) in enumerate(kernels)],
                     schema={"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64,
                             "end": pl.Int64, "corr_id": pl.Int64, "class": pl.String},
                     orient="row")  # fmt: skip
    return k, runtime, nvtx


def brute(ranges, kernels, lo=-(10**9), hi=10**9):
    phases: dict[str, set[int]] = defaultdict(set)
    for i, (_, _, c, _, tid, call) in enumerate(kernels):
        if c != "comm":
            continue
        for t, s, e, n in ranges:
            if n in NAMES[:3] and t == tid and s <= call and e >= call + 1:
                phases[n].add(i)
    out = {}
    for name, members in phases.items():
        comm, compute, gemm = set(), set(), set()
        for i, (s, e, c, *_rest) in enumerate(kernels):
            span = set(range(max(s, lo), min(e, hi)))
            if i in members:
                comm |= span
            elif c != "comm":
                compute |= span
                if c == "gemm":
                    gemm |= span
        inside = [i for i in members if kernels[i][0] < hi and (kernels[i][1] > lo or (
            kernels[i][0] == kernels[i][1] and kernels[i][0] >= lo))]  # fmt: skip
        if inside:
            out[name] = {"count": len(inside), "comm_ns": len(comm),
                         "hidden_ns": len(comm & compute), "comm_gemm_attn_ns": len(comm & gemm)}
    return out


kernel = st.tuples(st.integers(0, 50), st.integers(0, 20), st.sampled_from(["comm", "gemm",
                   "elementwise"]), st.just(0), st.integers(0, 1), st.integers(0, 60)).map(
    lambda k: (k[0], k[0] + k[1], *k[2:]))  # fmt: skip
rng = st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 40),
                st.sampled_from(NAMES)).map(lambda r: (r[0], r[1], r[1] + r[2], r[3]))


@settings(max_examples=150, deadline=None)
@given(st.lists(rng, max_size=8), st.lists(kernel, max_size=20))
def test_phase_table_equals_brute_force(ranges, kernels) -> None:
    k, runtime, nvtx = frames(ranges, kernels)
    phases, _ = phase_tables(k, runtime, nvtx)
    want = brute(ranges, kernels)
    got = {r["phase"]: r for r in phases.iter_rows(named=True)}
    assert set(got) == set(want)
    for name, w in want.items():
        assert {f: got[name][f] for f in w} == w, name
        assert got[name]["exposed_ns"] == w["comm_ns"] - w["hidden_ns"]


@settings(max_examples=60, deadline=None)
@given(st.lists(rng, max_size=8), st.lists(kernel, max_size=20), st.integers(0, 40),
       st.integers(1, 40))  # fmt: skip
def test_phase_table_in_a_window(ranges, kernels, lo, width) -> None:
    k, runtime, nvtx = frames(ranges, kernels)
    phases, _ = phase_tables(k, runtime, nvtx, Window(lo, lo + width))
    want = brute(ranges, kernels, lo, lo + width)
    got = {r["phase"]: r for r in phases.iter_rows(named=True)}
    assert set(got) == set(want)
    for name, w in want.items():
        assert {f: got[name][f] for f in w} == w, name


def test_layers_and_totals_by_hand() -> None:
    ranges = [(0, 0, 100, "layer_0f-layer_2b"), (0, 0, 50, "layer_1f")]
    kernels = [(10, 20, "comm", 0, 0, 5), (15, 30, "gemm", 0, 0, 6), (60, 70, "comm", 0, 0, 60)]
    k, runtime, nvtx = frames(ranges, kernels)
    phases, layers = phase_tables(k, runtime, nvtx)
    assert dict(zip(layers["layer"], layers["comm_ns"], strict=True)) == {0: 20, 1: 10, 2: 20}
    assert dict(zip(layers["layer"], layers["hidden_ns"], strict=True)) == {0: 5, 1: 5, 2: 5}
    tot = phase_totals(phases)
    assert tot["phase"].to_list() == ["layer_0f-layer_2b", "layer_1f"]
    assert tot.row(0, named=True)["instances"] == 1 and tot.row(0, named=True)["count"] == 2
    assert pl.Series(["decoder.layers.3.mlp"]).str.extract(LAYER, 1).to_list() == ["3"]


def test_bad_phase_pattern_is_an_error() -> None:
    with pytest.raises(NsysmoeError, match="bad --phase pattern") as err:
        phase_pattern("(")
    assert "unclosed group" in str(err.value) and "col(" not in str(err.value)


def test_shipped_example_phases_match_the_channel_truth() -> None:
    """HybridEP launches every dispatch kernel inside ``dispatch_core in hybrid-ep`` and every
    combine inside ``combine_core``: those phases are the channels of the fixture truth."""
    for path in example_paths():
        truth = json.loads((EXAMPLES_TRUTH_DIR / f"{path.stem}.truth.json").read_text())
        (g,) = truth["gpus"]
        result = analyze(path, scope=WHOLE)
        phases = {r["phase"]: r for r in result.phase_totals.iter_rows(named=True)}
        for phase, channel in (("dispatch_core in hybrid-ep", "ep.dispatch"),
                               ("combine_core in hybrid-ep", "ep.combine")):  # fmt: skip
            want = g["channels"][channel]
            assert {f: phases[phase][f] for f in ("count", "comm_ns", "hidden_ns")} == {
                f: want[f] for f in ("count", "comm_ns", "hidden_ns")}
        doc = json.loads(render(result, "json"))["traces"][0]
        assert doc["phases"]["dispatch_core in hybrid-ep"]["comm_ns"] == g["channels"][
            "ep.dispatch"]["comm_ns"]  # fmt: skip
    source = prepare(load(example_paths()[1]))
    with_extra, _ = phase_tables(source.kernels, source.trace.runtime, source.trace.nvtx,
                                 pattern=phase_pattern(r"^iteration \d+$"))  # fmt: skip
    assert "iteration 3" in set(with_extra["phase"])
