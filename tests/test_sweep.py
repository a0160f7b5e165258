"""``nsysmoe sweep`` (issue 38): settings of one knob side by side, on exports the fixture
generator writes with the dispatcher's SM count as their only difference (its kernels launch
that many blocks; GEMM and attention overlapped with them lose those SMs) — each setting's SMs
exactly, the best step the generator's own step ranges say is best, and the contract broken by a
second variable nobody declared."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import nsysmoe
from nsysmoe.errors import UsageError
from nsysmoe.gate import values
from tests.fixtures.generate import write_export
from tests.fixtures.scenarios import moe_step_scenario

SMS = (8, 20, 48)
KNOB = "moe_deepep_num_sms"


def generated(folder: Path, sms: int, **changes: object) -> tuple[Path, int]:
    """An export of DeepEP with EP overlap, its dispatcher on ``sms`` SMs, and the median of its
    step ranges (the generator's truth: CPU-side ``iteration N`` ranges, warm-up left out)."""
    args = {"dispatcher": "deepep", "overlap": True, "steps": 8, "seed": 7} | changes
    spec, truth = moe_step_scenario(**args, dispatcher_sms=sms, label=f"sms{sms}")  # type: ignore[arg-type]
    path = write_export(folder / f"sms{sms}{'-other' if changes else ''}.sqlite", spec, "3.13.2")
    steps = [s["end"] - s["start"] for s in truth["steps"]][2:]
    return path, int(statistics.median(steps))


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, int]]:
    folder = tmp_path_factory.mktemp("sweep")
    return [generated(folder, sms) for sms in SMS]


def test_each_setting_holds_its_sms_and_the_truths_best_is_marked(settings: list) -> None:
    paths = [p for p, _ in settings]
    truth_best = min(range(len(SMS)), key=lambda i: settings[i][1])
    s = nsysmoe.sweep(paths, vary=KNOB)
    assert s.matched, [c.summary() for c in s.contracts]
    assert [d["ep.dispatch"] for d in s.sms_held] == list(SMS)
    assert [d["ep.combine"] for d in s.sms_held] == list(SMS)
    assert s.best == truth_best == 1  # the generator's trade-off: 20 SMs beats 8 and 48
    assert s.labels == tuple(f"{KNOB}={n}" for n in SMS)
    doc = json.loads(nsysmoe.render(s, "json"))
    assert (doc["schema"], doc["version"], doc["matched"]) == ("nsysmoe.sweep", 1, True)
    rows = doc["settings"]
    assert [r["best"] for r in rows] == [i == truth_best for i in range(len(SMS))]
    assert [r["sms_held"]["ep.dispatch"] for r in rows] == list(SMS)
    assert all(r["median_step_ns"] > 0 and r["label"] for r in rows)
    assert rows[0]["vs_base"] is None and rows[1]["vs_base"]["median_step_pct"] < 0
    assert rows[1]["contract"]["matched"] is True
    checks = {c["check"]: c["role"] for c in rows[2]["contract"]["checks"]}
    assert checks["ep.dispatch blocks"] == "variable" and checks[KNOB] == "variable"
    gate = values(s)
    assert gate["matched"] == 1.0 and gate["max_dispatcher_sms_held"] == 48.0
    assert gate["best_vs_base_pct"] is not None and gate["best_vs_base_pct"] < 0


def test_a_second_variable_nobody_declared_breaks_the_contract(settings: list,
                                                               tmp_path: Path) -> None:  # fmt: skip
    other, _ = generated(tmp_path, 48, microbatches=3)  # more microbatches: more kernels
    s = nsysmoe.sweep([settings[0][0], settings[1][0], other], vary=KNOB)
    assert not s.matched
    assert s.contracts[0].matched and not s.contracts[1].matched
    text = nsysmoe.render(s, "terminal")
    assert "WARNING: contract NOT matched" in text
    run = _cli([str(settings[0][0]), str(settings[1][0]), str(other), "--vary", KNOB, "--strict"])
    assert run.returncode == 2 and "--strict: measurement contract" in run.stderr


def test_the_cli_writes_every_format_and_gates(settings: list, tmp_path: Path) -> None:
    paths = [str(p) for p, _ in settings]
    run = _cli([*paths, "--vary", KNOB, "--fail-if", "matched==0", "--plot", str(tmp_path)])
    assert run.returncode == 0, run.stderr
    assert "20 (best)" in run.stdout and "20/20" in run.stdout
    assert (tmp_path / "sweep.svg").is_file()
    page = _cli([*paths, "--vary", KNOB, "--format", "html"])
    assert page.returncode == 0 and "<svg" in page.stdout and "nsysmoe sweep" in page.stdout
    fails = _cli([*paths, "--vary", KNOB, "--fail-if", "best_step_ns>1"])
    assert fails.returncode == 1 and "--fail-if" in fails.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["a.sqlite", "b.sqlite", "--vary", KNOB], "a sweep takes 3 settings or more"),
    (["a", "b", "c"], "Missing option '--vary'"),
])  # fmt: skip
def test_bad_command_lines_are_one_line(args: list[str], said: str, settings: list) -> None:
    if args[0] == "a.sqlite":
        args = [str(settings[0][0]), str(settings[1][0]), *args[2:]]
    run = _cli(args)
    assert run.returncode == 2 and said in run.stderr and len(run.stderr.splitlines()) == 1


