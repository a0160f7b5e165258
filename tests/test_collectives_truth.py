"""Wait vs transfer across ranks against the generator's truth (tests/fixtures/ranks.py, built by
construction and checked there against per-ns brute force): one multi-process export, and one
file per rank with its own session start, give the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsysmoe.api import analyze, analyze_many, render
from nsysmoe.model import WHOLE
from nsysmoe.parallel import Executor
from tests.fixtures.generate import straggler_scenario, write_export

FIELDS = ("wait_ns", "transfer_ns", "exposed_wait_ns", "exposed_transfer_ns")


def by_pid(collectives) -> dict[tuple[int, str], dict]:
    return {(int(r["rank"].split(":")[-2]), r["channel"]): r
            for r in collectives.waits.iter_rows(named=True)}  # fmt: skip


def assert_equal_truth(collectives, truth) -> None:
    got = by_pid(collectives)
    want = {(r["pid"], ch): v for r in truth["ranks"] for ch, v in r["channels"].items()}
    assert set(got) == set(want)
    for key, w in want.items():
        assert {f: got[key][f] for f in FIELDS} == {f: w[f] for f in FIELDS}, key
        assert got[key]["instances"] == w["count"], key
    named = {r["channel"]: r for r in collectives.stragglers.iter_rows(named=True)}
    for ch, s in truth["stragglers"].items():
        if s["pid"] is None:
            assert ch not in named
            continue
        assert int(named[ch]["rank"].split(":")[-2]) == s["pid"], ch
        assert (named[ch]["last_count"], named[ch]["caused_wait_ns"]) == (
            s["last_count"], s["caused_wait_ns"]), ch  # fmt: skip


@pytest.mark.parametrize("ddl", ["3.13.2", "3.28.1"])
def test_one_multi_process_export(tmp_path: Path, ddl: str) -> None:
    (spec,), truth = straggler_scenario(layout="multi")
    result = analyze(write_export(tmp_path / "run.sqlite", spec, ddl), scope=WHOLE)
    assert_equal_truth(result.collectives, truth)
    from nsysmoe.gate import values

    gate = values(result)
    for field in FIELDS:  # the worst rank over all its channels
        assert gate[f"max_rank_{field}"] == result.collectives.rank_totals[field].max()
    assert result.collectives.rank_totals["channels"].to_list() == [3] * 4
    text = render(result, "terminal")
    assert "Per rank, all channels together" in text
    straggler = truth["scenario"]["straggler_pid"]
    assert f":{straggler}:" in text.split("straggler (ep.dispatch):")[1].split("\n")[0]


@pytest.mark.parametrize("epoch", [False, True])
def test_one_file_per_rank_with_its_own_session_start(tmp_path: Path, epoch: bool) -> None:
    specs, truth = straggler_scenario(layout="files", epoch_timestamps=epoch)
    paths = [str(write_export(tmp_path / f"{s.label}.sqlite", s, "3.28.1")) for s in specs]
    run = analyze_many(paths, executor=Executor(1), scope=WHOLE)
    assert_equal_truth(run.collectives, truth)
    offsets = dict(zip(run.collectives.offsets["rank"], run.collectives.offsets["offset_ns"],
                       strict=True))  # fmt: skip
    want = {f["label"]: f["to_global_ns"] for f in truth["clock"]["files"]}
    for rank, off in offsets.items():
        label = rank.split(".sqlite")[0]
        assert off == want[label] - min(want.values()), rank
    # the multi-process layout of the same run gives the same numbers
    (multi,), _ = straggler_scenario(layout="multi")
    one = analyze(write_export(tmp_path / "multi.sqlite", multi, "3.28.1"), scope=WHOLE).collectives
    cols = ["channel", "instances", *FIELDS]
    a = {k: {c: v[c] for c in cols} for k, v in by_pid(one).items()}
    b = {k: {c: v[c] for c in cols} for k, v in by_pid(run.collectives).items()}
    assert a == b


def test_align_collectives_keeps_a_consistent_run(tmp_path: Path) -> None:
    """Session-start clocks are right here: aligning by ends moves nothing (all ends equal)."""
    specs, truth = straggler_scenario(layout="files")
    paths = [str(write_export(tmp_path / f"{s.label}.sqlite", s, "3.13.2")) for s in specs]
    run = analyze_many(paths, executor=Executor(1), align=True, scope=WHOLE)
    assert set(run.collectives.offsets["correction_ns"]) == {0}
    assert run.collectives.offsets["spread_ns"].max() == 0
    assert_equal_truth(run.collectives, truth)


def test_ab_of_two_runs_has_per_rank_values_and_wait_totals(tmp_path: Path) -> None:
    """``off_dir/ on_dir/``: every metric row carries each rank's own values (rank i = pair i),
    and the collective rows are each rank's total over its channels, summed over ranks, with
    the rank's total in ``per_rank``; --fail-if sees them."""
    from nsysmoe.api import compare_many
    from nsysmoe.gate import values

    dirs = []
    for side, delay in (("off", 400_000), ("on", 100_000)):
        specs, _ = straggler_scenario(layout="files", delay_ns=delay)
        (tmp_path / side).mkdir()
        dirs.append([str(write_export(tmp_path / side / f"{s.label}.sqlite", s, "3.28.1"))
                     for s in specs])  # fmt: skip
    rc = compare_many(*dirs, executor=Executor(1))
    rows = {r.key: r for r in rc.rows}
    assert len(rc.pairs) == 4
    for r in rc.rows:
        assert [v.rank for v in r.per_rank] == [0, 1, 2, 3], r.key
    for i, p in enumerate(rc.pairs):
        for key in ("step_time_ns", "exposed_ns", "hidden_pct", "kernels"):
            v = rows[key].per_rank[i]
            assert (v.off, v.on) == (p.row(key).off, p.row(key).on), key
            assert v.pid_off == int(p.off.analysis.gpus["pid"][0])
    for side, c in (("off", rc.collectives_off), ("on", rc.collectives_on)):
        totals = c.rank_totals.sort("rank")
        assert len(totals) == 4
        for key, field in (("collective_wait_ns", "wait_ns"),
                           ("collective_exposed_wait_ns", "exposed_wait_ns"),
                           ("collective_transfer_ns", "transfer_ns")):  # fmt: skip
            per = [getattr(v, side) for v in rows[key].per_rank]
            assert per == totals[field].to_list(), (side, key)
            assert getattr(rows[key], side) == sum(per)
    assert rows["collective_wait_ns"].on < rows["collective_wait_ns"].off
    gate = values(rc)
    assert gate["collective_exposed_wait_ns_delta"] == rows["collective_exposed_wait_ns"].delta
    js = json.loads(render(rc, "json"))
    wait = next(m for m in js["metrics"] if m["key"] == "collective_wait_ns")
    assert [v["off"] for v in wait["per_rank"]] == [v.off for v in rows["collective_wait_ns"]
                                                     .per_rank]  # fmt: skip
    assert all(m["per_rank"] for m in js["metrics"])
