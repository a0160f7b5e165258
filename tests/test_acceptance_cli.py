"""Acceptance from the unprofiled run, as a user types it: ``nsysmoe steps`` on logs alone and
``nsysmoe analyze off.sqlite on.sqlite --logs off.log on.log`` — the accepted verdict first, the
profiling overhead and how much of the change the profile explains, checked against figures
computed here from the log lines and the JSON (plain ``re`` and ``statistics``)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysmoe import api
from nsysmoe.api import example_paths
from nsysmoe.cli import cli
from nsysmoe.errors import NsysmoeError
from tests.conftest import require_shared_logs

OFF, ON = (str(p) for p in example_paths())
OFF_LOG, ON_LOG = (str(p) for p in example_paths("logs"))
STEP_MS = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration \(ms\): ([\d.]+)")


def run(*args: str, code: int = 0) -> tuple[str, str]:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code == code, r.output + r.stderr
    return r.stdout, r.stderr


def logged_steps(path: str) -> dict[int, float]:
    """Iteration -> step seconds, read here with a plain regex (independent of the reader)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if m := STEP_MS.search(line):
            out[int(m.group(1))] = float(m.group(2)) / 1e3
    return out


def test_examples_lists_the_logs() -> None:
    out, _ = run("examples", "--logs")
    assert out.split() == [OFF_LOG, ON_LOG]


def test_steps_ab_on_the_example_logs_states_the_window_and_verdict() -> None:
    out, _ = run("steps", OFF_LOG, ON_LOG, "--format", "json")
    doc = json.loads(out)
    assert doc["schema"] == "nsysmoe.acceptance" and doc["version"] == 1
    off, on = doc["sides"]
    for side, path in ((off, OFF_LOG), (on, ON_LOG)):
        steps = logged_steps(path)
        kept = [steps[i] for i in range(side["window"]["first"], side["window"]["last"] + 1)]
        assert side["window"]["steps"] == side["window"]["samples"] == len(kept)
        assert side["window"]["first"] == 3  # iterations 1 and 2 are the logs' warm-up
        said = re.search(r"steady median ([\d.]+) ms", side["window"]["description"])
        assert said and float(said.group(1)) == pytest.approx(  # of the second half, in ms
            1e3 * statistics.median(list(steps.values())[30:]), abs=5e-4)
        assert side["median_step_s"] == pytest.approx(statistics.median(kept), rel=1e-12)
        assert side["mean_step_s"] == pytest.approx(statistics.fmean(kept), rel=1e-12)
        low, high = side["ci95_mean_step_s"]
        assert low < side["mean_step_s"] < high
    (change,) = doc["changes"]
    expected = 100 * (on["median_step_s"] / off["median_step_s"] - 1)
    assert change["median_step_pct"] == pytest.approx(expected, rel=1e-12)
    assert change["verdict"] == "accepted improvement"
    assert change["vs_base"]["median_step_pct"] == change["median_step_pct"]


def test_analyze_with_logs_puts_the_accepted_verdict_first() -> None:
    out, _ = run("analyze", OFF, ON, "--logs", OFF_LOG, ON_LOG)
    first = out.splitlines()[0]
    want = "Accepted (unprofiled, iterations 3–60, 58 steps): improvement"
    assert first.startswith(want), out[:400]
    head = "\n".join(out.splitlines()[:8])
    assert "explains" in head and "overhead" in head, head


def test_analyze_with_logs_json_overhead_and_explains_are_the_definitions() -> None:
    out, _ = run("analyze", OFF, ON, "--logs", OFF_LOG, ON_LOG, "--format", "json")
    doc = json.loads(out)
    acc = doc["acceptance"]
    prof = acc["profile"]
    steps = [t["iterations"] for t in (doc["off"], doc["on"])]
    for i, side in enumerate(acc["sides"]):  # the profiled steady median over the unprofiled
        profiled_s = statistics.median(r["step_ns"] for r in steps[i]) / 1e9
        assert prof["overhead_pct"][i] == pytest.approx(
            100 * (profiled_s / side["median_step_s"] - 1), abs=0.05)
    sc = doc["step_change"]
    off_step_ns = statistics.median(r["step_ns"] for r in steps[0])
    predicted = 100 * (sc["exposed_delta_ns"] + sc["compute_delta_ns"]) / off_step_ns
    assert prof["predicted_pct"] == pytest.approx(predicted, abs=0.05)
    accepted = acc["changes"][0]["median_step_pct"]
    assert prof["explains_pct"] == pytest.approx(100 * predicted / accepted, abs=0.5)
    own = 100 * sc["step_delta_ns"] / off_step_ns  # the profile's own step change, said beside
    assert prof["sentence"] == (f"the profile explains {prof['explains_pct']:.0f} % of the "
                                f"accepted {accepted:+.1f} % (its own step change: {own:+.1f} %)")
    assert prof["overhead_warning"] is None  # ~5 % on both sides


