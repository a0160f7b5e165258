"""The scope of the API (issue 32, points 1-2): one default window everywhere — the library
measures what the CLI does — and ``window=`` replaces only the scope's window (the rank, the step
pattern, NVTX naming and phases stay), on the shipped examples and a two-process export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import nsysmoe
from nsysmoe.api import analyze
from nsysmoe.cli import cli
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


def test_the_library_and_the_cli_measure_the_same_iterations(two_processes) -> None:
    """``nsysmoe.analyze(p)`` and ``nsysmoe analyze p --format json``: the same window, the
    same iterations (the steady ones: the detected warm-up skipped), the same numbers."""
    for path in (*nsysmoe.example_paths(), two_processes[0]):
        lib = json.loads(nsysmoe.render(nsysmoe.analyze(path), "json"))["traces"][0]
        got = CliRunner().invoke(cli, ["analyze", str(path), "--format", "json"])
        assert got.exit_code == 0, got.output
        cmd = json.loads(got.output)["traces"][0]
        assert lib["window"] == cmd["window"] and lib["window"]["kind"] == "iterations"
        assert [i["step"] for i in lib["iterations"]] == [i["step"] for i in cmd["iterations"]]
        assert lib["window"]["skipped"] >= 1 and lib["gpus"] == cmd["gpus"]
