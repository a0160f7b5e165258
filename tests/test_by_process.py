"""An analysis one process at a time (:mod:`nsysmoe.by_process`) is the analysis of the trace
read whole (:func:`nsysmoe.pipeline.analyze_trace`, detached), byte for byte in every format:
on every shared trace, on multi-rank exports whose critical path crosses ranks at collectives,
with an op budget that walks part of the window, under other scopes, and with the same error
where the whole trace has one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import pipeline
from nsysmoe.by_process import analyze_by_process
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import load_trace, nsys_split
from nsysmoe.io.processes import ByProcess
from nsysmoe.measure import critical_path
from nsysmoe.model import STEADY, WHOLE, Iterations, Scope, Trace, Window
from nsysmoe.renderers import render
from tests.conftest import TRACES, require_shared
from tests.fixtures.generate import write_export
from tests.fixtures.ranks import straggler_scenario
from tests.measure.test_critical_path import two_ranks


def whole_and_split(trace: Trace, scope: Scope = STEADY) -> tuple[str, str]:
    src, steps = pipeline.prepare_with_steps(trace, scope=scope)
    whole = replace(pipeline.analyze_trace(src, scope=scope, steps=steps), source=None)
    split = analyze_by_process(ByProcess.of(trace), scope=scope)
    return render(whole, "json"), render(split, "json")


def same(trace: Trace, scope: Scope = STEADY) -> str:
    whole, split = whole_and_split(trace, scope)
    assert split == whole
    return whole


def shared_traces() -> list[str]:
    if not TRACES.is_dir():
        return []
    found = sorted(TRACES.glob("nsys/*.sqlite")) + sorted(TRACES.glob("nsys/*/*.sqlite"))[:2]
    found += sorted(TRACES.glob("kineto/*/*.json.gz"))[:4]
    return [str(p.relative_to(TRACES)) for p in found]


@pytest.mark.parametrize("rel", shared_traces() or ["(no shared traces)"])
def test_every_shared_trace_measures_the_same_one_process_at_a_time(rel: str) -> None:
    require_shared()
    same(load_trace(TRACES / rel))


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    """The fixture writer's 4-rank straggler run as one export (a process per rank)."""
    specs, _ = straggler_scenario(n_ranks=4, steps=5, layout="multi")
    path = tmp_path_factory.mktemp("straggler") / "multi.sqlite"
    write_export(path, specs[0], ddl="3.13.2")
    return load_trace(path)


def test_the_critical_path_crosses_ranks_the_same(four_ranks: Trace) -> None:
    out = same(four_ranks)
    assert '"collective":' in out and len(four_ranks.gpu_keys) == 4


