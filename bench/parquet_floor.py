"""The Parquet floor: polars reading, from a Parquet export folder, every column nsysmoe's
reader reads (of the tables there), nothing done with them — interpreter start and polars'
import included, as in every bench row.

    python bench/parquet_floor.py EXPORT_pqtdir/
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
    rows = 0
    for table, wanted in COLUMNS.items():
        path = folder / f"{table}.parquet"
        if path.is_file():
            have = pl.read_parquet_schema(path)
            rows += pl.scan_parquet(path).select([c for c in wanted if c in have]).collect().height
    print(rows)


if __name__ == "__main__":
    main()
