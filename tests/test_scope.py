"""The scope of the API (issue 32, points 1-2): one default window everywhere — the library
measures what the CLI does — and ``window=`` replaces only the scope's window (the rank, the step
pattern, NVTX naming and phases stay), on the shipped examples and a two-process export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import nsysmoe
from nsysmoe import pipeline
from nsysmoe.api import analyze
from nsysmoe.cli import cli
from nsysmoe.model import Scope, Window
from tests.fixtures.generate import moe_step_scenario, write_export

PHASE = r"^iteration"  # the iteration ranges as phases too: rows the default scope lacks
STEP = r"^iteration (\d+)$"  # the iterations the default pattern finds, by another pattern


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """A 2-process export (one GPU each) and its pids, sorted."""
    spec, truth = moe_step_scenario(dispatcher="hybridep", overlap=True, steps=8, n_processes=2,
                                    seed=3)  # fmt: skip
    path = write_export(tmp_path_factory.mktemp("scope") / "two.sqlite", spec, "3.13.2")
    return path, sorted(g["pid"] for g in truth["gpus"])


def test_window_keeps_the_rank_and_the_naming(two_processes, monkeypatch) -> None:
    """Every field of the scope but its window reaches the pipeline: the rank (its GPUs only),
    the phases (rows a scope without them lacks), the step pattern and the NVTX naming (the
    scope each stage is given)."""
    path, pids = two_processes
    window = Window(0, 400_000_000, relative=True)
    seen: list[Scope] = []
    for name in ("prepare_with_steps", "analyze_trace"):
        real = getattr(pipeline, name)

        def spy(*args, _real=real, **kwargs):  # noqa: ANN002, ANN003, ANN202
            seen.append(kwargs["scope"] if "scope" in kwargs else args[-1])
            return _real(*args, **kwargs)

        monkeypatch.setattr(pipeline, name, spy)
    scope = Scope(rank=1, raw_nvtx=True, phase=PHASE, step_pattern=STEP)
    got = analyze(path, window=window, scope=scope)
    assert len(seen) == 2 and all(
        (s.window, s.rank, s.raw_nvtx, s.phase, s.step_pattern) == (window, 1, True, PHASE, STEP)
        for s in seen)  # fmt: skip
    assert got.gpus["pid"].to_list() == [pids[1]]  # rank 1 only, as the scope says
    monkeypatch.undo()
    plain = analyze(path, window=window, scope=Scope(rank=1))
    assert got.window == plain.window and not got.phases.equals(plain.phases)
    extra = set(got.phases["phase"]) - set(plain.phases["phase"])
    assert extra and all(p.startswith("iteration ") for p in extra), extra
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