def test_fail_if_on_the_accepted_change() -> None:
    run("analyze", OFF, ON, "--logs", OFF_LOG, ON_LOG, "--fail-if", "accepted_step_delta_pct>-2",
        "--fail-if", "nan_iterations>0", "--format", "json")  # -6 %: passes
    _, err = run("steps", OFF_LOG, ON_LOG, "--fail-if", "accepted_step_delta_pct>-10", code=1)
    assert "accepted_step_delta_pct" in err


def first_iterations(path: str, last: int, out: Path) -> str:
    """``path`` cut after iteration ``last`` (a run shorter than the seeds' 50: a screen)."""
    kept = [line for line in Path(path).read_text().splitlines()
            if not (m := re.search(r"iteration\s+(\d+)/", line)) or int(m.group(1)) <= last]
    out.write_text("\n".join(kept) + "\n")
    return str(out)


def test_fail_if_accepted_keys_fail_unless_the_change_was_accepted(tmp_path: Path) -> None:
    """A screened change (a 30-iteration run) has its figure in step_delta_pct, but none in
    accepted_step_delta_pct & co.: a gate on them fails (CI must not pass on a number that was
    not accepted); ``accepted`` says which."""
    off, on = (first_iterations(p, 30, tmp_path / Path(p).name) for p in (OFF_LOG, ON_LOG))
    out, _ = run("steps", off, on, "--format", "json")
    (change,) = json.loads(out)["changes"]
    assert change["verdict"] == "screened improvement" and change["median_step_pct"] < -2
    for key in ("accepted_step_delta_pct>-2", "accepted_step_ci95_high_pct>=0",
                "accepted_step_ci95_low_pct>0", "accepted_tflops_delta_pct<0", "accepted<1"):
        _, err = run("steps", off, on, "--fail-if", key, code=1)
        assert key in err, err
    _, err = run("steps", off, on, "--fail-if", "step_delta_pct<-2", code=1)
    assert "(value -6." in err, err  # the screened figure is there, under its own key
    run("steps", off, on, "--fail-if", "step_delta_pct>-2", "--fail-if", "accepted>0")
    run("steps", OFF_LOG, ON_LOG, "--fail-if", "accepted<1", "--fail-if", "step_delta_pct>-2",
        "--fail-if", "accepted_step_ci95_high_pct>=0")  # accepted -6 %: passes


def test_a_screened_change_is_called_screened_in_the_profile_sentence(tmp_path: Path) -> None:
    off, on = (first_iterations(p, 30, tmp_path / Path(p).name) for p in (OFF_LOG, ON_LOG))
    out, _ = run("analyze", OFF, ON, "--logs", off, on, "--format", "json")
    acc = json.loads(out)["acceptance"]
    change = acc["changes"][0]
    assert change["verdict"] == "screened improvement"
    sentence = acc["profile"]["sentence"]
    assert f"of the screened {change['median_step_pct']:+.1f} %" in sentence, sentence
    assert "accepted" not in sentence, sentence


def test_fail_if_no_measurable_change_has_no_accepted_figure() -> None:
    base = require_shared_logs() / "megatron-ci" / "dp-last-cp2"
    logs = [str(base / side / "golden_values.json") for side in ("off", "on")]
    out, _ = run("steps", *logs, "--format", "json")
    (change,) = json.loads(out)["changes"]
    assert change["verdict"] == "no measurable change"
    _, err = run("steps", *logs, "--fail-if", "accepted_step_delta_pct>5", code=1)
    assert "no value" in err
    run("steps", *logs, "--fail-if", "step_delta_pct>5")  # -0.7 %: passes


