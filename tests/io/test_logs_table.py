"""Plain CSV / JSONL of steps (tests/data/logs/steps.*, synthetic: step s takes 0.5 + s/1000 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import LOG_SCHEMA, read_log

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


@pytest.mark.parametrize(("name", "kind"), [("steps.csv", "csv"), ("steps.jsonl", "jsonl")])
def test_steps_table(name: str, kind: str) -> None:
    log = read_log(DATA / name)
    assert log.format == kind and log.table.schema == LOG_SCHEMA and log.notes == ()
    table = log.table
    assert table.get_column("iteration").to_list() == list(range(1, 11))
    assert table.get_column("step_s").to_list() == [0.5 + s / 1000 for s in range(1, 11)]
    assert table.get_column("loss").to_list() == [9 - s / 10 for s in range(1, 11)]
    tflops = [250.0 + s for s in range(1, 11)] if kind == "csv" else [None] * 10
    assert table.get_column("tflops").to_list() == tflops
    assert table.get_column("iterations").to_list() == [1] * 10
    assert (log.log_interval, log.sampling, log.rank) == (1, "mean", None)


def test_csv_restart_and_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "restart.csv"
    path.write_text("step,step_time_s\n1,0.9\n2,0.9\n3,0.9\nx,1\n2,0.5\n3,0.5\n")
    log = read_log(path)
    assert log.table.get_column("step_s").to_list() == [0.5, 0.5]
    assert log.notes == ("restart at line 6 (iteration 3 → 2): 3 earlier sample(s) left out.",
                         "1 row(s) without a step number left out.")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "words"),
    [("1,0.5\n2,0.5\n", "a CSV needs a header line 'step,step_time_s"),
     ("step,seconds\n1,0.5\n", "a CSV needs a header line"),
     ('{"step": 1, "time": 0.5}\n', "JSONL rows need 'step' and 'step_time_s'")],
)  # fmt: skip
def test_what_is_expected_is_said(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(NsysmoeError) as err:
        read_log(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)
    assert "\n" not in str(err.value)
