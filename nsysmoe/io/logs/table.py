"""A plain table of steps: CSV (header required) or JSONL, columns ``step, step_time_s`` and,
where known, ``tflops``, ``loss`` (and any other :data:`LOG_SCHEMA` column by its name, e.g.
``tokens_per_s``, ``iterations``). A row is one iteration unless an ``iterations`` column says
how many it averages (a whole number, at least 1).

Streamed like the console logs (bounded chunks, true line numbers in the notes) and parsed with
vectorised polars string operations. A row that cannot be read (garbage, a JSON line that does
not parse, a value that is not a number, a whole number too large to read exactly, a step under
1, ``iterations`` under 1) is left out and counted, never fatal; an ``iterations`` larger than
the steps since the row before is that gap (noted). Two columns naming one field (``step`` and
``iteration``, a repeated header): the first is read, the other named in a note. A cut-off
last line is left out: in a JSONL one that does not parse; in a CSV any last row without a line
end, as nothing in a CSV row says it is complete (``81,0.`` would read as a 0 s step).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import console
from nsysmoe.io.logs.schema import (
    BAD_UTF8,
    CUT_LAST_LINE,
    LOG_SCHEMA,
    TrainingLog,
    common_gap,
    drop_nonpositive,
    sampling_of,
    to_schema,
)
from nsysmoe.io.redact import redact_text

EXPECTED = "a header line 'step,step_time_s[,tflops,loss]'"
RENAME = {"step": "iteration", "step_time_s": "step_s"}
#: the name in the file of each LOG_SCHEMA column
SOURCE = {column: name for name, column in RENAME.items()}
#: how many of the first lines say which JSONL keys there are
KEY_LINES = 1000
#: where a float stops holding every whole number
FLOAT_WHOLE = 2.0**53


def first_line(text: str) -> str:
    """The first line that is neither empty nor a ``#`` comment."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return ""


def looks_like_jsonl(text: str) -> bool:
    """Whether the first line is a JSON object with a ``step``."""
    try:
        row = json.loads(first_line(text))
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        return False
    return isinstance(row, dict) and "step" in row


def looks_like_csv(text: str) -> bool:
    """Whether the first line is a CSV header naming ``step`` (or a header-less CSV of numbers,
    which :func:`read_table` refuses with what it expects)."""
    line = first_line(text)
    fields = _fields(line)
    return len(fields) >= 2 and ("step" in fields or all(_is_number(f) for f in fields))


def _fields(line: str) -> list[str]:
    return [field.strip().strip('"').strip().lower() for field in line.split(",")]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(path: Path, kind: str, chunk_bytes: int = console.CHUNK_BYTES) -> TrainingLog:
    """Read a CSV (``kind`` "csv") or JSONL ("jsonl") of steps."""
    with path.open("rb") as handle:
        head = handle.read(65536).decode("utf-8", errors="replace")
    if kind == "csv":
        header = _fields(first_line(head))
        if "step" not in header or "step_time_s" not in header:
            shown = redact_text(first_line(head)[:80])
            raise NsysmoeError(f"{path}: a CSV needs {EXPECTED}; its first line is {shown!r}")
        keys = [n for n in header if RENAME.get(n, n) in LOG_SCHEMA]
    else:
        keys = _jsonl_keys(head)
        if "step" not in keys or "step_time_s" not in keys:
            found = ", ".join(redact_text(k) for k in keys[:8]) or "none"
            raise NsysmoeError(f"{path}: JSONL rows need 'step' and 'step_time_s' keys; "
                               f"found {found}")  # fmt: skip
        keys = [n for n in keys if RENAME.get(n, n) in LOG_SCHEMA]
    keys, ignored = _distinct(keys)
    parts: list[pl.DataFrame] = []
    counts = dict.fromkeys(("not_json", "no_step", "not_number", "too_big", "step", "iterations",
                            "cut"), 0)  # fmt: skip
    bad_columns: set[str] = set()
    bad_utf8 = False
    header_seen = kind != "csv"
    for chunk in console.chunks(path, chunk_bytes):
        bad_utf8 |= chunk.bad_utf8
        text = pl.col("line").str.strip_chars()
        lines = chunk.lines.filter((text != "") & ~text.str.starts_with("#"))
        if not header_seen and lines.height:
            lines, header_seen = lines.slice(1), True  # the header line
        if lines.height == 0:
            continue
        raw = _csv_raw(lines, header, keys) if kind == "csv" else _jsonl_raw(lines, keys)
        last = chunk.lines.item(-1, "n") if chunk.unterminated_last else None
        rows = _typed(raw, last, kind == "csv", counts, bad_columns)
        if rows.height:
            parts.append(rows)
    table = pl.concat(parts) if parts else pl.DataFrame()
    if table.height == 0:
        why = " ".join(_notes(counts, bad_columns))
        raise NsysmoeError(f"{path}: no rows with a step; expected {EXPECTED} and rows of numbers"
                           + (f" ({why.rstrip('.')})" if why else ""))  # fmt: skip
    table, notes = console.last_run(table)
    notes = ignored + notes + _notes(counts, bad_columns)
    if bad_utf8:
        notes.append(BAD_UTF8)
    if "iterations" not in table.columns:
        table = table.with_columns(pl.lit(1, dtype=pl.Int64).alias("iterations"))
    table = to_schema(table.with_columns(pl.col("iterations").fill_null(1)))
    table, over = _iterations_within_gaps(table)
    notes += over
    table, nonpositive = drop_nonpositive(table)
    notes += nonpositive
    log_interval = common_gap(table.get_column("iteration"))
    peak = table.get_column("mem_max_allocated_bytes").max()
    return TrainingLog(
        path=str(path), format="csv" if kind == "csv" else "jsonl", table=table, rank=None,
        ranks=(), log_interval=log_interval, sampling=sampling_of(table, log_interval),
        peak_memory_bytes=None if peak is None else int(peak),  # type: ignore[arg-type]
        config={}, notes=tuple(notes),
    )  # fmt: skip


