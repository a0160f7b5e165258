"""Console logs (Megatron-LM, Megatron-Bridge, torchtitan) on the synthetic fixtures in
tests/data/logs/ (values by formula, stated in each file's header): every field, launcher
prefixes, ANSI colours, interleaved ranks, log intervals, restarts, cut-off and malformed lines,
and chunk boundaries anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.io.logs import LOG_SCHEMA, read_log
from nsysmoe.io.logs.megatron import read_megatron

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


def test_megatron_lm_every_field() -> None:
    log = read_log(DATA / "megatron-lm.log")
    assert (log.format, log.rank, log.ranks, log.notes) == ("megatron", None, (), ())
    assert log.table.schema == LOG_SCHEMA
    rows = log.table.to_dicts()
    assert [r["iteration"] for r in rows] == list(range(1, 13))
    for i, row in enumerate(rows, start=1):
        assert row["step_s"] == pytest.approx((2500.0 if i == 1 else 500.0 + i) / 1000)
        assert row["tflops"] == 200.0 + i
        assert row["loss"] == pytest.approx(11 - i / 10)
        assert row["grad_norm"] == pytest.approx(1 + i / 1000)
        assert (row["loss_scale"], row["skipped"], row["nan"], row["global_batch"]) == (
            1.0,
            0,
            0,
            32,
        )
        assert (row["iterations"], row["tokens_per_s"], row["mem_max_allocated_bytes"]) == (
            1,
            None,
            None,
        )
    assert (log.log_interval, log.sampling) == (1, "mean")
    # the largest "max allocated" of any rank's memory line, MB of 2**20 bytes
    assert log.peak_memory_bytes == round(21002.25 * 2**20)
    assert log.config == {
        "--global-batch-size": "32", "--load": "None", "--log-interval": "1",
        "--moe-token-dispatcher-type": "alltoall", "--overlap-moe-expert-parallel-comm": "True",
        "--seq-length": "4096", "--train-iters": "12",
    }  # fmt: skip


def test_megatron_bridge_log_interval_five_and_newer_fields() -> None:
    log = read_log(DATA / "megatron-bridge.log")
    table = log.table
    steps = list(range(5, 31, 5))
    assert table.get_column("iteration").to_list() == steps
    # each line averages the 5 iterations since the line before: one sample of 5
    assert table.get_column("iterations").to_list() == [5] * 6
    assert (log.log_interval, log.sampling) == (5, "mean")
    assert table.get_column("step_s").to_list() == pytest.approx([(600 + i) / 1000 for i in steps])
    assert table.get_column("tflops").to_list() == [300.0 + i for i in steps]  # not the avg
    assert table.get_column("tokens_per_s").to_list() == [9000.0 + i for i in steps]
    assert table.get_column("skipped").to_list() == [0, 1, 0, 0, 0, 0]
    assert log.peak_memory_bytes == round(31.234e9)  # Bridge's GB are 1e9 bytes


def test_ansi_and_interleaved_ranks_tie_goes_to_the_lowest() -> None:
    log = read_log(DATA / "megatron-ranks.log")
    assert log.rank == "[default3]" and log.ranks == ("[default0]", "[default3]", "[default7]")
    assert log.table.get_column("step_s").to_list() == pytest.approx(
        [(500 + i) / 1000 for i in range(1, 7)]
    )
    assert (
        len(log.notes) == 1 and "2 other rank(s)" in log.notes[0] and "[default3]" in log.notes[0]
    )


def test_the_rank_with_most_lines_wins(tmp_path: Path) -> None:
    text = (DATA / "megatron-ranks.log").read_text().splitlines()
    kept = [line for line in text if "[default3]" not in line]
    path = tmp_path / "two.log"
    path.write_text("\n".join(kept) + "\n")
    log = read_log(path)
    assert log.rank == "[default7]"  # 6 lines against rank 0's 2, and coloured
    assert log.table.get_column("step_s").to_list() == pytest.approx(
        [(700 + i) / 1000 for i in range(1, 7)]
    )


@pytest.mark.parametrize(
    ("prefix", "rank"),
    [("0: ", "0"), ("  12: ", "12"), ("[1,0]<stdout>:", "[1,0]<stdout>"), ("[rank5]:", "[rank5]"),
     ("2025-01-01T10:00:00.123456Z [default2]:", "[default2]"), ("2025-01-01T10:00:00Z ", None)],
)  # fmt: skip
def test_launcher_and_timestamp_prefixes(tmp_path: Path, prefix: str, rank: str | None) -> None:
    plain = read_log(DATA / "megatron-lm.log")
    path = tmp_path / "prefixed.log"
    lines = (DATA / "megatron-lm.log").read_text().splitlines()
    path.write_text("".join(prefix + line + "\n" for line in lines))
    log = read_log(path)
    assert log.rank == rank and log.ranks == (() if rank is None else (rank,))
    assert log.table.equals(plain.table)
    assert log.config == plain.config and log.peak_memory_bytes == plain.peak_memory_bytes


def test_restart_truncation_and_malformed_lines_are_counted() -> None:
    log = read_log(DATA / "megatron-restart.log")
    assert log.table.get_column("iteration").to_list() == list(range(6, 12))
    assert log.table.get_column("step_s").to_list() == pytest.approx(
        [(400 + i) / 1000 for i in range(6, 12)]
    )
    assert log.notes == (
        "restart at line 19 (iteration 8 → 6): 8 earlier sample(s) left out.",
        "the last line is cut off (no line end): left out.",
        "1 malformed iteration line(s) left out.",
    )
    assert log.config == {"--log-interval": "1", "--train-iters": "20"}  # the last run's block


@pytest.mark.parametrize("name", ["megatron-lm.log", "megatron-bridge.log", "megatron-ranks.log",
                                  "megatron-restart.log"])  # fmt: skip
@pytest.mark.parametrize("chunk", [64, 200, 4096])
def test_chunk_boundaries_change_nothing(name: str, chunk: int) -> None:
    whole = read_log(DATA / name)
    pieces = read_megatron(DATA / name, chunk_bytes=chunk)
    assert pieces.table.equals(whole.table)
    assert (pieces.config, pieces.notes, pieces.peak_memory_bytes, pieces.rank) == (
        whole.config, whole.notes, whole.peak_memory_bytes, whole.rank)  # fmt: skip


def test_records_after_long_startup_output_are_found(tmp_path: Path) -> None:
    path = tmp_path / "late.log"
    noise = "".join(f"building dataset shard {i} ...\n" for i in range(20000))  # > the sniffed head
    path.write_text(noise + (DATA / "megatron-lm.log").read_text())
    assert read_log(path).table.height == 12


def test_torchtitan_step_lines() -> None:
    log = read_log(DATA / "torchtitan.log")
    assert (log.format, log.rank, log.ranks) == ("torchtitan", "[rank0]", ("[rank0]", "[rank1]"))
    steps = [1, 10, 20, 30, 40, 50]
    table = log.table
    assert table.get_column("iteration").to_list() == steps  # the validation line is left out
    assert table.get_column("step_s").null_count() == 6  # torchtitan logs no step time
    assert table.get_column("tokens_per_s").to_list() == [7000.0 + s for s in steps]
    assert table.get_column("tflops").to_list() == pytest.approx([300 + s / 10 for s in steps])
    assert table.get_column("loss").to_list() == pytest.approx([8 - s / 100 for s in steps])
    assert table.get_column("iterations").to_list() == [1, 9, 10, 10, 10, 10]
    assert (log.log_interval, log.sampling) == (10, "mean")
    assert log.peak_memory_bytes == round(30.5 * 2**30)
    assert any("max reserved" in note for note in log.notes)
    assert any("1 other rank(s)" in note for note in log.notes)


def test_non_utf8_bytes_are_replaced_and_said(tmp_path: Path) -> None:
    path = tmp_path / "latin1.log"
    path.write_bytes(b"caf\xe9 \xff\xfe noise\n" + (DATA / "megatron-lm.log").read_bytes())
    log = read_log(path)
    assert log.table.height == 12
    assert log.notes == ("bytes that are not UTF-8 were read as replacement characters.",)


def test_nan_loss_and_grad_norm(tmp_path: Path) -> None:
    line = (DATA / "megatron-lm.log").read_text().splitlines()[-2]
    bad = line.replace("grad norm: 1.012", "grad norm: nan").replace(
        "number of nan iterations:   0", "number of nan iterations:   1")  # fmt: skip
    path = tmp_path / "nan.log"
    path.write_text(bad + "\n")
    row = read_log(path).table.row(0, named=True)
    assert row["grad_norm"] != row["grad_norm"] and row["nan"] == 1
    assert isinstance(read_log(path).table, pl.DataFrame)


STEP_MS = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*elapsed time per iteration \(ms\): ([-\d.]+)")


def _plain(text: str) -> list[tuple[int, float]]:
    """(iteration, seconds) of every iteration line, by a plain regex, in line order."""
    return [(int(m.group(1)), float(m.group(2)) / 1000)
            for m in map(STEP_MS.search, text.splitlines()) if m]  # fmt: skip


def _last_run(samples: list[tuple[int, float]]) -> tuple[list[tuple[int, float]], int]:
    """Brute force: exact repeats out (first kept), then the samples after the last step back;
    and the number of step backs."""
    unique: list[tuple[int, float]] = []
    for sample in samples:
        if sample not in unique:
            unique.append(sample)
    backs = [i for i in range(1, len(unique)) if unique[i][0] <= unique[i - 1][0]]
    return unique[backs[-1] if backs else 0 :], len(backs)


@pytest.mark.parametrize("interleaved", [False, True], ids=["concatenated", "unprefixed-ranks"])
def test_duplicated_lines_are_dropped_in_one_note(tmp_path: Path, interleaved: bool) -> None:
    lines = (DATA / "megatron-lm.log").read_text().splitlines(keepends=True)
    path = tmp_path / "twice.log"
    path.write_text("".join(line + line for line in lines) if interleaved else "".join(lines * 2))
    log = read_log(path)
    once = read_log(DATA / "megatron-lm.log")
    assert log.table.equals(once.table)
    samples, backs = _last_run(_plain(path.read_text()))
    assert backs == 0 and len(samples) == 12
    assert log.notes == ("12 duplicated sample line(s) (the same iteration and values again) "
                         "left out.",)  # fmt: skip


def test_many_restarts_are_one_note(tmp_path: Path) -> None:
    """Three restarts (and a copy of a whole run): one note, the last restart's place, every
    earlier sample counted; the kept samples equal a brute-force last run."""
    runs = [(1, 6, 900), (4, 9, 800), (4, 9, 800), (2, 5, 700), (3, 12, 600)]
    text = "".join(
        f" iteration {i:8d}/      20 | elapsed time per iteration (ms): {base + i:.1f} | "
        f"lm loss: 1.0E+01 |\n" for first, last, base in runs for i in range(first, last + 1)
    )  # fmt: skip
    path = tmp_path / "restarts.log"
    path.write_text(text)
    log = read_log(path)
    samples, backs = _last_run(_plain(text))
    assert backs == 3
    assert list(log.table.select("iteration", "step_s").iter_rows()) == samples
    earlier = 6 + 6 + 4  # the first, second and fourth runs; the third is the second's copy
    assert log.notes == (
        "6 duplicated sample line(s) (the same iteration and values again) left out.",
        f"3 restarts; the last at line 23 (iteration 5 → 3): {earlier} earlier samples left out.",
    )


def test_notes_do_not_grow_with_the_log(tmp_path: Path) -> None:
    """500 restarts and 500 repeated lines still make two notes."""
    line = " iteration {i:8d}/      20 | elapsed time per iteration (ms): {ms:.1f} |\n"
    text = "".join(line.format(i=i, ms=500 + r) for r in range(500) for i in (1, 2, 2))
    path = tmp_path / "loop.log"
    path.write_text(text)
    log = read_log(path)
    assert len(log.notes) == 2 and log.notes[1].startswith("499 restarts; the last at line 1498")
    assert log.table.get_column("step_s").to_list() == [0.999, 0.999]


def test_zero_and_negative_step_times_stay_samples_without_a_time(tmp_path: Path) -> None:
    lines = (DATA / "megatron-lm.log").read_text().splitlines(keepends=True)
    text = "".join(
        re.sub(r"\(ms\): [\d.]+", {"4": "(ms): 0.0", "7": "(ms): -3.5"}.get(m.group(1), r"\g<0>"),
               line) if (m := STEP_MS.search(line)) else line
        for line in lines
    )  # fmt: skip
    path = tmp_path / "zero.log"
    path.write_text(text)
    log = read_log(path)
    plain = _plain(text)
    assert [i for i, _ in plain] == log.table.get_column("iteration").to_list()
    assert log.table.get_column("step_s").to_list() == pytest.approx(
        [s if s > 0 else None for _, s in plain]
    )
    assert log.table.get_column("loss").null_count() == 0  # the samples stay
    assert log.notes == ("2 sample(s) with a zero or negative step time left out (the step "
                         "time read as not logged).",)  # fmt: skip


def test_torchtitan_zero_tokens_per_second(tmp_path: Path) -> None:
    text = (DATA / "torchtitan.log").read_text().replace("tps: 7,010", "tps: 0")
    path = tmp_path / "titan.log"
    path.write_text(text)
    log = read_log(path)
    assert log.table.get_column("tokens_per_s").to_list()[:3] == [7001.0, None, 7020.0]
    assert "1 sample(s) with a zero or negative tokens/s left out" in log.notes[-1]
