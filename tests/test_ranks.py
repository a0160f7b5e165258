"""Many ranks: 64 files through worker processes and through Dask give the same JSON; a corrupt
file is reported without stopping the run; the trace cache is never stale."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.parallel import Executor, expand
from nsysmoe.renderers import render
from tests.fixtures.generate import moe_step_scenario, write_export

DISTINCT = 8  # distinct generated ranks, copied to make 64 files (generation is the slow part)


@pytest.fixture(scope="module")
def rank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    out = tmp_path_factory.mktemp("ranks")
    for i in range(DISTINCT):
        spec, _ = moe_step_scenario(dispatcher="deepep", overlap=True, steps=3, layers=1,
                                    microbatches=2, warmup_steps=1, seed=i)  # fmt: skip
        write_export(src / f"{i}.sqlite", spec, "3.13.2")
    for rank in range(64):
        shutil.copy(src / f"{rank % DISTINCT}.sqlite", out / f"rank{rank:02d}.sqlite")
    return out


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "nsysmoe", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_expand_directory_and_glob(rank_dir: Path) -> None:
    assert len(expand(str(rank_dir))) == 64
    assert expand(str(rank_dir / "rank0*.sqlite")) == [str(rank_dir / f"rank0{i}.sqlite")
                                                       for i in range(10)]  # fmt: skip


def test_jobs_and_dask_give_identical_json(rank_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    jobs, dask = tmp_path / "jobs.json", tmp_path / "dask.json"
    proc = run_cli("analyze", str(rank_dir), "--jobs", "2", "--format", "json", "-o", str(jobs))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("analyze", str(rank_dir), "--dask", "local", "--format", "json", "-o", str(dask))
    assert proc.returncode == 0, proc.stderr
    assert jobs.read_text() == dask.read_text()
    doc = json.loads(jobs.read_text())
    assert doc["schema"] == "nsysmoe.run" and len(doc["ranks"]) == 64 and not doc["failures"]
    assert {s["metric"] for s in doc["spread"]} >= {"step_ns", "hidden_pct", "exposed_ns"}
    # collectives are matched once over the workers' compact arrival tables, either way
    assert doc["collectives"]["matched_instances"] > 0 and len(doc["collectives"]["waits"]) >= 64


def test_ranks_spread_and_straggler(rank_dir: Path) -> None:
    paths = expand(str(rank_dir))[:DISTINCT]
    run = api.analyze_many(paths, executor=Executor(jobs=1))
    singles = [api.analyze(p) for p in paths]
    assert run.ranks["comm_ns"].to_list() == [int(a.gpus["comm_ns"][0]) for a in singles]
    spread = {r["metric"]: r for r in run.spread.iter_rows(named=True)}
    comm = [int(a.gpus["comm_ns"][0]) for a in singles]
    assert spread["comm_ns"]["min"] == min(comm) and spread["comm_ns"]["max"] == max(comm)
    least = run.ranks.sort("comm_ns")["rank"][0]
    assert run.stragglers.by_comm_wait.rank == least  # the others wait for it
    slowest = run.ranks.sort("step_ns")["rank"][-1]
    assert run.stragglers.by_step_time.rank == slowest


def test_corrupt_file_is_reported_and_strict_fails(rank_dir: Path, tmp_path: Path) -> None:
    for i in range(3):
        shutil.copy(rank_dir / f"rank0{i}.sqlite", tmp_path / f"rank0{i}.sqlite")
    bad = tmp_path / "rank03.sqlite"
    bad.write_bytes((rank_dir / "rank03.sqlite").read_bytes()[:20000])
    proc = run_cli("analyze", str(tmp_path), "--jobs", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["traces"]) == 3 and [f["path"] for f in doc["failures"]] == [str(bad)]
    assert str(bad) in proc.stderr and "Traceback" not in proc.stderr
    strict = run_cli("analyze", str(tmp_path), "--jobs", "2", "--strict")
    assert strict.returncode == 2 and str(bad) in strict.stderr


def test_ab_of_two_runs(rank_dir: Path) -> None:
    off = expand(str(rank_dir / "rank0[0-3].sqlite"))
    on = expand(str(rank_dir / "rank0[4-7].sqlite"))
    rc = api.compare_many(off, on, executor=Executor(jobs=1))
    assert len(rc.pairs) == 4 and not rc.failures
    comm = rc.rows[[r.key for r in rc.rows].index("comm_ns")]
    assert comm.off == sum(p.row("comm_ns").off for p in rc.pairs)
    hidden = sum(p.row("comm_ns").off - p.row("exposed_ns").off for p in rc.pairs)
    assert rc.rows[[r.key for r in rc.rows].index("hidden_pct")].off == pytest.approx(
        100 * hidden / comm.off)


def test_cache_reuses_and_sees_a_changed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_dir = tmp_path / "cache"
    path = tmp_path / "trace.sqlite"
    a, b = api.example_paths()
    shutil.copy(a, path)
    first = render(api.analyze(path, cache_dir=cache_dir), "json")
    assert len(list(cache_dir.iterdir())) == 1
    assert render(api.analyze(path, cache_dir=cache_dir), "json") == first  # served from the cache
    shutil.copy(b, path)  # the file changes: a different export at the same path
    changed = api.analyze(path, cache_dir=cache_dir)
    assert render(changed, "json") == render(api.analyze(path), "json") != first
    assert len(list(cache_dir.iterdir())) == 2