@pytest.mark.parametrize(("args", "needle"), [
    (["analyze", OFF, "--logs", OFF_LOG, ON_LOG], "--logs"),
    (["steps", OFF_LOG, ON_LOG, "--labels", "a,b,c"], "3 labels for 2 logs"),
    (["steps", OFF_LOG, "-o", OFF_LOG], "is the input"),
    (["steps", OFF_LOG, "--loss-tolerance", "0.1"], "--equivalent"),
    (["steps", OFF_LOG, "--log-window", "9-3"], "LAST must be"),
    (["analyze", OFF, ON, "--log-window", "3-9"], "add --logs"),
    (["analyze", OFF, ON, "--equivalent"], "add --logs"),
    (["analyze", OFF, ON, "--loss-tolerance", "0.1"], "add --logs"),
    (["analyze", OFF, ON, "--logs", OFF_LOG, ON_LOG, "--loss-tolerance", "0.1"], "--equivalent"),
    (["analyze", OFF, "--logs", OFF_LOG, ON_LOG, "--equivalent", "--loss-tolerance", "0.1"],
     "--logs, --equivalent, --loss-tolerance: training logs accept an A/B"),
    (["steps", OFF_LOG, ON_LOG, "--labels", "a"], "1 label for 2 logs"),
])  # fmt: skip
def test_usage_errors_are_one_line(args: list[str], needle: str) -> None:
    r = subprocess.run([sys.executable, "-m", "nsysmoe", *args], capture_output=True, text=True,
                       check=False)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


LM_LOSS = re.compile(r"iteration\s+(\d+)/.*\| lm loss: ([0-9.E+-]+) \|")


@pytest.mark.parametrize("tolerance", [0.0005, 0.001])
def test_analyze_loss_tolerance_reaches_the_acceptance(tolerance: float) -> None:
    """--loss-tolerance on analyze --logs: the tolerance the loss difference is flagged above
    (flagged here as a plain parse of the logs' lm loss over the windows says)."""
    out, _ = run("analyze", OFF, ON, "--logs", OFF_LOG, ON_LOG, "--equivalent",
                 "--loss-tolerance", str(tolerance), "--format", "json")  # fmt: skip
    acc = json.loads(out)["acceptance"]
    assert acc["loss_tolerance"] == tolerance and acc["equivalent"] is True
    off, on = ({int(m.group(1)): float(m.group(2)) for m in map(LM_LOSS.search,
               Path(p).read_text().splitlines()) if m} for p in (OFF_LOG, ON_LOG))  # fmt: skip
    first = max(s["window"]["first"] for s in acc["sides"])
    last = min(s["window"]["last"] for s in acc["sides"])
    common = range(first, last + 1)
    change = acc["changes"][0]
    assert change["max_loss_diff"] == pytest.approx(max(abs(on[i] - off[i]) for i in common))
    assert change["loss_flagged"] == any(abs(on[i] - off[i]) > tolerance * abs(off[i])
                                         for i in common)  # fmt: skip
    assert change["loss_flagged"] == (tolerance == 0.0005)  # max relative: 0.069 %


def test_api_refuses_three_logs_for_an_ab_and_a_string_of_labels(tmp_path: Path) -> None:
    """Before any trace is read (the traces here do not exist): compare takes two logs; a
    string of labels is refused, not split into characters."""
    missing = str(tmp_path / "missing.sqlite")
    with pytest.raises(NsysmoeError, match=r"^logs: 3 training logs given; an A/B takes two"):
        api.compare(missing, missing, logs=(OFF_LOG, ON_LOG, ON_LOG))  # type: ignore[arg-type]
    with pytest.raises(NsysmoeError, match=r"^logs: 1 training log given"):
        api.compare(missing, missing, logs=OFF_LOG)  # type: ignore[arg-type]
    with pytest.raises(NsysmoeError, match=r"^labels: a list of names"):
        api.accept([OFF_LOG, ON_LOG], labels="ab")
    with pytest.raises(NsysmoeError, match=r"^logs: a list of training logs"):
        api.accept(OFF_LOG)
    with pytest.raises(NsysmoeError, match=r"^1 label for 2 logs"):
        api.accept([OFF_LOG, ON_LOG], labels=["a"])


