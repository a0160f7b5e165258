"""Megatron's per-step metrics JSON: the shared CI pairs read back equal a plain ``json`` parse of
the same file; the log interval of model_config.yaml decides point samples vs means."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.io.logs import LOG_SCHEMA, read_log
from tests.conftest import require_shared_logs
from tests.io.log_errors import one_line

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
COLUMNS = {"iteration-time": "step_s", "lm loss": "loss",
           "mem-max-allocated-bytes": "mem_max_allocated_bytes"}  # fmt: skip


def shared_ci() -> Path:
    """The shared Megatron CI pairs' folder (skipped where the shared logs are absent)."""
    return require_shared_logs() / "megatron-ci"


def test_shared_pairs_equal_plain_json() -> None:
    files = sorted(shared_ci().glob("*/*/golden_values.json"))
    assert len(files) == 6
    for path in files:
        raw = json.loads(path.read_text())
        log = read_log(path)
        assert log.format == "megatron-json" and log.table.schema == LOG_SCHEMA
        steps = sorted({int(k) for metric in raw.values() for k in metric["values"]}
                       & {int(k) for key in COLUMNS for k in raw[key]["values"]})  # fmt: skip
        assert log.table.get_column("iteration").to_list() == steps
        for key, column in COLUMNS.items():
            got = {
                i: v for i, v in log.table.select("iteration", column).iter_rows() if v is not None
            }
            want = {int(k): (int(v) if column.startswith("mem") else v)
                    for k, v in raw[key]["values"].items()}  # fmt: skip
            assert got == want, (path, key)
        assert log.peak_memory_bytes == int(max(raw["mem-max-allocated-bytes"]["values"].values()))
        assert log.config["--log-interval"] == "1"
        assert log.table.get_column("iterations").to_list() == [1] * len(steps)
        # the first timed step (initialisation, seconds) is kept: warm-up is the measure's job
        first = min(raw["iteration-time"]["values"], key=int)
        assert log.table.filter(iteration=int(first))["step_s"].item() > 4


def test_step_interval_five_under_log_interval_one_is_a_point_sample() -> None:
    pair = shared_ci() / "a2a-overlap-ep4"
    off = read_log(pair / "off" / "golden_values.json")
    on = read_log(pair / "on" / "golden_values.json")
    assert (off.log_interval, off.sampling) == (5, "point")
    assert off.table.get_column("iteration").to_list() == [1, 5, *range(10, 51, 5)]
    assert (on.log_interval, on.sampling) == (1, "mean")
    assert "--moe-token-dispatcher-type" not in off.config
    assert on.config["--overlap-moe-expert-parallel-comm"] == "True"
    assert "--overlap-moe-expert-parallel-comm" not in off.config
    assert on.config["--moe-token-dispatcher-type"] == "alltoall"


def test_log_interval_ten_values_are_means_and_list_values_are_read() -> None:
    log = read_log(DATA / "megatron-json-interval10" / "golden_values.json")
    table = log.table
    assert table.get_column("iteration").to_list() == [10, 20, 30, 40, 50]
    assert table.get_column("iterations").to_list() == [10] * 5
    assert (log.log_interval, log.sampling) == (10, "mean")
    assert table.get_column("step_s").to_list() == [2.5, 0.51, 0.5, 0.49, 0.52]
    assert table.get_column("tflops").to_list() == [None, 240.5, 244.0, 246.25, 238.0]
    loss = table.get_column("loss").to_list()
    assert loss[:2] == [10.5, 10.1] and loss[2] != loss[2] and loss[3:] == [9.5, 9.2]  # "nan"
    assert log.peak_memory_bytes == 3500
    assert log.config == {"--num-layers": "12", "--log-interval": "10", "--bf16": "True",
                          "--load": "None", "--moe-token-dispatcher-type": "alltoall",
                          "--min-lr": "1.0e-5"}  # fmt: skip
    assert log.notes == ()


def test_without_model_config_each_value_is_one_iteration(tmp_path: Path) -> None:
    path = tmp_path / "golden_values_dev.json"
    path.write_bytes((DATA / "megatron-json-interval10" / "golden_values.json").read_bytes())
    log = read_log(path)
    assert log.table.get_column("iterations").to_list() == [1] * 5
    assert (log.log_interval, log.sampling) == (10, "point")
    assert log.config == {} and "model_config.yaml" in log.notes[0]


@pytest.mark.parametrize(
    ("text", "words"),
    [('{"lm loss": {"start_step": 1, "step_interval": 1, "values": {"1": 3', "not valid JSON"),
     ('{"num-zeros": {"start_step": 1, "step_interval": 1, "values": {"1": 3}}}',
      "no training iterations found")],
)  # fmt: skip
def test_bad_metrics_json_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "golden_values.json"
    path.write_text(text)
    assert words in one_line(path)


def test_mixed_cadences_take_the_interval_from_the_timed_rows() -> None:
    """lm loss and memory every step, iteration-time and throughput every 10 under
    --log-interval 10: the timed rows are 10-iteration means, the others one iteration each,
    so a window keeps every loss inside it."""
    path = DATA / "megatron-json-mixed" / "golden_values.json"
    raw = json.loads(path.read_text())
    log = read_log(path)
    timed = {int(k) for k in raw["iteration-time"]["values"]}
    steps = sorted({int(k) for metric in raw.values() for k in metric["values"]})
    assert log.table.get_column("iteration").to_list() == steps
    assert (log.log_interval, log.sampling) == (10, "mean")
    want = [10 if step in timed else 1 for step in steps]
    assert log.table.get_column("iterations").to_list() == want
    assert log.table.get_column("loss").to_list() == list(raw["lm loss"]["values"].values())
    # the samples whose covered iterations lie in 11-50 (the measure's window rule)
    inside = log.table.filter(
        (pl.col("iteration") - pl.col("iterations") + 1 >= 11) & (pl.col("iteration") <= 50)
    )
    losses = {int(k): v for k, v in raw["lm loss"]["values"].items() if 11 <= int(k) <= 50}
    assert dict(inside.select("iteration", "loss").iter_rows()) == losses
    assert inside.get_column("step_s").drop_nulls().to_list() == [
        raw["iteration-time"]["values"][str(s)] for s in (20, 30, 40, 50)
    ]


def test_zero_and_negative_step_times_are_not_measurements(tmp_path: Path) -> None:
    raw = json.loads((DATA / "megatron-json-interval10" / "golden_values.json").read_text())
    raw["iteration-time"]["values"].update({"30": 0, "40": -0.2})
    path = tmp_path / "golden_values.json"
    path.write_text(json.dumps(raw))
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == [10, 20, 30, 40, 50]
    want = [v if v > 0 else None for v in raw["iteration-time"]["values"].values()]
    assert log.table.get_column("step_s").to_list() == want
    assert log.table.get_column("loss").to_list()[3] == 9.5  # the sample stays
    assert log.notes[-1] == ("2 sample(s) with a zero or negative step time left out (the step "
                             "time read as not logged).")  # fmt: skip