def test_an_op_budget_walks_the_same_middle_iterations(
    four_ranks: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole_out = same(four_ranks)
    monkeypatch.setattr(critical_path, "MAX_PATH_OPS", 40)
    budget_out = same(four_ranks)
    assert budget_out != whole_out  # the budget changed what was walked, the same way


@pytest.mark.parametrize("scope", [
    WHOLE,
    replace(STEADY, window=Iterations(2, 4)),
    replace(STEADY, what_if=("comm*0", "gemm*0.5")),
    replace(STEADY, critical_path=False, what_if=("comm*0",)),
    replace(STEADY, raw_nvtx=True, phase="moe_dispatch"),
], ids=["whole", "iterations", "what-if", "no-path", "raw-nvtx"])  # fmt: skip
def test_other_scopes_measure_the_same(four_ranks: Trace, scope: Scope) -> None:
    same(four_ranks, scope)


def test_two_ranks_one_slow() -> None:
    trace, _ = two_ranks(slow=1.5)
    assert '"critical_path":{' in same(trace)


def test_a_process_without_work_in_the_window_is_measured_the_same() -> None:
    """One rank's whole timeline moved 1 s later: a window over the other rank's work only
    holds none of it (that process is measured after the others, and shows nowhere, as in the
    whole trace's analysis)."""
    trace, _ = two_ranks(slow=1.0)
    late = trace.kernels["pid"].max()
    shift = {t: getattr(trace, t).with_columns(
        pl.when(pl.col("pid") == late).then(pl.col(c) + 1_000_000_000).otherwise(pl.col(c))
        for c in ("start", "end")) for t in ("kernels", "memops", "runtime", "nvtx")}  # fmt: skip
    trace = replace(trace, **shift)
    k = trace.kernels.filter(pl.col("pid") != late)
    scope = replace(STEADY, window=Window(int(k["start"].min()), int(k["end"].max())))
    out = same(trace, scope)
    assert f'"pid":{late}' not in out and '"pid":' in out


def test_the_same_errors() -> None:
    trace, _ = two_ranks(slow=1.0)
    hi = int(trace.kernels["end"].max())
    empty = replace(STEADY, window=Window(hi + 10, hi + 20))
    bad = replace(STEADY, step_pattern="iteration [0-9]+")  # no group 1
    no_kernels = replace(trace, kernels=trace.kernels.clear())
    for t, scope in ((trace, empty), (trace, bad), (no_kernels, STEADY)):
        with pytest.raises(NsysmoeError) as whole:
            whole_and_split_whole(t, scope)
        with pytest.raises(NsysmoeError) as split:
            analyze_by_process(ByProcess.of(t), scope=scope)
        assert str(split.value) == str(whole.value)


def whole_and_split_whole(trace: Trace, scope: Scope) -> None:
    src, steps = pipeline.prepare_with_steps(trace, scope=scope)
    pipeline.analyze_trace(src, scope=scope, steps=steps)


def test_skipped_iteration_numbers_are_counted_over_every_process() -> None:
    """Ranges whose number is too big for int64 are skipped: the note counts those of every
    process and names the first in the trace's order, as the whole trace's does."""
    trace, _ = two_ranks(slow=1.0)
    nvtx = trace.nvtx.with_columns(pl.when(pl.int_range(pl.len()) % 5 == 3)
                                   .then(pl.lit("iteration 99999999999999999999"))
                                   .otherwise(pl.col("name")).alias("name"))  # fmt: skip
    out = same(replace(trace, nvtx=nvtx))
    assert "matching the iteration pattern skipped" in out


def test_the_split_of_a_whole_trace_is_its_processes(four_ranks: Trace) -> None:
    """:meth:`ByProcess.of` (the reference the splitting readers are checked against): each
    process's tables are ``only_processes`` of the whole, and its rows' places index them."""
    split = ByProcess.of(four_ranks)
    assert list(split.pids) == sorted({p for p, _ in four_ranks.gpu_keys})
    for pid in split.pids:
        one = split.load(pid)
        alone = four_ranks.only_processes([pid])
        for table in ("kernels", "memops", "runtime", "nvtx", "gpus", "syncs"):
            assert getattr(one.trace, table).equals(getattr(alone, table))
        for table, rows in one.order.items():
            assert getattr(four_ranks, table)[rows].equals(getattr(one.trace, table))
    assert split.shared.kernels.is_empty() and split.shared.gpus.equals(four_ranks.gpus)


def test_a_big_file_is_analysed_one_process_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api.analyze(detached=True)`` of a file of ``BY_PROCESS_BYTES`` or more reads it one
    process at a time (the reader splits it while reading): the same report as the whole
    read's, and the input file unchanged."""
    from nsysmoe import api

    specs, _ = straggler_scenario(n_ranks=4, steps=5, layout="multi")
    path = tmp_path / "multi.sqlite"
    write_export(path, specs[0], ddl="3.13.2")
    before = path.read_bytes(), path.stat().st_mtime_ns
    whole = replace(api.analyze(path), source=None)
    calls: list[Path] = []
    real = api.load_by_process

    def spy(p: Path, spill: str) -> ByProcess:
        calls.append(Path(spill))
        return real(p, spill)

    monkeypatch.setattr(api, "load_by_process", spy)
    monkeypatch.setattr(api, "BY_PROCESS_BYTES", 0)
    monkeypatch.setattr(nsys_split, "CHUNK_ROWS", 97)  # ranges of several processes each
    split = api.analyze(path, detached=True)
    assert len(calls) == 1 and not calls[0].exists()  # its temporary folder is gone
    assert render(split, "json") == render(whole, "json")
    assert split.source is None
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    monkeypatch.setattr(api, "BY_PROCESS_BYTES", path.stat().st_size + 1)
    api.analyze(path, detached=True)
    assert len(calls) == 1  # a smaller file is read whole


def test_a_big_file_without_room_for_its_rows_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows wait in the temporary folder: where it has no room for them, the file is read
    whole (the same figures, in more memory), not refused."""
    import shutil

    from nsysmoe import api

    specs, _ = straggler_scenario(n_ranks=2, steps=4, layout="multi", straggler=1)
    path = tmp_path / "multi.sqlite"
    write_export(path, specs[0], ddl="3.13.2")
    monkeypatch.setattr(api, "BY_PROCESS_BYTES", 0)
    assert api._by_process(path)
    full = shutil.disk_usage(tmp_path)._replace(free=api.SPILL_PER_BYTE * path.stat().st_size - 1)
    monkeypatch.setattr(api.shutil, "disk_usage", lambda _: full)
    assert not api._by_process(path)
    monkeypatch.setattr(api, "load_by_process", None)  # never called
    assert len(api.analyze(path, detached=True).gpus) == 2  # read whole: the spill never called


def _export(tmp_path: Path, n_ranks: int = 4) -> Path:
    specs, _ = straggler_scenario(n_ranks=n_ranks, steps=5, layout="multi", straggler=1)
    path = tmp_path / "multi.sqlite"
    write_export(path, specs[0], ddl="3.13.2")
    return path


def test_nvtx_ranges_of_no_process_are_left_out_by_both_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NVTX range whose thread is NULL belongs to no process: both reads leave it out and
    count it, so its number (here one too big for int64) is in neither's iteration notes."""
    import sqlite3

    from nsysmoe import api

    path = _export(tmp_path)
    with sqlite3.connect(path) as db:
        (table,) = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE name = "
                                             "'NVTX_EVENTS'")]  # fmt: skip
        db.execute(f"UPDATE {table} SET globalTid = NULL, text = 'iteration "
                   "99999999999999999999', textId = NULL WHERE rowid % 7 = 3")  # fmt: skip
    whole = replace(api.analyze(path), source=None)
    assert any("NVTX range rows without a process left out" in w for w in whole.warnings)
    assert not any("matching the iteration pattern skipped" in w for w in whole.warnings)
    monkeypatch.setattr(api, "BY_PROCESS_BYTES", 0)
    assert render(api.analyze(path, detached=True), "json") == render(whole, "json")