def _distinct(keys: list[str]) -> tuple[list[str], list[str]]:
    """``keys`` without those that name a LOG_SCHEMA column an earlier key already names (a CSV
    with ``step`` and ``iteration``, a repeated header, a JSONL with ``step_time_s`` and
    ``step_s``): the first wins; and a note naming each key left out."""
    kept: dict[str, str] = {}
    notes: list[str] = []
    for key in keys:
        column = RENAME.get(key, key)
        if column in kept:
            notes.append(f"column {redact_text(key)!r} ignored: {kept[column]!r} before it "
                         "gives the same field (the first is read).")  # fmt: skip
        else:
            kept[column] = key
    return list(kept.values()), notes


def _iterations_within_gaps(table: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """``table`` with each ``iterations`` larger than the gap to the row before (the first row:
    its iteration number) set to that gap: a row cannot average iterations another row covers
    or that never ran; and a note counting them."""
    iteration = pl.col("iteration")
    gap = iteration.diff().fill_null(iteration)
    over = pl.col("iterations") > gap
    count = int(table.select(over.sum()).item())
    if count == 0:
        return table, []
    table = table.with_columns(pl.when(over).then(gap).otherwise(pl.col("iterations"))
                               .alias("iterations"))  # fmt: skip
    return table, [f"{count} row(s) with more iterations than the steps since the row before: "
                   "the gap to that row used."]  # fmt: skip


def _jsonl_keys(head: str) -> list[str]:
    """The keys of the JSON objects among the first lines, in first-seen order."""
    keys: dict[str, None] = {}
    for line in head.splitlines()[:KEY_LINES]:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            keys.update(dict.fromkeys(str(key) for key in row))
    return list(keys)


def _csv_raw(lines: pl.DataFrame, header: list[str], keys: list[str]) -> pl.DataFrame:
    """Columns ``n``, ``parsed`` (always true: a CSV row is text) and each key's field text
    (named by its LOG_SCHEMA column). Quotes around a field are dropped; extra fields ignored."""
    fields = pl.col("line").str.split(",")

    def field(key: str) -> pl.Expr:
        text = fields.list.get(header.index(key), null_on_oob=True).str.strip_chars()
        text = text.str.strip_chars('"').str.strip_chars()
        return pl.when(text != "").then(text).alias(RENAME.get(key, key))  # empty: null

    return lines.select("n", pl.lit(True).alias("parsed"), *(field(key) for key in keys))


def _jsonl_raw(lines: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Columns ``n``, ``parsed`` (the line is a JSON object) and each key's value as text (null
    where the key is absent or null, or the line does not parse)."""
    line = pl.col("line").str.strip_chars()
    raw = lines.select(
        "n", line.alias("line"),
        *(line.str.json_path_match(f"$.{key}").alias(RENAME.get(key, key)) for key in keys),
    )  # fmt: skip
    no_step = raw.get_column("iteration").is_null()
    if not no_step.any():
        return raw.drop("line").with_columns(pl.lit(True).alias("parsed"))
    # only the lines without a step are parsed again, to tell garbage from an object lacking one
    whole = pl.col("line").str.json_path_match("$").str.starts_with("{").fill_null(False)
    parsed = raw.filter(no_step).select("n", whole.alias("parsed"))
    raw = raw.drop("line").join(parsed, on="n", how="left", maintain_order="left")
    return raw.with_columns(pl.col("parsed").fill_null(True))


def _typed(
    raw: pl.DataFrame, last: int | None, csv: bool, counts: dict[str, int], bad_columns: set[str]
) -> pl.DataFrame:
    """The rows that read as numbers, typed to LOG_SCHEMA; the others counted in ``counts``
    (by why) and the columns whose text was not a number in ``bad_columns``. ``last``: the line
    number of the file's last line where it has no line end."""
    columns = [c for c in raw.columns if c in LOG_SCHEMA]
    typed = raw.with_columns(_number(c) for c in columns)
    big = [_too_big(c) for c in columns if LOG_SCHEMA[c] == pl.Int64]
    wrong = {c: pl.col(c).is_not_null() & pl.col(f"_{c}").is_null() for c in columns}
    typed = typed.with_columns(
        pl.any_horizontal(*wrong.values(), pl.lit(False)).alias("_wrong"),
        *(v.alias(f"_wrong_{c}") for c, v in wrong.items()),
        pl.any_horizontal(*big, pl.lit(False)).alias("_big"),
    )
    cut = pl.lit(False) if last is None else (pl.col("n") == last)
    if not csv:
        cut = cut & (~pl.col("parsed") | pl.col("_wrong") | pl.col("_iteration").is_null())
    few = pl.col("_iterations") < 1 if "iterations" in columns else pl.lit(False)
    why = (pl.when(cut).then(pl.lit("cut")).when(~pl.col("parsed")).then(pl.lit("not_json"))
           .when(pl.col("_big")).then(pl.lit("too_big"))
           .when(pl.col("_iteration").is_null()).then(pl.lit("no_step"))
           .when(pl.col("_wrong")).then(pl.lit("not_number"))
           .when(pl.col("_iteration") < 1).then(pl.lit("step"))
           .when(few).then(pl.lit("iterations")))  # fmt: skip
    typed = typed.with_columns(why.alias("_why"))
    for reason, count in typed.get_column("_why").drop_nulls().value_counts().iter_rows():
        counts[reason] += count
    flagged = typed.filter(pl.col("_why") == "not_number")
    bad_columns.update(c for c in columns if flagged.get_column(f"_wrong_{c}").any())
    good = typed.filter(pl.col("_why").is_null())
    return good.select("n", *(pl.col(f"_{c}").alias(c) for c in columns))


def _number(column: str) -> pl.Expr:
    """``column``'s text as its LOG_SCHEMA type in ``_column`` (null where it is not one):
    integers must be whole numbers (``2.0`` reads as 2), JSON's ``null`` and an empty field
    read as null upstream."""
    text = pl.col(column).str.strip_chars()
    value = text.cast(pl.Float64, strict=False)
    if LOG_SCHEMA[column] == pl.Int64:  # exact from the digits; else a float that holds it exactly
        exact = _whole(value) & (value.abs() < FLOAT_WHOLE)
        value = pl.coalesce(text.cast(pl.Int64, strict=False),
                            pl.when(exact).then(value).otherwise(None).cast(pl.Int64))  # fmt: skip
    return value.alias(f"_{column}")


def _whole(value: pl.Expr) -> pl.Expr:
    return value.is_finite() & (value == value.floor())


def _too_big(column: str) -> pl.Expr:
    """Whether a whole-number column's text is a whole number it cannot hold (2**63 and over,
    or a float of 2**53 and over, which no longer holds every whole number)."""
    value = pl.col(column).str.strip_chars().cast(pl.Float64, strict=False)
    return pl.col(f"_{column}").is_null() & _whole(value)


def _notes(counts: dict[str, int], bad_columns: set[str]) -> list[str]:
    """One sentence per reason rows were left out."""
    notes: list[str] = []
    if counts["cut"]:
        notes.append(CUT_LAST_LINE)
    if counts["not_json"]:
        notes.append(f"{counts['not_json']} line(s) that are not a JSON object left out.")
    if counts["no_step"]:
        notes.append(f"{counts['no_step']} row(s) without a step number left out.")
    if counts["not_number"]:
        names = ", ".join(sorted(SOURCE.get(c, c) for c in bad_columns))
        notes.append(f"{counts['not_number']} row(s) with a value that is not a number "
                     f"({names}) left out.")  # fmt: skip
    if counts["too_big"]:
        notes.append(f"{counts['too_big']} row(s) with a whole number too large to read exactly "
                     "(2**63 or over, or a float of 2**53 or over) left out.")  # fmt: skip
    if counts["step"]:
        notes.append(f"{counts['step']} row(s) with a step under 1 left out.")
    if counts["iterations"]:
        notes.append(f"{counts['iterations']} row(s) with iterations under 1 left out.")
    return notes