def test_labels_must_name_every_setting(settings: list) -> None:
    with pytest.raises(UsageError, match="--labels: 2 names for 3 settings"):
        nsysmoe.sweep([p for p, _ in settings], vary=KNOB, labels=("a", "b"))


def _cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``nsysmoe sweep ARGS``, its report 120 columns wide (the table's cells unwrapped)."""
    return subprocess.run([sys.executable, "-m", "nsysmoe", "sweep", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "COLUMNS": "120"})  # fmt: skip


def test_settings_named_by_file_get_the_shortest_tails_that_differ() -> None:
    from nsysmoe.ab.sweep import distinct_names

    assert distinct_names(["runs/a/profile.sqlite", "runs/b/profile.sqlite",
                           "runs/c/profile.sqlite"]) == ("a/profile.sqlite", "b/profile.sqlite",
                                                          "c/profile.sqlite")  # fmt: skip
    assert distinct_names(["x/a.sqlite", "y/b.sqlite", "c.sqlite"]) == ("a.sqlite", "b.sqlite",
                                                                        "c.sqlite")  # fmt: skip
    assert distinct_names(["a.sqlite", "a.sqlite", "b.sqlite"])[0] == "1: a.sqlite"


# --- a setting as a run of many rank files (a folder) ----------------------------------------

RANK_SEEDS = (7, 11)


def generated_run(folder: Path, sms: int, seeds: tuple[int, ...] = RANK_SEEDS,
                  **changes: object) -> tuple[Path, int]:  # fmt: skip
    """A folder of one rank file per seed, the dispatcher on ``sms`` SMs, and the generator's
    truth of the run's median step: each iteration's median over its ranks (CPU-side ranges,
    warm-up left out), then the median over iterations."""
    run = folder / f"sms{sms}"
    run.mkdir()
    per_rank = []
    for rank, seed in enumerate(seeds):
        args = {"dispatcher": "deepep", "overlap": True, "steps": 8, "seed": seed}
        args |= changes if rank == len(seeds) - 1 else {}  # a change on the last rank only
        spec, truth = moe_step_scenario(**args, dispatcher_sms=sms, label=f"sms{sms}")  # type: ignore[arg-type]
        write_export(run / f"rank{rank}.sqlite", spec, "3.13.2")
        per_rank.append([s["end"] - s["start"] for s in truth["steps"]][2:])
    return run, int(statistics.median(statistics.median(steps)
                                      for steps in zip(*per_rank, strict=True)))  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, int]]:
    folder = tmp_path_factory.mktemp("sweep-runs")
    return [generated_run(folder, sms) for sms in SMS]


def test_folders_of_rank_files_are_settings_their_ranks_taken_together(runs: list) -> None:
    folders = [p for p, _ in runs]
    s = nsysmoe.sweep([sorted(map(str, p.iterdir())) for p in folders], vary=KNOB)
    assert s.matched, [c.summary() for c in s.contracts]
    assert [d["ep.dispatch"] for d in s.sms_held] == list(SMS)
    assert s.best == min(range(len(SMS)), key=lambda i: runs[i][1]) == 1
    assert s.settings["files"].to_list() == [2, 2, 2]
    assert s.settings["path"].to_list() == [str(p) for p in folders]
    assert [c.name for c in s.contracts[0].checks[:3]] == [
        "rank files", f"{KNOB} across rank files", "dispatcher blocks across rank files"]
    assert "2 of 2 pairs" in s.contracts[0].note
    # the run's figures from each rank file's own analysis: an iteration's step is the median
    # of its ranks' over the iterations both hold; durations summed, per iteration per GPU
    for i, folder in enumerate(folders):
        ranks = [nsysmoe.analyze(str(f)) for f in sorted(folder.iterdir())]
        steps = ranks[0].iterations.select("step", "step_ns").join(
            ranks[1].iterations.select("step", "step_ns"), on="step")  # fmt: skip
        slowest = [int(statistics.median((a, b))) for a, b in
                   zip(steps["step_ns"], steps["step_ns_right"], strict=True)]  # fmt: skip
        row = s.settings.row(i, named=True)
        assert row["median_step_ns"] == int(statistics.median(slowest))
        assert row["iterations"] == len(slowest) and row["gpus"] == 2
        n = sum(len(a.iterations) * len(a.gpus) for a in ranks)
        assert row["exposed_ns"] == pytest.approx(sum(a.totals.exposed_ns for a in ranks) / n)
        hidden = sum(a.totals.hidden_ns for a in ranks)
        assert row["hidden_pct"] == pytest.approx(
            100 * hidden / sum(a.totals.comm_ns for a in ranks))  # fmt: skip
    doc = json.loads(nsysmoe.render(s, "json"))
    assert [t["setting"] for t in doc["traces"]] == [0, 0, 1, 1, 2, 2]
    run = _cli([*map(str, folders), "--vary", KNOB, "--format", "markdown"])
    assert run.returncode == 0, run.stderr
    assert f"{folders[0]} (2 rank files;" in run.stdout and "| 20 (best) |" in run.stdout
    glob = _cli([str(folders[0]), str(folders[1]), str(folders[2] / "rank*.sqlite"), "--vary",
                 KNOB, "--format", "json"])  # a glob stays the setting's name  # fmt: skip
    assert json.loads(glob.stdout)["settings"][2]["path"] == str(folders[2] / "rank*.sqlite")


