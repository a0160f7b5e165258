"""Training logs with absurd numbers (found by fuzzing, issue 33): each is a counted skip (a
note) or one line (NsysmoeError, exit 2), never a traceback, and no absurd number reaches the
table. Each file is written here; the expected values are worked out by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe.io.logs import read_log
from tests.io.log_errors import one_line

BIG = 2**63 + 4  # one past what an Int64 holds
MEMORY_NOTE = "memory reading(s) that are not finite or not 0 to 2**53 bytes left out"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path




def column(path: Path, name: str) -> list[object]:
    return read_log(path).table.get_column(name).to_list()


def metrics(tmp_path: Path, metric: dict[str, object], config: str | None = None) -> Path:
    """A metrics JSON of ``metric`` (as ``iteration-time``), with a model_config.yaml."""
    folder = tmp_path / "run"
    folder.mkdir()
    if config is not None:
        (folder / "model_config.yaml").write_text(f"MODEL_ARGS:\n  --log-interval: {config}\n")
    path = folder / "golden_values.json"
    path.write_text(json.dumps({"iteration-time": metric}))
    return path


# -- 1. metrics JSON ------------------------------------------------------------------------


def test_json_step_keys_over_int64_are_left_out(tmp_path: Path) -> None:
    path = metrics(tmp_path, {"start_step": 1, "values": {str(BIG): 0.5, "2": 0.5, "0": 0.5,
                                                          "-3": 0.5}})  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == [2]
    assert (
        "3 metric value(s) at a step that is not a whole number from 1 to 2**63-1 left out."
        in log.notes
    )


def test_json_start_step_over_int64_leaves_its_values_out(tmp_path: Path) -> None:
    path = tmp_path / "golden_values.json"
    path.write_text(json.dumps({
        "iteration-time": {"start_step": 1, "step_interval": 1, "values": [0.5, 0.5]},
        "lm loss": {"start_step": BIG, "step_interval": 1, "values": [9.0, 8.0]},
    }))  # fmt: skip
    log = read_log(path)
    assert log.table.select("iteration", "loss").rows() == [(1, None), (2, None)]
    assert log.notes[0].startswith("2 metric value(s) at a step that is not a whole number")


def test_json_integer_beyond_float_range_is_not_a_number(tmp_path: Path) -> None:
    path = metrics(tmp_path, {"start_step": 1, "values": {"1": 10**400, "2": 0.5}})
    log = read_log(path)
    assert log.table.select("iteration", "step_s").rows() == [(1, None), (2, 0.5)]
    assert "1 metric value(s) that are not numbers read as null." in log.notes


def test_json_integer_over_4300_digits_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "golden_values.json"
    path.write_text('{"iteration-time": {"start_step": 1, "values": {"1": ' + "9" * 5000 + "}}}")
    assert "an integer too long to read" in one_line(path)


def test_json_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "golden_values.json"
    path.write_text('{"values": 1, "start_step": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested too deeply to read" in one_line(path)


@pytest.mark.parametrize("interval", ["1000000", "9" * 20, "1" * 400])
def test_json_log_interval_larger_than_the_gap_is_ignored(tmp_path: Path, interval: str) -> None:
    values = {str(step): 0.5 for step in range(1, 51)}
    log = read_log(metrics(tmp_path, {"start_step": 1, "values": values}, interval))
    assert log.log_interval == 1 and log.sampling == "mean"
    assert set(log.table.get_column("iterations").to_list()) == {1}
    assert "is larger than the 1 iteration(s) between timed values: ignored" in log.notes[0]


def test_json_log_interval_of_one_timed_value_is_bounded_by_its_step(tmp_path: Path) -> None:
    log = read_log(metrics(tmp_path, {"start_step": 10, "values": {"10": 0.5}}, "1000000"))
    assert log.table.select("iteration", "iterations").rows() == [(10, 10)]


def test_json_log_interval_not_a_whole_number_is_ignored(tmp_path: Path) -> None:
    values = {str(step): 0.5 for step in range(10, 51, 10)}
    log = read_log(metrics(tmp_path, {"start_step": 10, "values": values}, "1e6"))
    assert set(log.table.get_column("iterations").to_list()) == {1}
    assert log.notes == ("--log-interval 1e6 is not a whole number of at least 1: ignored, "
                         "each value taken as one iteration.",)  # fmt: skip


def test_json_valid_log_interval_unchanged(tmp_path: Path) -> None:
    values = {str(step): 0.5 for step in range(10, 51, 10)}
    log = read_log(metrics(tmp_path, {"start_step": 10, "values": values}, "10"))
    assert set(log.table.get_column("iterations").to_list()) == {10} and log.notes == ()


def test_json_absurd_memory_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "golden_values.json"
    memory = {"1": 1e30, "2": 2.0**53 + 2**11, "3": -5, "4": "inf", "5": 4096}
    path.write_text(json.dumps({
        "iteration-time": {"start_step": 1, "values": {str(s): 0.5 for s in range(1, 6)}},
        "mem-max-allocated-bytes": {"start_step": 1, "values": memory},
    }))  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("mem_max_allocated_bytes").to_list() == [None] * 4 + [4096]
    assert log.peak_memory_bytes == 4096
    assert any(note.startswith(f"4 {MEMORY_NOTE}") for note in log.notes)


# -- 2. JSONL nested too deep -----------------------------------------------------------------


def test_jsonl_first_line_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.jsonl", "[" * 100_000 + "\n" + '{"step":1,"step_time_s":0.5}\n')
    assert "no training iterations found" in one_line(path)


def test_jsonl_later_line_nested_too_deep_is_counted(tmp_path: Path) -> None:
    deep = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = write(tmp_path, "deep.jsonl", '{"step":1,"step_time_s":0.5}\n' + deep + "\n"
                 '{"step":2,"step_time_s":0.5}\n')  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == [1, 2]
    assert len(log.notes) == 1 and log.notes[0].startswith("1 ")


# -- 3. console memory lines --------------------------------------------------------------------

MEGATRON = "iteration {0:8d}/      10 | elapsed time per iteration (ms): 500.0 |\n"
MEGATRON_MEMORY = ("[Rank 0] (after {0} iterations) memory (MB) | allocated: 1 | max allocated: "
                   "{1} | reserved: 1\n")  # fmt: skip


def test_megatron_memory_inf_nan_and_huge_are_left_out(tmp_path: Path) -> None:
    readings = ["inf", "nan", "1e400", "1e20", "2048.5"]
    lines = [MEGATRON.format(n) + MEGATRON_MEMORY.format(n, mb) for n, mb in enumerate(readings, 1)]
    log = read_log(write(tmp_path, "train.log", "".join(lines)))
    assert log.peak_memory_bytes == round(2048.5 * 2**20)
    assert f"4 {MEMORY_NOTE} (not a measurement)." in log.notes


def test_megatron_all_memory_absurd_has_no_peak(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "train.log",
                         MEGATRON.format(1) + MEGATRON_MEMORY.format(1, "inf")))  # fmt: skip
    assert log.peak_memory_bytes is None
    assert log.notes == (f"1 {MEMORY_NOTE} (not a measurement).",)


TITAN = "step: {0}  loss: 8.0  memory: {1}GiB(1%)  tps: 1000  tflops: 1  mfu: 1%\n"


def test_torchtitan_memory_inf_and_nan_are_left_out(tmp_path: Path) -> None:
    text = TITAN.format(1, "inf") + TITAN.format(2, "nan") + TITAN.format(3, "12.5")
    log = read_log(write(tmp_path, "titan.log", text))
    assert log.peak_memory_bytes == round(12.5 * 2**30)
    assert f"2 {MEMORY_NOTE} (not a measurement)." in log.notes


def test_torchtitan_only_absurd_memory_has_no_peak(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "titan.log", TITAN.format(1, "inf")))
    assert log.peak_memory_bytes is None
    assert log.notes == (f"1 {MEMORY_NOTE} (not a measurement).",)


# -- 4. CSV / JSONL whole numbers ---------------------------------------------------------------

TOO_BIG = ("row(s) with a whole number too large to read exactly (2**63 or over, or a float of "
           "2**53 or over) left out.")  # fmt: skip


def test_csv_step_over_int64_is_a_malformed_row(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", f"step,step_time_s\n1,0.5\n{BIG},0.5\n1e20,0.5\n2,0.5\n")
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == [1, 2]
    assert log.notes == (f"2 {TOO_BIG}",)


def test_csv_whole_numbers_read_exactly(tmp_path: Path) -> None:
    # 2**53 + 1 is no float: read from its digits, not through one
    path = write(tmp_path, "s.csv", f"step,step_time_s\n{2**53 + 1},0.5\n{2**62},0.5\n")
    assert column(path, "iteration") == [2**53 + 1, 2**62]


def test_jsonl_memory_over_int64_is_a_malformed_row(tmp_path: Path) -> None:
    row = '{{"step":{},"step_time_s":0.5,"mem_max_allocated_bytes":{}}}\n'
    path = write(tmp_path, "s.jsonl", row.format(1, "1e30") + row.format(2, 1024))
    log = read_log(path)
    assert log.table.select("iteration", "mem_max_allocated_bytes").rows() == [(2, 1024)]
    assert log.notes == (f"1 {TOO_BIG}",)


def test_jsonl_only_row_too_big_is_one_line_saying_why(tmp_path: Path) -> None:
    path = write(
        tmp_path, "s.jsonl", '{"step":1,"step_time_s":0.5,"mem_max_allocated_bytes":1e30}\n'
    )
    assert TOO_BIG.rstrip(".") in one_line(path)


def test_csv_memory_over_2_53_is_left_out(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", "step,step_time_s,mem_max_allocated_bytes\n"
                 f"1,0.5,{2**60}\n2,0.5,2048\n")  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("mem_max_allocated_bytes").to_list() == [None, 2048]
    assert log.peak_memory_bytes == 2048 and log.notes == (f"1 {MEMORY_NOTE} (not a measurement).",)


def test_csv_iterations_over_the_gap_use_the_gap(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", "step,step_time_s,iterations\n"
                 f"5,0.5,{2**62}\n10,0.5,5\n20,0.5,7\n25,0.5,6\n")  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("iterations").to_list() == [5, 5, 7, 5]
    assert log.notes == ("2 row(s) with more iterations than the steps since the row before: "
                         "the gap to that row used.",)  # fmt: skip


def test_csv_skipped_and_nan_over_the_iterations_are_null(tmp_path: Path) -> None:
    path = write(tmp_path, "s.csv", "step,step_time_s,iterations,skipped,nan\n"
                 "10,0.5,10,5000000000000000000,10\n20,0.5,10,3,-1\n30,0.5,10,11,0\n")  # fmt: skip
    log = read_log(path)
    assert log.table.select("skipped", "nan").rows() == [(None, 10), (3, None), (None, 0)]
    assert log.notes == (
        "2 sample(s) with a skipped count under 0 or over the iterations the sample covers: read "
        "as not logged.",
        "1 sample(s) with a NaN count under 0 or over the iterations the sample covers: read as "
        "not logged.",
    )  # fmt: skip


# -- 5. columns that name the same field -----------------------------------------------------------


@pytest.mark.parametrize(("header", "row", "ignored", "first"), [
    ("step,step_time_s,iteration", "1,0.5,7", "iteration", "step"),
    ("step,step,step_time_s", "1,7,0.5", "step", "step"),
    ("step,step_time_s,step_s", "1,0.5,9", "step_s", "step_time_s"),
])  # fmt: skip
def test_csv_columns_naming_the_same_field_first_wins(
    tmp_path: Path, header: str, row: str, ignored: str, first: str
) -> None:
    log = read_log(write(tmp_path, "s.csv", f"{header}\n{row}\n"))
    assert log.table.select("iteration", "step_s").rows() == [(1, 0.5)]
    assert log.notes == (f"column {ignored!r} ignored: {first!r} before it gives the same field "
                         "(the first is read).",)  # fmt: skip


def test_jsonl_keys_naming_the_same_field_first_wins(tmp_path: Path) -> None:
    path = write(tmp_path, "s.jsonl", '{"step":1,"step_time_s":0.5,"step_s":9,"iteration":7}\n')
    log = read_log(path)
    assert log.table.select("iteration", "step_s").rows() == [(1, 0.5)]
    assert [note.split(":")[0] for note in log.notes] == [
        "column 'step_s' ignored",
        "column 'iteration' ignored",
    ]


# -- 6. plausibility ------------------------------------------------------------------------------


def test_step_times_outside_the_plausible_range_are_null(tmp_path: Path) -> None:
    rows = "1,1e-320,1000\n2,1.3e308,1000\n3,0.5,1e14\n4,0.5,1000\n5,1e-9,1e13\n6,inf,1000\n"
    log = read_log(write(tmp_path, "s.csv", "step,step_time_s,tokens_per_s\n" + rows))
    # inf is left to the measure, which counts it
    assert log.table.select("step_s", "tokens_per_s").rows() == [
        (None, 1000.0), (None, 1000.0), (0.5, None), (0.5, 1000.0), (1e-9, 1e13),
        (float("inf"), 1000.0)]  # fmt: skip
    assert log.notes == (
        "2 sample(s) with a step time outside 1e-09 to 1e+07 s (not a measurement) left out (the "
        "step time read as not logged).",
        "1 sample(s) with tokens/s over 1e+13 (not a measurement) left out (the tokens/s read as "
        "not logged).",
    )  # fmt: skip


def test_step_numbers_under_one_are_malformed_rows(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "s.csv", "step,step_time_s\n0,0.5\n-4,0.5\n1,0.5\n2,0.5\n"))
    assert log.table.get_column("iteration").to_list() == [1, 2]
    assert log.notes == ("2 row(s) with a step under 1 left out.",)


def test_console_iteration_zero_is_malformed(tmp_path: Path) -> None:
    log = read_log(write(tmp_path, "train.log", MEGATRON.format(0) + MEGATRON.format(1)))
    assert log.table.get_column("iteration").to_list() == [1]
    assert log.notes == ("1 malformed iteration line(s) left out.",)


def test_json_step_time_outside_the_range_is_null(tmp_path: Path) -> None:
    path = metrics(tmp_path, {"start_step": 1, "values": {"1": 1e-320, "2": 0.5, "3": 1e308}})
    assert column(path, "step_s") == [None, 0.5, None]


# -- the command: exit 0 or 2 and no traceback ---------------------------------------------------


@pytest.mark.parametrize(("name", "text", "code"), [
    ("step.csv", f"step,step_time_s\n1,0.5\n{BIG},0.5\n", 0),
    ("dup.csv", "step,step,step_time_s\n1,1,0.5\n", 0),
    ("deep.jsonl", "[" * 100_000 + "\n", 2),
    ("mem.log", MEGATRON.format(1) + MEGATRON_MEMORY.format(1, "inf"), 0),
    ("titan.log", TITAN.format(1, "nan"), 0),
    # no step time left: refused in one line (was a 0.000 ms median and NaN figures, exit 0)
    ("tiny.csv", "step,step_time_s\n" + "".join(f"{s},1e-320\n" for s in range(1, 70)), 2),
])  # fmt: skip
def test_steps_command_never_crashes(tmp_path: Path, name: str, text: str, code: int) -> None:
    path = write(tmp_path, name, text)
    done = subprocess.run([sys.executable, "-m", "nsysmoe", "steps", str(path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == code, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    if code == 2:
        assert len(done.stderr.strip().splitlines()) == 1
