"""The Parquet floor: polars reading, from a Parquet export folder, every column nsysmoe's
reader reads (of the tables there), nothing done with them — interpreter start and polars'
import included, as in every bench row.

    python bench/parquet_floor.py EXPORT_pqtdir/ [--named]

With ``--named``, also the one thing every reader of the export into per-row tables must make:
each kernel's and NVTX range's name as text (StringIds looked up by id, an NVTX range's inline
text where it has no id), in the same lazy query per table — a bound row, not a floor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

#: the columns nsysmoe's readers select from the big tables (nsysmoe.io.nsys_sqlite)
COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "globalPid", "demangledName", "shortName", "graphNodeId",
                                   "graphId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "eventClass", "globalTid", "correlationId",
                                    "nameId"],
    "NVTX_EVENTS": ["start", "end", "eventType", "text", "textId", "globalTid", "endGlobalTid",
                    "domainId"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "globalPid", "bytes", "copyKind"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "streamId", "correlationId",
                                   "globalPid", "bytes"],
    "StringIds": ["id", "value"],
}  # fmt: skip


def main() -> None:
    folder = Path(sys.argv[1])
    named = sys.argv[2:] == ["--named"]
    strings = pl.read_parquet(folder / "StringIds.parquet") if named else None
    rows = 0
    for table, wanted in COLUMNS.items():
        path = folder / f"{table}.parquet"
        if path.is_file():
            have = pl.read_parquet_schema(path)
            query = pl.scan_parquet(path).select([c for c in wanted if c in have])
            if strings is not None:
                query = with_names(query, table, strings)
            rows += query.collect().height
    print(rows)


def with_names(query: pl.LazyFrame, table: str, strings: pl.DataFrame) -> pl.LazyFrame:
    """The name columns of ``table``'s rows as text, in place of their ids."""

    def text(ids: str) -> pl.Expr:
        return pl.col(ids).replace_strict(
            strings["id"], strings["value"], default=None, return_dtype=pl.String
        )

    if table == "CUPTI_ACTIVITY_KIND_KERNEL":
        return query.with_columns(text("demangledName"), text("shortName"))
    if table == "NVTX_EVENTS":
        return query.with_columns(pl.coalesce(text("textId"), "text").alias("text"))
    return query


if __name__ == "__main__":
    main()
