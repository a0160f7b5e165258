"""nsys-ai's ``overlap`` on its plain-SQLite path, for every GPU of one export.

    <nsys-ai venv>/bin/python bench/nsysai_sqlite_path.py EXPORT.sqlite

Why not the CLI: ``nsys-ai overlap`` first tries DuckDB (a Parquet cache build, then a direct
``ATTACH … (TYPE SQLITE)``); both need DuckDB's ``sqlite_scanner`` extension, which DuckDB
downloads on first use, so without internet access every run first spends ~10–15 s failing
to download it and only then falls back to raw ``sqlite3`` (``parquet_cache.
open_with_direct_fallback`` → ``Profile.__init__`` keeps ``self.conn``, ``self.db = None``).
This script builds exactly that fallback state directly — ``Profile._from_conn`` on a
``sqlite3`` connection (what the fallback leaves behind: ``db`` is None, ``row_factory`` is
``sqlite3.Row``) — and calls the function the CLI's ``_cmd_overlap`` calls,
``nsys_ai.overlap.overlap_analysis(prof, device, trim)``, which with no DuckDB takes
``_overlap_analysis_python`` (``prof.kernels(device)`` + Python interval merge). ``trim=None``
reads the same rows as a ``--trim`` covering the whole trace. Prints one JSON object.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from importlib.metadata import version

from nsys_ai.overlap import overlap_analysis
from nsys_ai.profile import Profile


def main() -> None:
    t0 = time.perf_counter()
    conn = sqlite3.connect(sys.argv[1], check_same_thread=False)
    prof = Profile._from_conn(conn)
    results = {str(d): overlap_analysis(prof, d, None) for d in prof.meta.devices}
    print(
        json.dumps(
            {
                "version": version("nsys-ai"),
                "seconds_in_process": time.perf_counter() - t0,
                "devices": results,
            }
        )
    )


if __name__ == "__main__":
    main()