def test_a_rank_that_differs_or_a_rank_missing_breaks_a_runs_contract(
    runs: list, tmp_path: Path
) -> None:
    other, _ = generated_run(tmp_path, 48, microbatches=3)  # its second rank only
    s = nsysmoe.sweep([[str(f) for f in sorted(p.iterdir())] for p in
                       (runs[0][0], runs[1][0], other)], vary=KNOB)  # fmt: skip
    assert s.contracts[0].matched and not s.contracts[1].matched
    assert "rank pair 1: rank1.sqlite vs rank1.sqlite" in s.contracts[1].summary()
    assert "1 of 2 pairs matched" in s.contracts[1].note
    fewer = [str(runs[0][0] / "rank0.sqlite")]
    s = nsysmoe.sweep([sorted(map(str, runs[0][0].iterdir())), sorted(map(str,
                       runs[1][0].iterdir())), fewer], vary=KNOB)  # fmt: skip
    assert s.contracts[0].matched and not s.contracts[1].matched
    assert s.contracts[1].summary().startswith("NOT matched: rank files differs (paired the "
                                               "first 1 by sorted name)")  # fmt: skip
    run = _cli([str(runs[0][0]), str(runs[1][0]), str(other), "--vary", KNOB, "--strict"])
    assert run.returncode == 2 and "rank pair 1" in run.stderr


def test_a_run_whose_ranks_differ_in_the_knob_is_no_setting(runs: list) -> None:
    """One setting's rank files on two SM counts (20 and 48): each pair with the base differs
    only in the knob, but the setting is not one value of it."""
    mixed = [str(runs[1][0] / "rank0.sqlite"), str(runs[2][0] / "rank1.sqlite")]
    s = nsysmoe.sweep([str(runs[0][0]), str(runs[1][0]), mixed], vary=KNOB)
    assert s.contracts[0].matched and not s.contracts[1].matched
    broken = {c.name: (c.off, c.on) for c in s.contracts[1].failures}
    assert broken["dispatcher blocks across rank files"] == ("8", "20 / 48")


def test_one_run_as_files_or_as_one_export_has_one_step(tmp_path: Path) -> None:
    """A run of four ranks written as one export of four processes and as a file per rank: the
    step a sweep takes of each is the same, iteration by iteration. (This scenario runs its
    ranks in lockstep, every rank's period equal, so it does not tell a median from a maximum:
    the folder test above does, from ranks whose periods differ.)"""
    from nsysmoe.ab.sweep import _steps, detached_side
    from tests.fixtures.ranks import straggler_scenario

    (multi,), _ = straggler_scenario(n_ranks=4, steps=6, layout="multi", seed=3)
    files, _ = straggler_scenario(n_ranks=4, steps=6, layout="files", seed=3)
    one = _steps([detached_side(nsysmoe.analyze(write_export(tmp_path / "all.sqlite", multi,
                                                             "3.13.2")))])  # fmt: skip
    split = _steps([detached_side(nsysmoe.analyze(write_export(tmp_path / f"r{i}.sqlite", spec,
                                                               "3.13.2")))
                    for i, spec in enumerate(files)])  # fmt: skip
    both = one.join(split, on="step")
    assert len(both) >= 3 and both["step_ns"].to_list() == both["step_ns_right"].to_list()


def test_api_settings_take_folders_lists_and_refuse_a_file_twice(runs: list) -> None:
    folders = [str(p) for p, _ in runs]
    s = nsysmoe.sweep(folders, vary=KNOB)  # folders as strings, as the command line gives them
    assert s.settings["files"].to_list() == [2, 2, 2] and s.settings["path"].to_list() == folders
    twice = [str(runs[2][0] / "rank0.sqlite")] * 2
    with pytest.raises(UsageError, match="given twice"):
        nsysmoe.sweep([folders[0], folders[1], twice], vary=KNOB)