def test_ladder_of_three_shared_logs() -> None:
    base = require_shared_logs() / "megatron-ci"
    logs = [str(base / pair / side / "golden_values.json")
            for pair, side in (("muon-vs-adam-ep8", "off"), ("muon-vs-adam-ep8", "on"),
                               ("dp-last-cp2", "on"))]  # fmt: skip
    out, _ = run("steps", *logs, "--labels", "adam,muon,dp-last", "--format", "json")
    doc = json.loads(out)
    assert [s["label"] for s in doc["sides"]] == ["adam", "muon", "dp-last"]
    assert [(c["base"], c["to"]) for c in doc["changes"]] == [(0, 1), (1, 2)]
    assert [(c["vs_base"]["base"], c["vs_base"]["to"]) for c in doc["changes"]] == [(0, 1),
                                                                                  (0, 2)]
    med = [s["median_step_s"] for s in doc["sides"]]
    assert doc["changes"][1]["vs_base"]["median_step_pct"] == pytest.approx(
        100 * (med[2] / med[0] - 1), rel=1e-12)


def test_a_cached_report_is_keyed_on_the_logs_content(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """--cache serves a report again only for the same logs: a log edited in place (same path,
    same options) gives a new report, never the stored one."""
    monkeypatch.setenv("NSYSMOE_CACHE_DIR", str(tmp_path / "cache"))
    off_log, on_log = tmp_path / "off.log", tmp_path / "on.log"
    off_log.write_bytes(Path(OFF_LOG).read_bytes())
    on_log.write_bytes(Path(ON_LOG).read_bytes())
    args = ("analyze", OFF, ON, "--logs", str(off_log), str(on_log), "--cache", "--format",
            "json")  # fmt: skip
    first = json.loads(run(*args)[0])["acceptance"]["changes"][0]["median_step_pct"]
    assert json.loads(run(*args)[0])["acceptance"]["changes"][0]["median_step_pct"] == first
    slower = re.sub(r"\(ms\): 9[01]\.", "(ms): 99.", on_log.read_text())  # on: now slower
    on_log.write_text(slower)
    again = json.loads(run(*args)[0])["acceptance"]["changes"][0]["median_step_pct"]
    assert again > 0 > first


def test_example_logs_regenerate_identically(tmp_path: Path) -> None:
    """The shipped logs are what tests/fixtures/example_logs.py writes (synthetic, said in
    their first line)."""
    from tests.fixtures.example_logs import build_example_logs

    for new, shipped in zip(build_example_logs(tmp_path), (OFF_LOG, ON_LOG), strict=True):
        assert new.read_bytes() == Path(shipped).read_bytes()
        assert new.read_text().startswith("# synthetic example log for nsysmoe (not measured)")


def test_a_profile_faster_than_its_log_is_warned(tmp_path: Path) -> None:
    """A profiler slows a run: a profiled steady step 80 % under the log's median means the
    log is of another run, said in the overhead warning (independent: the JSON's own figures)."""
    slow = tmp_path / "slow.log"
    slow.write_text(re.sub(r"\(ms\): (\d+)\.", lambda m: f"(ms): {int(m.group(1)) * 5}.",
                           Path(ON_LOG).read_text()))  # fmt: skip
    out, _ = run("analyze", OFF, ON, "--logs", OFF_LOG, str(slow), "--format", "json")
    prof = json.loads(out)["acceptance"]["profile"]
    assert prof["overhead_pct"][1] < -75 and prof["overhead_pct"][0] > 0
    assert "overlap on is more than 5 % faster than its unprofiled log" in prof["overhead_warning"]


@pytest.mark.parametrize("value", ["nan", "inf", "-0.1", "0", "x"])
def test_loss_tolerance_must_be_a_positive_number(value: str) -> None:
    r = subprocess.run([sys.executable, "-m", "nsysmoe", "steps", OFF_LOG, ON_LOG, "--equivalent",
                        "--loss-tolerance", value], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "give a positive number" in r.stderr, r.stderr


def test_the_help_states_the_loss_tolerance_in_force() -> None:
    """--help cannot import the measure (no polars for --help): its default is checked here."""
    from nsysmoe import cli_types
    from nsysmoe.measure.acceptance import LOSS_TOLERANCE

    assert f"[{LOSS_TOLERANCE:g}]" in cli_types.LOSS_TOLERANCE_HELP
