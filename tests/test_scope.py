"""The scope of the API (issue 32, points 1-2): ``window=`` replaces only the scope's window —
the rank, the step pattern, NVTX naming and phases stay — on a two-process export."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysmoe.api import analyze
from nsysmoe.model import Scope, Window
from tests.fixtures.generate import moe_step_scenario, write_export

PHASE = r"^moe_dispatch"


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """A 2-process export (one GPU each) and its pids, sorted."""
    spec, truth = moe_step_scenario(dispatcher="hybridep", overlap=True, steps=8, n_processes=2,
                                    seed=3)  # fmt: skip
    path = write_export(tmp_path_factory.mktemp("scope") / "two.sqlite", spec, "3.13.2")
    return path, sorted(g["pid"] for g in truth["gpus"])


def test_window_keeps_the_rank_and_the_naming(two_processes) -> None:
    path, pids = two_processes
    window = Window(0, 400_000_000, relative=True)
    scope = Scope(rank=1, raw_nvtx=True, phase=PHASE)
    got = analyze(path, window=window, scope=scope)
    assert got.gpus["pid"].to_list() == [pids[1]]  # rank 1 only, as the scope says
    want = analyze(path, scope=Scope(window=window, rank=1, raw_nvtx=True, phase=PHASE))
    assert got.gpus.equals(want.gpus) and got.nvtx.equals(want.nvtx)
    assert got.phases.equals(want.phases) and got.window == want.window
    both = analyze(path, window=window)
    assert sorted(both.gpus["pid"].to_list()) == pids
