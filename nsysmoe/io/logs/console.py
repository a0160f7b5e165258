"""What every console-log reader shares: the file read in bounded chunks, the launcher prefix of
each line, which rank's lines to keep, and the last run after a restart.

A console log can be gigabytes: it is read in binary chunks cut at the last newline (never
whole), decoded with replacement characters (a non-UTF-8 byte costs a character, not the read),
and each chunk's lines are filtered and parsed with vectorised polars string operations, so
memory stays bounded by the chunk and the parsed samples.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

#: bytes per chunk: large enough for polars to amortise, small enough to bound memory
CHUNK_BYTES = 32 * 1024 * 1024
#: ANSI colour and cursor sequences (torchtitan colours its step lines)
ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"
#: a launcher's per-rank prefix: torchrun's ``[default3]:`` / ``[rank3]:``, srun --label's
#: ``3:``, mpirun --tag-output's ``[1,3]<stdout>:``
LAUNCHER = r"(\[default\d+\]|\[rank\d+\]|\[\d+,\d+\]<std(?:out|err)>|(?:^|\s)\d+:(?:\s|$))"
#: a number as the readers capture it: signed, thousands commas, exponent, or nan/inf
NUM = r"([-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|(?i:nan|inf)))"


@dataclass(frozen=True)
class Chunk:
    """A piece of the file that ends at a line end (or the file's end): its ``lines`` (columns
    ``n``, the 1-based line number in the file, and ``line``), whether its bytes were not all
    UTF-8, and whether it is the last one and its last line has no line end."""

    lines: pl.DataFrame
    bad_utf8: bool
    unterminated_last: bool


def chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """The file's lines, chunk by chunk, each chunk cut at its last newline."""
    first_line = 1
    carry = b""
    with path.open("rb") as handle:
        while True:
            block = handle.read(chunk_bytes)
            data = carry + block
            if not block:
                if data:
                    yield _chunk(data, first_line, unterminated=True)
                return
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            body = data[:cut]
            yield _chunk(body, first_line, unterminated=False)
            first_line += body.count(b"\n") + 1
            del data, body


def _chunk(data: bytes, first_line: int, unterminated: bool) -> Chunk:
    try:
        text = data.decode("utf-8")
        bad = False
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        bad = True
    lines = (
        pl.DataFrame({"line": [text]})
        .select(pl.col("line").str.split("\n"))
        .explode("line")
        .with_row_index("n", offset=first_line)
        .with_columns(pl.col("n").cast(pl.Int64), pl.col("line").str.strip_suffix("\r"))
    )
    return Chunk(lines, bad, unterminated)


def launcher_expr(pre: pl.Expr) -> pl.Expr:
    """The launcher token in the text before a record (``"[default3]"``, ``"3"``,
    ``"[1,3]<stdout>"``), "" where there is none."""
    token = pre.str.extract(LAUNCHER, 1)
    return token.str.strip_chars().str.strip_suffix(":").fill_null("")


def rank_key(token: str) -> tuple[int, ...]:
    """Order of launcher tokens: by the numbers they hold (``[1,3]`` after ``[0,7]``)."""
    return tuple(int(number) for number in re.findall(r"\d+", token))


def pick_rank(
    samples: pl.DataFrame, what: str
) -> tuple[pl.DataFrame, str | None, tuple[str, ...], list[str]]:
    """The samples of the rank with the most ``what`` lines (ties: the lowest), that rank, every
    rank that logged them, and a note when other ranks' lines were left out."""
    counts = samples.group_by("rank").len()
    if counts.height <= 1:
        only = counts.get_column("rank").to_list()
        ranks = tuple(token for token in only if token)
        return samples, (ranks[0] if ranks else None), ranks, []
    ordered = sorted(counts.iter_rows(), key=lambda row: (-row[1], rank_key(row[0]), row[0]))
    chosen = ordered[0][0]
    ranks = tuple(sorted((row[0] for row in ordered if row[0]), key=rank_key))
    others = sum(row[1] for row in ordered[1:])
    note = (f"{what} lines of {len(ordered) - 1} other rank(s) left out ({others} lines): the "
            f"rank with the most, {chosen or 'unprefixed'}, used.")  # fmt: skip
    return samples.filter(pl.col("rank") == chosen), chosen or None, ranks, [note]


def last_run(samples: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The samples of the last run, after exact duplicates (the same line again: concatenated
    files, unprefixed ranks printing the same line) are dropped, in one note; then a restart
    (the iteration number going back or repeating, in line order) leaves only the last run's
    samples, said in one note however many restarts there were."""
    samples, notes = drop_duplicates(samples)
    iteration = samples.get_column("iteration")
    restart = (iteration.diff() <= 0).fill_null(False)
    count = int(restart.sum())
    if count == 0:
        return samples, notes
    start = int(restart.arg_true().item(-1))
    where = (f"line {samples.item(start, 'n')} (iteration {iteration.item(start - 1)} → "
             f"{iteration.item(start)})")  # fmt: skip
    if count == 1:
        notes.append(f"restart at {where}: {start} earlier sample(s) left out.")
    else:
        notes.append(f"{count} restarts; the last at {where}: {start} earlier samples left out.")
    return samples.slice(start), notes


def drop_duplicates(samples: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``samples`` without repeats of a sample (the same iteration and every value the same,
    whatever line it is on; the first kept), and a note counting them."""
    values = [name for name in samples.columns if name != "n"]
    unique = samples.unique(subset=values, keep="first", maintain_order=True)
    dropped = samples.height - unique.height
    if dropped == 0:
        return samples, []
    return unique, [f"{dropped} duplicated sample line(s) (the same iteration and values "
                    "again) left out."]  # fmt: skip


def iterations_covered(iteration: pl.Series, log_interval: int) -> pl.Series:
    """How many iterations each sample covers: the gap to the sample before, at most the log
    interval (a line missing from the log does not make the next one cover two intervals); the
    first sample: its iteration number, at most the log interval."""
    gap = iteration.diff().fill_null(iteration.head(1).item() if iteration.len() else 1)
    return gap.clip(1, log_interval).alias("iterations")
