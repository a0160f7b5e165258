"""Under ``--rank R`` every text output says which rank and process it shows, and the result
records it (issue 32 point 6); without ``--rank`` nothing is said and the record is null."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysmoe.cli import cli
from tests.fixtures.generate import moe_step_scenario, write_export


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two 3-process exports (off, on) whose pids differ."""
    out = tmp_path_factory.mktemp("rank-shown")
    paths = []
    for overlap, seed in ((False, 3), (True, 4)):
        spec, _ = moe_step_scenario(dispatcher="hybridep", overlap=overlap, steps=4,
                                    n_processes=3, seed=seed)  # fmt: skip
        paths.append(write_export(out / f"overlap-{overlap}.sqlite", spec, "3.13.2"))
    return paths


def pids(path: Path) -> list[int]:
    """The processes that ran kernels, by sorted pid, read apart from nsysmoe."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT DISTINCT (globalPid >> 24) & 16777215 FROM "
                            "CUPTI_ACTIVITY_KIND_KERNEL").fetchall()  # fmt: skip
    return sorted(r[0] for r in rows)


def run(*args: str) -> str:
    out = CliRunner().invoke(cli, ["analyze", *args], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return out.output


def test_one_trace_says_and_records_its_rank(pair: list[Path]) -> None:
    path = str(pair[0])
    pid = pids(pair[0])[1]
    said = f"rank 1 only (pid {pid})"
    for fmt in ("terminal", "markdown", "html"):
        text = run(path, "--rank", "1", "--format", fmt)
        assert said in text, fmt
        assert text.index(said) < text.index("exposed communication"), fmt  # before any figure
    assert json.loads(run(path, "--rank", "1", "--format", "json"))["traces"][0]["rank"] == {
        "rank": 1, "pid": pid}  # fmt: skip
    by_pid = json.loads(run(path, "--rank", str(pid), "--format", "json"))["traces"][0]
    assert by_pid["rank"] == {"rank": pid, "pid": pid}
    assert json.loads(run(path, "--format", "json"))["traces"][0]["rank"] is None
    assert "only (pid" not in run(path) and "rank 1 only" not in run(path, "--format", "markdown")


@pytest.mark.parametrize("shared", [False, True])
def test_an_ab_says_each_sides_process(pair: list[Path], shared: bool) -> None:
    """The generated pair (equal pids), and the shared nsysai pair, whose pids differ."""
    if shared:
        from tests.conftest import require_shared

        nsys = require_shared() / "nsys"
        pair = [nsys / "nsysai-2gpu-before.sqlite", nsys / "nsysai-2gpu-after.sqlite"]
    off, on = (str(p) for p in pair)
    p_off, p_on = pids(pair[0])[1], pids(pair[1])[1]
    names = ("before", "after") if shared else ("overlap off", "overlap on")
    said = f"rank 1 only: {names[0]} pid {p_off}, {names[1]} pid {p_on}"
    for fmt in ("terminal", "markdown", "html"):
        text = run(off, on, "--rank", "1", "--format", fmt)
        assert said in " ".join(text.split()), fmt
    data = json.loads(run(off, on, "--rank", "1", "--format", "json"))
    assert (data["off"]["rank"], data["on"]["rank"]) == ({"rank": 1, "pid": p_off},
                                                         {"rank": 1, "pid": p_on})  # fmt: skip
    text = " ".join(run(off, on, "--rank", "1").split())
    assert "metric (rank 1)" in text
    # the headline's title names the rank, not "all GPUs"
    assert f"{names[0]} vs {names[1].split()[-1] if not shared else names[1]}, rank 1, " in text
    assert shared is (p_off != p_on)
