"""nsys-ai's ``overlap`` on its Parquet path (``Profile(path, backend="parquetdir")``: DuckDB
over the ``<TABLE>.parquet`` files of an ``nsys export --type parquetdir`` folder), for every
GPU of one export — the path nsys-ai 0.3 takes by default (``.nsys-rep`` → parquetdir).

    <nsys-ai venv>/bin/python bench/nsysai_parquet_path.py EXPORT_pqtdir/

Calls what the CLI's ``overlap`` command calls, ``nsys_ai.overlap.overlap_analysis(prof,
device, None)`` (``trim=None``: the whole trace), per device. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version

from nsys_ai.overlap import overlap_analysis
from nsys_ai.profile import Profile


def main() -> None:
    t0 = time.perf_counter()
    prof = Profile(sys.argv[1], backend="parquetdir")
    results = {str(d): overlap_analysis(prof, d, None) for d in prof.meta.devices}
    print(json.dumps({"version": version("nsys-ai"), "backend": prof.backend,
                      "seconds_in_process": time.perf_counter() - t0, "devices": results}))


if __name__ == "__main__":
    main()
