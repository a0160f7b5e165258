"""Megatron-LM and Megatron-Bridge console logs: the ``training_log()`` lines.

Follows the format strings of ``training_log()`` in Megatron-LM's
``megatron/training/training.py`` and Megatron-Bridge's ``training/utils/train_utils.py``::

     [2025-01-01 10:00:00.123456] iteration       10/     100 | consumed samples: 320 |
     elapsed time per iteration (ms): 512.3 | throughput per GPU (TFLOP/s/GPU): 243.1 |
     learning rate: 1.000000E-04 | global batch size:    32 | lm loss: 1.000000E+01 |
     loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

(one line), the variants that print an instantaneous and a running value
(``compute per GPU (TFLOP/s/GPU): X (avg Y)``, ``… (TFLOP/s/GPU): X/Y``,
``tokens per GPU (tokens/s/GPU): X``, ``tokens/s/GPU inst/harmonic mean: X/Y``: the first
number is read), ``report_memory()``'s ``[Rank R] (after N iterations) memory (MB) | allocated:
… | max allocated: …`` (Megatron-LM: MB of 2**20 bytes; Megatron-Bridge: ``memory (GB) |
mem-max-allocated-gigabytes: …``, GB of 1e9 bytes) and the ``---- arguments ----`` block of
``_print_args`` (``  name ..... value``). Each line averages the ``--log-interval`` iterations
since the line before (Megatron resets its timers and loss sums at each line), so a line is one
sample of k iterations.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import console
from nsysmoe.io.logs.console import NUM
from nsysmoe.io.logs.schema import (
    BAD_UTF8,
    CUT_LAST_LINE,
    NO_ITERATIONS,
    TrainingLog,
    common_gap,
    drop_nonpositive,
    memory_note,
    memory_out_of_range,
    sampling_of,
    to_schema,
)

#: the record: an optional Megatron timestamp, then ``iteration N/ M |``
RECORD = r"^(.*?)(?:\[\d{4}-\d\d-\d\d[ T][^\]]*\]\s*)?iteration\s+(\d+)\s*/\s*(\d+)\s*\|"
HEADER = r"iteration\s+\d+\s*/\s*\d+\s*\|"
#: what the prefilter keeps (plain substrings, so the regex engine stays on its fast path)
PREFILTER = r"iteration|memory \(|arguments|\.\.\. "
FIELDS: dict[str, tuple[str, pl.DataType | type[pl.DataType]]] = {
    "elapsed_ms": (r"elapsed time per iteration \(ms\):\s*" + NUM, pl.Float64),
    "tflops": (r"(?:throughput|compute) per GPU \(TFLOP/s/GPU\):\s*" + NUM, pl.Float64),
    "tokens_per_s": (
        r"(?:tokens per GPU \(tokens/s/GPU\)|tokens/s/GPU inst/harmonic mean):\s*" + NUM,
        pl.Float64,
    ),  # fmt: skip
    "loss": (r"\|\s*lm loss:\s*" + NUM, pl.Float64),
    "loss_scale": (r"\|\s*loss scale:\s*" + NUM, pl.Float64),
    "grad_norm": (r"\|\s*grad norm:\s*" + NUM, pl.Float64),
    "skipped": (r"number of skipped iterations:\s*(\d+)", pl.Int64),
    "nan": (r"number of nan iterations:\s*(\d+)", pl.Int64),
    "global_batch": (r"global batch size:\s*(\d+)", pl.Int64),
}
MEMORY = (r"\(after \d+ iterations\) memory \((MB|GB)\).*?"
          r"(?:\|\s*max allocated|mem-max-allocated-gigabytes):\s*" + NUM)  # fmt: skip
UNIT_BYTES = {"MB": 1024.0 * 1024.0, "GB": 1.0e9}
ARGS_START = r"-{3,} arguments -{3,}"
ARGS_END = r"-{3,} end of arguments -{3,}"
#: an argument line, after any prefix: two spaces, the name, dots, the value
ARG = r"\s\s([A-Za-z_]\w*) \.{2,} ?(.*?)\s*$"


def read_megatron(path: Path, chunk_bytes: int = console.CHUNK_BYTES) -> TrainingLog:
    """Read a Megatron-LM / Megatron-Bridge console log, streamed (see the module docstring)."""
    parts: list[pl.DataFrame] = []
    config: dict[str, str] = {}
    inside_args = False
    peak: float | None = None
    malformed = truncated = absurd = 0
    bad_utf8 = False
    for chunk in console.chunks(path, chunk_bytes):
        bad_utf8 |= chunk.bad_utf8
        lines = chunk.lines.filter(pl.col("line").str.contains(PREFILTER))
        if lines.height == 0:
            continue
        lines = lines.with_columns(pl.col("line").str.replace_all(console.ANSI, ""))
        last = chunk.lines.item(-1, "n") if chunk.unterminated_last else None
        samples, bad, cut = _iteration_lines(lines, last)
        malformed += bad
        truncated += cut
        if samples.height:
            parts.append(samples)
        chunk_peak, left_out = _memory_peak(lines)
        absurd += left_out
        if chunk_peak is not None:
            peak = chunk_peak if peak is None else max(peak, chunk_peak)
        inside_args = _arguments(lines, config, inside_args)
    if not parts:
        raise NsysmoeError(f"{path}: {NO_ITERATIONS}")
    table = pl.concat(parts)
    table, rank, ranks, notes = console.pick_rank(table, "iteration")
    table, restarts = console.last_run(table)
    notes += restarts
    if truncated:
        notes.append(CUT_LAST_LINE)
    if malformed:
        notes.append(f"{malformed} malformed iteration line(s) left out.")
    if absurd:
        notes.append(memory_note(absurd))
    if bad_utf8:
        notes.append(BAD_UTF8)
    return _training_log(path, table, rank, ranks, peak, config, notes)


def _iteration_lines(lines: pl.DataFrame, last: int | None) -> tuple[pl.DataFrame, int, int]:
    """The chunk's iteration samples (columns ``n``, ``rank``, ``iteration`` and the fields),
    the count of malformed iteration lines, and 1 where the file's last line (number ``last``,
    None where it ends with a line end) is a cut-off iteration line (not ending in "|")."""
    elapsed = pl.col("line").str.contains("elapsed time per iteration", literal=True)
    candidates = lines.filter(pl.col("line").str.contains(HEADER) | elapsed)
    if candidates.height == 0:
        return candidates, 0, 0
    record = pl.col("line").str.extract_groups(RECORD)
    parsed = candidates.with_columns(record.alias("record")).with_columns(
        console.launcher_expr(pl.col("record").struct.field("1")).alias("rank"),
        pl.col("record").struct.field("2").cast(pl.Int64, strict=False).alias("iteration"),
        *(pl.col("line").str.extract(pattern, 1).str.replace_all(",", "").cast(dtype, strict=False)
          .alias(name) for name, (pattern, dtype) in FIELDS.items()),
    )  # fmt: skip
    cut = 0
    if last is not None:
        is_last = pl.col("n") == last
        ends = pl.col("line").str.strip_chars().str.ends_with("|")
        cut = parsed.filter(is_last & ~ends).height
        parsed = parsed.filter(~(is_last & ~ends))
    good = (pl.col("iteration") >= 1) & pl.col("elapsed_ms").is_not_null()  # null: not >= 1
    malformed = parsed.filter(~good).height
    return parsed.filter(good).drop("line", "record"), malformed, cut


def _memory_peak(lines: pl.DataFrame) -> tuple[float | None, int]:
    """The largest "max allocated" of the chunk's memory lines, in bytes (any rank), and how
    many readings were left out as no measurement (inf, NaN, 1e400, over 2**53 bytes)."""
    found = lines.select(pl.col("line").str.extract_groups(MEMORY).alias("m")).unnest("m")
    found = found.drop_nulls()
    if found.height == 0:
        return None, 0
    unit = found.get_column("1").replace_strict(UNIT_BYTES, return_dtype=pl.Float64)
    value = found.get_column("2").cast(pl.Float64, strict=False) * unit
    absurd = value.to_frame("v").select(memory_out_of_range(pl.col("v"))).to_series()
    top = value.filter(~absurd).max()
    return (None if top is None else float(top)), int(absurd.sum())  # type: ignore[arg-type]


def _arguments(lines: pl.DataFrame, config: dict[str, str], inside: bool) -> bool:
    """Add the chunk's ``arguments`` block lines to ``config`` ("--name-with-dashes" -> value;
    a new block, as after a restart, replaces the one before: the config is the last run's);
    whether the block is still open at the chunk's end."""
    line = pl.col("line")
    marker = (pl.when(line.str.contains(ARGS_END)).then(pl.lit(0))
              .when(line.str.contains(ARGS_START)).then(pl.lit(1)))  # fmt: skip
    marks = lines.select(marker.alias("marker"), line.str.extract_groups(ARG).alias("arg"))
    marks = marks.filter(
        pl.col("marker").is_not_null() | pl.col("arg").struct.field("1").is_not_null()
    )
    state = pl.col("marker").forward_fill().fill_null(int(inside))
    marks = marks.with_columns(state.alias("inside")).filter(
        pl.col("marker").is_not_null() | (pl.col("inside") == 1)).unnest("arg")  # fmt: skip
    for marker, name, value, _ in marks.iter_rows():
        if marker == 1:
            config.clear()
        elif marker is None and name:
            config["--" + name.replace("_", "-")] = value or ""
    return bool(marks.get_column("inside").item(-1)) if marks.height else inside


def _training_log(
    path: Path,
    table: pl.DataFrame,
    rank: str | None,
    ranks: tuple[str, ...],
    peak: float | None,
    config: dict[str, str],
    notes: list[str],
) -> TrainingLog:
    """The samples as a :class:`TrainingLog`: iterations covered from the log interval; ms to
    seconds by IEEE division (numpy's, correctly rounded: polars may multiply by the
    reciprocal on long columns, so the last bit would depend on how the file was chunked)."""
    seconds = table.get_column("elapsed_ms").to_numpy() / 1000.0
    table = table.with_columns(pl.Series("step_s", seconds, dtype=pl.Float64))
    log_interval = common_gap(table.get_column("iteration"))
    covered = console.iterations_covered(table.get_column("iteration"), log_interval)
    table, nonpositive = drop_nonpositive(to_schema(table.with_columns(covered)))
    notes = notes + nonpositive
    return TrainingLog(
        path=str(path), format="megatron", table=table, rank=rank, ranks=ranks,
        log_interval=log_interval, sampling=sampling_of(table, log_interval),
        peak_memory_bytes=None if peak is None else round(peak), config=config, notes=tuple(notes),
    )  # fmt: skip