def test_each_process_is_freed_before_the_next_is_read(tmp_path: Path) -> None:
    """The memory bound: no process's tables are alive while the next one is read, in either
    pass (a process without work in the window too)."""
    import gc
    import weakref

    from nsysmoe.io import load_by_process

    split = load_by_process(_export(tmp_path), tmp_path / "spill")
    alive: list[weakref.ref] = []
    held: list[int] = []

    def load(pid: int) -> object:
        gc.collect()
        held.append(sum(r() is not None for r in alive))
        process = real(pid)
        alive.append(weakref.ref(process.trace))
        return process

    real = split._load
    object.__setattr__(split, "_load", load)
    analyze_by_process(split)
    assert len(held) == 2 * len(split.pids) and held == [0] * len(held)


def test_a_spill_out_of_room_falls_back_to_the_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsysmoe import api

    path = _export(tmp_path)
    whole = render(replace(api.analyze(path), source=None), "json")

    def full(p: Path, spill: str) -> ByProcess:
        raise OSError("No space left on device (os error 28)")

    monkeypatch.setattr(api, "BY_PROCESS_BYTES", 0)
    monkeypatch.setattr(api, "load_by_process", full)
    assert render(api.analyze(path, detached=True), "json") == whole

    def denied(p: Path, spill: str) -> ByProcess:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(api, "load_by_process", denied)
    with pytest.raises(PermissionError):  # not a want of room: not hidden
        api.analyze(path, detached=True)


def test_only_nsys_exports_of_several_processes_are_split(tmp_path: Path) -> None:
    from nsysmoe.io import several_processes

    assert several_processes(_export(tmp_path))
    one = tmp_path / "one.sqlite"
    specs, _ = straggler_scenario(n_ranks=2, steps=3, layout="multi", straggler=1)
    write_export(one, replace(specs[0], kernels=[k for k in specs[0].kernels
                                                 if k.pid == specs[0].kernels[0].pid]))  # fmt: skip
    assert not several_processes(one)
    for other in (tmp_path / "missing.sqlite", tmp_path, Path(__file__)):
        assert not several_processes(other)
    if TRACES.is_dir():
        assert not several_processes(next(TRACES.glob("kineto/*/*.json.gz")))


def test_one_rank_is_not_measured_by_process(four_ranks: Trace) -> None:
    with pytest.raises(ValueError, match="every process"):
        analyze_by_process(ByProcess.of(four_ranks), scope=replace(STEADY, rank=1))
