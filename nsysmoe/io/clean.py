"""One cleaning policy for every reader: which interval rows are left out, and how that is said.

A row is left out, under the first reason that applies, when its start or end is missing (NULL,
not an integer, or beyond int64), when a GPU row names no device or process (it belongs to no
GPU) or a CPU row no process (a CUDA call or NVTX range of no thread: no iteration, no launch
and no rank can be told from it), when it ends before it starts, or when it starts before the
capture (start < 0). Every
reason is counted in ``Trace.dropped`` and each nonzero count becomes one warning, so no row ever
vanishes silently. Readers keep their own vocabulary for the inverted case (nsys: ``end <
start``, Kineto: ``dur < 0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from nsysmoe.errors import NsysmoeError

MISSING = "with a missing or non-integer start/end"
NO_DEVICE = "without a device or process"
NO_PROCESS = "without a process"
BEFORE = "starting before the capture (start < 0)"


def drop_invalid(
    df: pl.DataFrame,
    what: str,
    dropped: dict[str, int],
    *,
    gpu: bool,
    inverted: str = "end < start",
    among: pl.Expr | None = None,
) -> pl.DataFrame:
    """``df`` without its invalid rows; ``dropped[f"{what} rows {reason}"]`` counts each reason
    (every reason gets a key, zero included, so a report can say nothing was left out). With
    ``among``, only the rows it marks are ``what`` rows: the others are left out uncounted, in
    the same pass (one copy of a big table, not two)."""
    start, end = pl.col("start"), pl.col("end")
    conditions = [(MISSING, start.is_null() | end.is_null())]
    if gpu:
        conditions.append((NO_DEVICE, pl.col("device").is_null() | pl.col("pid").is_null()))
    elif "pid" in df.columns:
        conditions.append((NO_PROCESS, pl.col("pid").is_null()))
    conditions += [(f"with {inverted}", end < start), (BEFORE, start < 0)]
    code = pl.when(conditions[0][1]).then(pl.lit(0, pl.Int8))
    for i, (_, cond) in enumerate(conditions[1:], start=1):
        code = code.when(cond).then(pl.lit(i, pl.Int8))
    code = code.otherwise(pl.lit(None, pl.Int8))
    if among is not None:
        code = pl.when(among).then(code).otherwise(pl.lit(-1, pl.Int8))
    codes = df.select(code.alias("code"))["code"]
    counts = dict(codes.drop_nulls().value_counts().iter_rows())
    for i, (reason, _) in enumerate(conditions):
        dropped[f"{what} rows {reason}"] = int(counts.get(i, 0))
    if not counts:  # nothing to leave out (the rule): no copy of the table
        return df
    return df.filter(codes.is_null())


@dataclass
class Notes:
    """What a read left out (by reason) and what else a user should hear about it."""

    dropped: dict[str, int] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)  # warnings that are not dropped rows
    replaced: int = 0  # strings with invalid UTF-8 bytes, shown with U+FFFD
    mixed: set[str] = field(default_factory=set)  # tables with non-integers in integer columns
    quiet: tuple[str, ...] = ()  # dropped keys that are expected, so they never warn

    def merged(self, other: Notes) -> Notes:
        return Notes(
            {**self.dropped, **other.dropped},
            self.said + other.said,
            self.replaced + other.replaced,
            self.mixed | other.mixed,
            self.quiet + other.quiet,
        )

    def warnings(self) -> tuple[str, ...]:
        out = [*warnings_for(self.dropped, quiet=self.quiet), *self.said]
        if self.mixed:
            tables = ", ".join(sorted(self.mixed))
            out.append(f"values that are not integers in integer columns of {tables} read as "
                       "missing")  # fmt: skip
        if self.replaced:
            out.append(f"{self.replaced} strings with invalid UTF-8 bytes shown with U+FFFD")
        return tuple(out)


def warnings_for(dropped: dict[str, int], *, quiet: tuple[str, ...] = ()) -> tuple[str, ...]:
    """One warning per nonzero count, in the order the counts were made (``quiet`` keys are
    counted but expected, so they never warn)."""
    return tuple(f"{n} {what} left out" for what, n in dropped.items() if n and what not in quiet)


def reasons_text(dropped: dict[str, int], what: str) -> str:
    """``"3 with a missing or non-integer start/end, 1 with end < start"`` for ``what``'s rows."""
    prefix = f"{what} rows "
    parts = [
        f"{n} {k.removeprefix(prefix)}" for k, n in dropped.items() if n and k.startswith(prefix)
    ]
    return ", ".join(parts)


def all_invalid(path: object, total: int, what: str, reasons: str, hint: str) -> NsysmoeError:
    """The error for a table whose rows were all left out: it names why, rather than letting the
    analysis say there were no kernels at all."""
    return NsysmoeError(f"{path}: all {total} {what} were invalid ({reasons}); {hint}")


_C = "[89ab][0-9a-f]"  # a continuation byte 80-BF, as two hex digits
#: well-formed UTF-8 (RFC 3629, as Python's codec accepts it: no overlongs, no surrogates) as a
#: pattern over lowercase hex, so polars' linear-time engine validates a whole column at once
VALID_UTF8_HEX = (
    "^(?:[0-7][0-9a-f]"
    f"|c[2-9a-f]{_C}|d[0-9a-f]{_C}"
    f"|e0[ab][0-9a-f]{_C}|e[1-9a-cef]{_C}{_C}|ed[89][0-9a-f]{_C}"
    f"|f0[9ab][0-9a-f]{_C}{_C}|f[1-3]{_C}{_C}{_C}|f48[0-9a-f]{_C}{_C}"
    ")*$"
)


def decode_text(raw: pl.Series) -> tuple[pl.Series, int]:
    """Binary → String, invalid UTF-8 shown with U+FFFD, and how many values needed that.

    Text is read as bytes because invalid UTF-8 in an Arrow string column makes polars panic
    (a BaseException no ``except Exception`` stops). Well-formed columns, the rule, are one
    strict cast; otherwise the bad values are found in one vectorised pass and only they are
    decoded in Python.
    """
    try:
        return raw.cast(pl.String), 0
    except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
        pass
    valid = raw.bin.encode("hex").str.contains(VALID_UTF8_HEX).fill_null(True)
    good, bad = valid.arg_true(), (~valid).arg_true()
    fixed = [b.decode("utf-8", "replace") for b in raw.gather(bad).to_list()]
    parts = pl.concat([  # gathered anew: the cast checks a column's whole byte buffer
        pl.DataFrame({"i": good, "text": raw.gather(good).cast(pl.String)}),
        pl.DataFrame({"i": bad, "text": pl.Series(fixed, dtype=pl.String)}),
    ])
    return parts.sort("i")["text"].alias(raw.name), len(bad)
