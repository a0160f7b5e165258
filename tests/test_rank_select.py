"""``--rank R``: one rank's GPUs on each side, selected once before measuring; and the A/B's
per-rank values (``per_rank`` of every metric row) against the all-GPU rows and the truth."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from nsysmoe import env
from nsysmoe.ab import per_rank
from nsysmoe.api import analyze, compare, example_paths
from nsysmoe.cli import main
from nsysmoe.model import Iterations, Scope, Whole
from nsysmoe.renderers import render
from tests.fixtures.generate import moe_step_scenario, write_export
from tests.test_pipeline import assert_gpus_equal_truth, truth_of, window_truth

SEED_ROWS = ("comm_gemm_attn_ns", "hidden_pct", "active_ns", "comm_ns", "exposed_ns", "idle_ns",
             "kernels", "step_time_ns", "gemm_sum_ns", "attention_sum_ns")  # fmt: skip
#: rows whose all-GPU value is not the sum of the ranks' values
NOT_SUMMED = ("step_time_ns", "hidden_pct", "_median_ns")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[dict]]:
    """An off/on pair of 2-process exports (pids 48211 and 49224, one GPU each)."""
    out = tmp_path_factory.mktemp("two-ranks")
    paths, truths = [], []
    for overlap in (False, True):
        spec, truth = moe_step_scenario(dispatcher="hybridep", overlap=overlap, steps=8,
                                        n_processes=2, seed=3)  # fmt: skip
        paths.append(write_export(out / f"overlap-{overlap}.sqlite", spec, "3.13.2", shuffle=True))
        truths.append(truth)
    return paths, truths


def rows_of(c) -> dict[str, tuple[Any, Any]]:
    return {r.key: (r.off, r.on) for r in c.rows}


def test_rank_0_of_the_shipped_pair_is_the_whole_pair_and_the_truth() -> None:
    off_path, on_path = example_paths()
    scope = Scope(window=Iterations(skip=1))
    whole = compare(off_path, on_path, scope=scope)
    for rank in (0, 48211):  # the only process, by position and by pid
        c = compare(off_path, on_path, scope=Scope(window=Iterations(skip=1), rank=rank))
        assert rows_of(c) == rows_of(whole)
        for side, path in ((c.off, off_path), (c.on, on_path)):
            exp = window_truth(truth_of(path.stem), range(1, 8))
            label = side.label
            for key in SEED_ROWS:
                assert getattr(c.row(key), label) == pytest.approx(exp[key]), (label, key)
    for r in whole.rows:  # one rank: its per-rank value is the row
        assert [(v.rank, v.pid_off, v.pid_on, v.off, v.on) for v in r.per_rank] == [
            (0, 48211, 48211, r.off, r.on)], r.key  # fmt: skip


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_selects_each_process_and_equals_its_truth(two_ranks, rank: int) -> None:
    (off_path, on_path), truths = two_ranks
    for path, truth in zip((off_path, on_path), truths, strict=True):
        gpu = sorted(truth["gpus"], key=lambda g: g["pid"])[rank]
        for r in (rank, gpu["pid"]):  # by position and by pid
            one = analyze(path, scope=Scope(window=Whole(), rank=r))
            assert_gpus_equal_truth(one, {**truth, "gpus": [gpu]})
    c = compare(off_path, on_path, scope=Scope(window=Iterations(skip=1), rank=rank))
    numbers = sorted(set(c.off.analysis.iterations["step"]))
    assert numbers == list(range(1, 8))
    for side, truth in ((c.off, truths[0]), (c.on, truths[1])):
        gpu = sorted(truth["gpus"], key=lambda g: g["pid"])[rank]
        assert side.analysis.gpus["pid"].to_list() == [gpu["pid"]]
        exp = window_truth({**truth, "gpus": [gpu]}, range(1, 8))
        assert (side.analysis.window.start_ns, side.analysis.window.end_ns) == exp["window"]
        for key in SEED_ROWS:
            assert getattr(c.row(key), side.label) == pytest.approx(exp[key]), (side.label, key)


def test_per_rank_values_add_up_to_the_all_gpu_rows(two_ranks) -> None:
    (off_path, on_path), _ = two_ranks
    c = compare(off_path, on_path, scope=Scope(window=Iterations(skip=1)))  # one window: all ranks
    doc = json.loads(render(c, "json"))
    assert doc["schema"] == "nsysmoe.comparison"
    keys = [m["key"] for m in doc["metrics"]]
    assert any(k.startswith("nvtx:") for k in keys) and any(k.startswith("nvtx_gpu:") for k in keys)
    pids = sorted(c.off.analysis.gpus["pid"])
    for m in doc["metrics"]:
        ranks = m["per_rank"]
        assert [(v["rank"], v["pid_off"], v["pid_on"]) for v in ranks] == [
            (i, pid, pid) for i, pid in enumerate(pids)], m["key"]  # fmt: skip
        for side in ("off", "on"):
            vals = [v[side] for v in ranks]
            if m[side] is None:
                assert vals == [None, None], (m["key"], side)
            elif not m["key"].endswith(NOT_SUMMED):
                assert sum(vals) == m[side], (m["key"], side)
            elif m["unit"] == "pct":  # each rank's share of its own union: between the ranks'
                assert min(vals) - 1e-9 <= m[side] <= max(vals) + 1e-9, (m["key"], side)
    # here no rank ran work outside its own iterations inside the other's: --rank agrees
    for i in range(len(pids)):
        alone = compare(off_path, on_path, scope=Scope(window=Iterations(skip=1), rank=i))
        assert {r.key: (r.per_rank[i].off, r.per_rank[i].on) for r in c.rows} == rows_of(alone)
    # the per-GPU rows of the all-GPU A/B are the per-rank totals (one GPU per process)
    for i, g in enumerate(c.per_gpu.iter_rows(named=True)):
        for col in ("exposed_ns", "active_ns", "comm_gemm_attn_ns"):
            assert c.row(col).per_rank[i].off == g[f"{col}_off"]
            assert c.row(col).per_rank[i].on == g[f"{col}_on"]


@pytest.mark.parametrize("cores", [1, 3])
def test_per_rank_values_do_not_depend_on_the_cores(two_ranks, monkeypatch, cores: int) -> None:
    """The ranks are measured in a pool of one thread per core (at most 4): its size changes
    when they run, not what they give (each rank reads only its side, never another rank)."""
    (off_path, on_path), _ = two_ranks
    scope = Scope(window=Iterations(skip=1))
    seen: list[int] = []
    pool = per_rank.ThreadPoolExecutor

    def counted(max_workers: int) -> ThreadPoolExecutor:
        seen.append(max_workers)
        return pool(max_workers)

    monkeypatch.setattr(per_rank, "ThreadPoolExecutor", counted)
    monkeypatch.setattr(env, "cores", lambda: cores)

    def ranks_of(c) -> dict[str, list[tuple[Any, ...]]]:
        return {r.key: [(v.rank, v.pid_off, v.off, v.on) for v in r.per_rank] for r in c.rows}

    few = ranks_of(compare(off_path, on_path, scope=scope))
    assert seen == [cores] and all(len(v) == 2 for v in few.values())
    monkeypatch.setattr(env, "cores", lambda: 64)
    assert ranks_of(compare(off_path, on_path, scope=scope)) == few and seen == [cores, 4]


def test_per_rank_of_a_rank_selected_pair_is_that_rank(two_ranks) -> None:
    (off_path, on_path), _ = two_ranks
    c = compare(off_path, on_path, scope=Scope(rank=1))
    (pid,) = c.off.analysis.gpus["pid"]
    for r in c.rows:
        assert [(v.pid_off, v.off, v.on) for v in r.per_rank] == [(pid, r.off, r.on)], r.key


def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *args: str) -> tuple[int, str, str]:  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["nsysmoe", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_rank_json_and_missing_rank(two_ranks, monkeypatch, capsys) -> None:
    (off_path, on_path), _ = two_ranks
    code, out, _ = run_cli(monkeypatch, capsys, "analyze", str(off_path), str(on_path),
                           "--rank", "1", "--format", "json")  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    for side in ("off", "on"):
        assert [g["pid"] for g in doc[side]["gpus"]] == [49224]
    code, out, err = run_cli(monkeypatch, capsys, "analyze", str(off_path), str(on_path),
                             "--rank", "2")  # fmt: skip
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("nsysmoe: error: "), err
    assert str(off_path) in err and "48211, 49224" in err and "0–1" in err, err
    off, on = (str(p) for p in example_paths())
    code, _, err = run_cli(monkeypatch, capsys, "analyze", off, "--rank", "49224")
    assert code == 2 and "no rank 49224" in err and "48211" in err, err
    kineto = [str(p) for p in example_paths("kineto")]
    code, _, err = run_cli(monkeypatch, capsys, "analyze", *kineto, "--rank", "1")
    assert code == 2 and "no rank 1" in err and "ranks here: 0" in err, err
    code, _, err = run_cli(monkeypatch, capsys, "analyze", off, on, off, "--rank", "0")
    assert code == 2 and "one export per side" in err, err


def test_a_process_rows_are_what_it_alone_gives(two_ranks) -> None:
    """The per-(pid, step) iteration rows, per-(pid, step, channel) channel sums, per-pid NVTX
    totals and OOM markers an analysis keeps (the per-rank values read them) equal each process
    measured alone, and add up to the all-GPU iteration, channel and NVTX tables."""
    import polars as pl

    from nsysmoe.measure.channels import channel_iterations, process_channel_iterations
    from nsysmoe.measure.iterations import iteration_table, process_iterations
    from nsysmoe.measure.nvtx import nvtx_totals, totals_of
    from nsysmoe.measure.steps import detect_steps, process_windows
    from nsysmoe.measure.walls import oom_markers
    from nsysmoe.pipeline import prepare, restrict
    from nsysmoe.results import Steps

    paths, _ = two_ranks
    for path in paths:
        a = analyze(path, scope=Scope(window=Iterations(skip=1)))
        source, kept = a.source, a.iterations["step"].to_list()
        steps = detect_steps(source.trace)
        assert a.process_iterations["pid"].n_unique() == 2
        for pid in a.process_iterations["pid"].unique().to_list():
            alone = restrict(source, [pid])
            mine = Steps(steps.table.filter(pl.col("pid") == pid), steps.pattern, steps.timeline)
            k, m = alone.kernels, alone.trace.memops
            own = process_iterations(k, m, mine, kept)
            assert own.equals(a.process_iterations.filter(pl.col("pid") == pid))
            chans = process_channel_iterations(k, process_windows(mine, kept)).sort(
                "step", "channel")
            kept_rows = a.process_iteration_channels.filter(pl.col("pid") == pid)
            assert chans.equals(kept_rows.sort("step", "channel"))
            assert not own.is_empty() and not chans.is_empty()
            names = ["name", "style"]
            alone_nvtx = nvtx_totals(alone.trace.nvtx, a.cpu_window).sort(names)
            kept_nvtx = totals_of(a.process_nvtx.filter(pl.col("pid") == pid)).sort(names)
            assert not alone_nvtx.is_empty() and alone_nvtx.equals(kept_nvtx)
            assert oom_markers(alone.trace.nvtx) == {pid: a.oom_markers[pid]}
        assert totals_of(a.process_nvtx).sort("name", "style").equals(a.nvtx.sort("name", "style"))
        whole = prepare(source.trace)
        assert iteration_table(whole.kernels, whole.trace.memops, steps, kept).equals(
            a.iterations.select(iteration_table(whole.kernels, whole.trace.memops, steps,
                                                kept).columns))  # fmt: skip
        summed = channel_iterations(whole.kernels, process_windows(steps, kept))
        assert summed.equals(channel_iterations(
            whole.kernels, process_windows(steps, kept),
            per_process=a.process_iteration_channels))  # fmt: skip
