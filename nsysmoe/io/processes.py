"""A trace split by process, so an analysis can hold one process's events at a time.

The four big tables (kernels, memory ops, CUDA API calls, NVTX ranges: millions of rows each) are
handed out one process at a time (:meth:`ByProcess.load`); everything else (GPUs, memory events,
synchronisation records, metadata, the reader's notes) is small and comes whole with
:attr:`ByProcess.shared`. A process's part is exactly ``trace.only_processes([pid])`` of the
trace read whole, and each of its big-table rows knows its position in the whole table
(:attr:`Process.order`), so a measure that depends on row order can put rows of several
processes back in the order the whole trace holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from nsysmoe.model import Trace

#: the tables handed out per process; the rest of a :class:`~nsysmoe.model.Trace` is shared
BIG_TABLES = ("kernels", "memops", "runtime", "nvtx")


@dataclass(frozen=True)
class Process:
    """One process's trace (``trace.only_processes([pid])`` of the whole) and, for each big
    table, the positions of its rows in the whole trace's table (int64, increasing)."""

    pid: int
    trace: Trace
    order: dict[str, np.ndarray]


@dataclass(frozen=True)
class ByProcess:
    """A trace whose big tables are read one process at a time.

    ``shared``: the whole trace with the big tables empty (their schemas kept); ``pids``: the
    processes with a row in any big table, sorted; ``rows``: each big table's row count in the
    whole trace; ``load``: a process's :class:`Process`."""

    shared: Trace
    pids: tuple[int, ...]
    rows: dict[str, int]
    _load: Callable[[int], Process]

    def load(self, pid: int) -> Process:
        return self._load(pid)

    @staticmethod
    def of(trace: Trace) -> ByProcess:
        """A trace already read whole, split by process (the reference the readers that split
        while reading are checked against, and the split of a trace given in memory)."""
        by_pid = {t: _rows_by_pid(getattr(trace, t)) for t in BIG_TABLES}
        pids = tuple(sorted(set().union(*by_pid.values())))
        shared = replace(trace, **{t: getattr(trace, t).clear() for t in BIG_TABLES})
        empty = np.zeros(0, np.int64)

        def load(pid: int) -> Process:
            order = {t: by_pid[t].get(pid, empty) for t in BIG_TABLES}
            small = trace.only_processes([pid])
            big = {t: getattr(trace, t)[order[t]] for t in BIG_TABLES}
            return Process(pid, replace(small, **big), order)

        return ByProcess(shared, pids, {t: len(getattr(trace, t)) for t in BIG_TABLES}, load)


def _rows_by_pid(df: pl.DataFrame) -> dict[int, np.ndarray]:
    """Each pid's row positions in ``df``, in table order; a row without a pid is in no
    process (as ``only_processes`` leaves it out; the readers leave such rows out of the trace,
    and count them: :mod:`nsysmoe.io.clean`)."""
    if df.is_empty():
        return {}
    groups = (df.select("pid", pl.int_range(pl.len(), dtype=pl.Int64).alias("row"))
              .drop_nulls("pid").group_by("pid").agg("row"))  # fmt: skip
    return {int(p): np.sort(r.to_numpy()) for p, r in zip(groups["pid"], groups["row"],
                                                          strict=True)}  # fmt: skip
