"""Plain CSV / JSONL of steps (tests/data/logs/steps.*, synthetic: step s takes 0.5 + s/1000 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsysmoe.io.logs import LOG_SCHEMA, read_log
from tests.io.log_errors import one_line

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
    assert words in one_line(path)


def _plain_jsonl(text: str) -> tuple[list[tuple[int, float]], int]:
    """(step, step_time_s) of the lines a plain json.loads reads as an object with a step, and
    the count of lines it cannot read."""
    good, bad = [], 0
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        good.append((row["step"], row["step_time_s"]))
    return good, bad


@pytest.mark.parametrize("last", ['{"step": 81', '{"step": 81, "step_time_s": 0.'])
def test_jsonl_garbage_and_a_cut_last_line_are_counted(tmp_path: Path, last: str) -> None:
    rows = [f'{{"step": {s}, "step_time_s": {0.5 + s / 1000}}}' for s in range(1, 81)]
    rows.insert(40, "garbage line")
    text = "\n".join(rows) + "\n" + last
    path = tmp_path / "steps.jsonl"
    path.write_text(text)
    log = read_log(path)
    good, bad = _plain_jsonl(text)
    assert bad == 2
    assert list(log.table.select("iteration", "step_s").iter_rows()) == good
    assert log.notes == ("the last line is cut off (no line end): left out.",
                         "1 line(s) that are not a JSON object left out.")  # fmt: skip


def test_jsonl_values_that_are_not_numbers_and_iterations_under_one(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    path.write_text('{"step": 1, "step_time_s": 0.5, "iterations": 1}\n'
                    '{"step": 2, "step_time_s": "fast", "iterations": 1}\n'
                    '{"step": 3, "step_time_s": 0.5, "iterations": 0}\n'
                    '{"step": 4, "step_time_s": 0.5, "iterations": 1.5}\n'
                    '{"step": 5, "step_time_s": 0.5, "iterations": 2.0}\n'
                    '[5, 0.5]\n{"loss": 3.0}\n')  # fmt: skip
    log = read_log(path)
    assert log.table.select("iteration", "iterations").rows() == [(1, 1), (5, 2)]
    assert log.notes == (
        "1 line(s) that are not a JSON object left out.",
        "1 row(s) without a step number left out.",
        "2 row(s) with a value that is not a number (iterations, step_time_s) left out.",
        "1 row(s) with iterations under 1 left out.",
    )


def test_csv_cut_last_row_is_not_a_zero_second_step(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("step,step_time_s\n" + "".join(f"{s},0.5\n" for s in range(1, 81)) + "81,0.")
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == list(range(1, 81))
    assert log.table.get_column("step_s").min() == 0.5
    assert log.notes == ("the last line is cut off (no line end): left out.",)


def test_csv_garbage_rows_comments_and_quotes(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text('# run 7\n"step","step_time_s","loss"\n1,0.5,9\ngarbage "line\n\n'
                    '# a comment\n2,0.6,\n3,abc,8\n"4","0.7","7.5"\n')  # fmt: skip
    log = read_log(path)
    rows = log.table.select("iteration", "step_s", "loss").rows()
    assert rows == [(1, 0.5, 9.0), (2, 0.6, None), (4, 0.7, 7.5)]
    assert log.notes == (
        "1 row(s) without a step number left out.",
        "1 row(s) with a value that is not a number (step_time_s) left out.",
    )


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_zero_and_negative_step_times_and_tokens_are_left_out(tmp_path: Path, kind: str) -> None:
    values = [(1, 0.5, 9000.0), (2, 0.0, 9001.0), (3, -0.1, 0.0), (4, 0.5, -5.0), (5, 0.6, 9002.0)]
    path = tmp_path / f"steps.{kind}"
    if kind == "csv":
        path.write_text("step,step_time_s,tokens_per_s\n"
                        + "".join(f"{s},{t},{k}\n" for s, t, k in values))  # fmt: skip
    else:
        path.write_text("".join(json.dumps({"step": s, "step_time_s": t, "tokens_per_s": k}) + "\n"
                                for s, t, k in values))  # fmt: skip
    log = read_log(path)
    assert log.table.get_column("iteration").to_list() == [1, 2, 3, 4, 5]
    assert log.table.get_column("step_s").to_list() == [t if t > 0 else None for _, t, _ in values]
    tokens = [k if k > 0 else None for _, _, k in values]
    assert log.table.get_column("tokens_per_s").to_list() == tokens
    assert log.notes == (
        "2 sample(s) with a zero or negative step time left out (the step time read as not "
        "logged).",
        "2 sample(s) with a zero or negative tokens/s left out (the tokens/s read as not logged).",
    )


def test_csv_restart_line_numbers_count_comments(tmp_path: Path) -> None:
    path = tmp_path / "restart.csv"
    path.write_text("# header\nstep,step_time_s\n1,0.9\n\n2,0.9\n# resumed\n1,0.5\n2,0.5\n")
    log = read_log(path)
    assert log.notes == ("restart at line 7 (iteration 2 → 1): 2 earlier sample(s) left out.",)
