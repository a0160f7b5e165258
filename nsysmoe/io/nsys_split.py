"""Read an nsys SQLite export one process at a time, in memory bounded by a few chunks.

:func:`read_by_process` reads each big table (kernels, memory ops, CUDA API calls, NVTX ranges)
once, in rowid ranges of :data:`CHUNK_ROWS` rows (:meth:`~nsysmoe.io.nsys_db.Db.ranges`), each
range made canonical exactly as :func:`~nsysmoe.io.nsys_sqlite.read_nsys_sqlite` makes the whole
table (the same functions, the same cleaning), then split by process and written to a spill
folder as Arrow IPC files, each row with its position in the whole table. Ranges are decoded in
the reader pool, each worker on a connection of its own, and nothing but counts comes back, so
the memory of the read is that of the ranges being decoded (one per worker), whatever the size
of the file. :meth:`ByProcess.load <nsysmoe.io.processes.ByProcess.load>` then reads one
process's files back.

Everything a whole-table read computes over the whole table is kept whole: the dropped-row
counts and the unnamed counts are summed over the ranges (and said once), the "all kernel rows
invalid" check counts the whole table, NVTX domain names come from the domain-create rows, read
before any range, an unended range ends at the table's last time, and each table's StringIds
lookups go through one cache (:class:`_Strings`), so a string is read, and a string with invalid
UTF-8 counted, once per table as one lookup does.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from queue import SimpleQueue

import numpy as np
import polars as pl

from nsysmoe import model
from nsysmoe.io import export_tables
from nsysmoe.io.clean import Notes, drop_invalid
from nsysmoe.io.nsys_db import Db, opened
from nsysmoe.io.nsys_sqlite import (
    KERNEL_TABLE,
    NVTX_DOMAIN_CREATE,
    NVTX_TABLE,
    READERS,
    RUNTIME_TABLE,
    Strings,
    check_export,
    check_kernels,
    memop_tables,
    note_nvtx_unnamed,
    note_unnamed,
    nvtx_captured,
    nvtx_domains,
    nvtx_ranges,
    read_graph_rows,
    read_kernels,
    read_memop_table,
    read_nvtx_rows,
    read_runtime_rows,
    runtime_captured,
    small_tables,
)
from nsysmoe.io.processes import BIG_TABLES, ByProcess, Process
from nsysmoe.model import Trace

__all__ = ["CHUNK_ROWS", "read_by_process"]

#: rowids per range of a big table read at once (one range per worker is held in memory)
CHUNK_ROWS = 250_000
#: the spilled column holding each row's position among its range's rows
ROW = "_nsysmoe_row"
SCHEMAS = {"kernels": model.KERNEL_SCHEMA, "memops": model.MEMOP_SCHEMA,
           "runtime": model.RUNTIME_SCHEMA, "nvtx": model.NVTX_SCHEMA}  # fmt: skip
#: each big table's word in the dropped-row counts, and whether its rows are GPU rows
CLEANING = {"kernels": ("kernel", True), "memops": ("memory op", True),
            "runtime": ("CUDA API", False), "nvtx": ("NVTX range", False)}  # fmt: skip


def read_by_process(path: str | Path, spill_dir: str | Path) -> ByProcess:
    """The export at ``path`` as a :class:`~nsysmoe.io.processes.ByProcess`: ``shared`` is what
    :func:`~nsysmoe.io.nsys_sqlite.read_nsys_sqlite` gives with the big tables empty, and each
    process's big-table rows are read back from a new folder in ``spill_dir`` (the caller's:
    it removes ``spill_dir`` when done with the processes). The errors are the whole read's."""
    path, spill_dir = Path(path), Path(spill_dir)
    spill_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="split-", dir=spill_dir))
    try:
        with ThreadPoolExecutor(READERS) as pool, opened(path, pool) as db:
            check_export(db)
            with ExitStack() as stack:
                workers = [stack.enter_context(opened(path)) for _ in range(READERS)]
                split = _Split(db, pool, workers, _Spill(folder))
                shared = split.read()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    spill = split.spill
    pids = tuple(sorted(set().union(*(spill.pids[t] for t in BIG_TABLES))))
    return ByProcess(shared, pids, dict(spill.rows), partial(spill.process, shared))


@dataclass
class _Part:
    """What a worker hands back for one range: counts and file names, never rows."""

    read: int  # rows read, before cleaning
    files: dict[int, Path]  # each pid's spilled rows
    kept: int = 0  # rows kept
    notes: Notes = field(default_factory=Notes)  # the rows left out, by reason
    keys: pl.DataFrame | None = None  # the (pid, device) pairs of GPU rows
    unnamed: int = 0  # names not in StringIds


@dataclass
class _Spill:
    """The spilled rows: for each big table, its ranges in order, each with its first row's
    position in the whole table and its file per pid."""

    folder: Path
    chunks: dict[str, list[tuple[int, dict[int, Path]]]] = field(
        default_factory=lambda: {t: [] for t in BIG_TABLES})  # fmt: skip
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BIG_TABLES, 0))
    pids: dict[str, set[int]] = field(default_factory=lambda: {t: set() for t in BIG_TABLES})

    def write(self, table: str, index: int, df: pl.DataFrame) -> dict[int, Path]:
        """Write each pid's rows of range ``index`` (a row without a pid is in no process),
        with their positions among the range's rows."""
        df = df.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW))
        if df["pid"].has_nulls():
            df = df.filter(pl.col("pid").is_not_null())
        files = {}
        for (pid,), part in df.partition_by("pid", as_dict=True, maintain_order=True).items():
            files[pid] = self.folder / f"{table}.{index:06d}.{pid}.arrow"
            part.write_ipc(files[pid], compression="uncompressed")
        return files

    def add(self, table: str, part: _Part) -> None:
        """Record a range's files (ranges are added in table order)."""
        self.chunks[table].append((self.rows[table], part.files))
        self.rows[table] += part.kept
        self.pids[table].update(part.files)

    def process(self, shared: Trace, pid: int) -> Process:
        """``pid``'s rows of each big table, read back, and its part of the small ones."""
        big, order = {}, {}
        for table, schema in SCHEMAS.items():
            # scanned, so the files are read on every core; one chunk, as a whole read's
            parts = [pl.scan_ipc(files[pid]).with_columns(pl.col(ROW) + start)
                     for start, files in self.chunks[table] if pid in files]  # fmt: skip
            df = pl.concat(parts).collect().rechunk() if parts else pl.DataFrame(
                schema={**schema, ROW: pl.Int64})  # fmt: skip
            order[table] = df[ROW].to_numpy().astype(np.int64, copy=False)
            big[table] = df.drop(ROW).select(list(schema)).cast(schema)
        return Process(pid, replace(shared.only_processes([pid]), **big), order)


class _Strings:
    """The StringIds rows one table's ranges refer to, read once each: the same rows, and the
    same count of strings with invalid UTF-8 (:attr:`replaced`), as one lookup of the whole
    table's ids (:meth:`Db.strings`), which reads every StringIds row once the ids are more
    than :data:`~nsysmoe.io.export_tables.MAX_ID_LIST`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked = pl.Series("id", [], pl.Int64)
        self._known = pl.DataFrame(schema={"id": pl.Int64, "value": pl.String})
        self._whole = False
        self.replaced = 0

    def on(self, db: Db) -> Strings:
        """The lookup, reading through ``db`` (the calling worker's)."""
        return partial(self.lookup, db)

    def lookup(self, db: Db, ids: pl.Series) -> pl.DataFrame:
        unique = ids.drop_nulls().unique()
        with self._lock:
            new = unique.filter(~unique.is_in(self._asked.implode()))
            if len(new) and not self._whole:
                asked = pl.concat([self._asked, new])
                before = db.replaced
                if len(asked) > export_tables.MAX_ID_LIST:  # as the whole table's: every row
                    self._known, self._whole, self.replaced = db.string_rows(None), True, 0
                else:
                    self._known = pl.concat([self._known, db.string_rows(new)])
                self.replaced += db.replaced - before  # counted here, not by the worker's Db
                db.replaced = before
                self._asked = asked
            known = self._known
        return known.filter(pl.col("id").is_in(unique.implode()))


class _Split:
    """One split read: the big tables range by range on the workers, the rest on ``db``."""

    def __init__(self, db: Db, pool: Executor, workers: list[Db], spill: _Spill) -> None:
        self.db, self.pool, self.workers, self.spill = db, pool, workers, spill
        self._free: SimpleQueue[Db] = SimpleQueue()
        for worker in workers:
            self._free.put(worker)
        self.strings = {t: _Strings() for t in ("kernels", "runtime", "nvtx")}
        self._last_lock = threading.Lock()
        self._last: list[int | None] = []

    def read(self) -> Trace:
        """The shared trace (as :func:`read_nsys_sqlite` orders its notes and warnings)."""
        db, spill = self.db, self.spill
        meta = db.metadata()
        not_captured: dict[str, str] = {}
        notes = Notes()
        keys: list[pl.DataFrame] = []

        jobs = [partial(self._kernels, part) for part in db.ranges(KERNEL_TABLE, CHUNK_ROWS)]
        read = unnamed = 0
        for part in self._run("kernels", jobs, notes):
            read, unnamed = read + part.read, unnamed + part.unnamed
            keys.append(part.keys)
        check_kernels(db, read, spill.rows["kernels"], notes)
        note_unnamed(unnamed, spill.rows["kernels"], notes)
        graphs = read_graph_rows(db, notes)
        if graphs is not None:  # after the kernel rows, as one more range
            index = len(spill.chunks["kernels"])
            files = spill.write("kernels", index, graphs)
            spill.add("kernels", _Part(len(graphs), files, len(graphs)))
            keys.append(graphs.select("pid", "device").unique())

        jobs = [partial(self._memops, table, kind, part)
                for table, kind in memop_tables(db, not_captured)
                for part in db.ranges(table, CHUNK_ROWS)]  # fmt: skip
        keys += [part.keys for part in self._run("memops", jobs, notes)]

        jobs = []
        if runtime_captured(db, not_captured):
            jobs = [partial(self._runtime, part) for part in db.ranges(RUNTIME_TABLE, CHUNK_ROWS)]
        for _ in self._run("runtime", jobs, notes):
            pass

        trace = small_tables(db, meta, pl.concat(keys), not_captured, notes)
        not_captured = dict(trace.not_captured)

        nvtx_notes = Notes()
        if nvtx_captured(db, not_captured):
            domains = self._nvtx_domains()
            jobs = [partial(self._nvtx, domains, part)
                    for part in db.ranges(NVTX_TABLE, CHUNK_ROWS)]  # fmt: skip
            unnamed = sum(part.unnamed for part in self._run("nvtx", jobs, nvtx_notes))
            note_nvtx_unnamed(unnamed, nvtx_notes)
            if not spill.rows["nvtx"]:
                not_captured["nvtx"] = "no NVTX ranges in the export"

        dbs = [db, *self.workers]
        notes.replaced = sum(d.replaced_strings for d in dbs) + sum(
            s.replaced for s in self.strings.values())  # fmt: skip
        notes.mixed = set().union(*(d.mixed for d in dbs))
        notes = notes.merged(nvtx_notes)
        return replace(trace, not_captured=not_captured, warnings=notes.warnings(),
                       dropped=notes.dropped)  # fmt: skip

    def _run(
        self, table: str, jobs: list[Callable[[Db, int], _Part]], notes: Notes
    ) -> Iterator[_Part]:
        """Run a table's range jobs on the workers, recording each range's spill and adding up
        its dropped-row counts in range order; each :class:`_Part` is yielded in that order."""
        what, gpu = CLEANING[table]  # every key, zeros too, even for a table of no ranges
        drop_invalid(pl.DataFrame(schema=SCHEMAS[table]), what, notes.dropped, gpu=gpu)
        start = len(self.spill.chunks[table])
        futures = [self.pool.submit(self._on_worker, job, start + i) for i, job in enumerate(jobs)]
        try:
            for future in futures:
                part = future.result()
                for reason, n in part.notes.dropped.items():
                    notes.dropped[reason] += n
                self.spill.add(table, part)
                yield part
        finally:  # an error: no work left behind
            for future in futures:
                future.cancel()
            wait(futures)

    def _on_worker(self, job: Callable[[Db, int], _Part], index: int) -> _Part:
        db = self._free.get()
        try:
            return job(db, index)
        finally:
            self._free.put(db)

    def _spilled(self, table: str, index: int, df: pl.DataFrame, read: int, notes: Notes,
                 unnamed: int = 0) -> _Part:  # fmt: skip
        keys = df.select("pid", "device").unique() if "device" in df.columns else None
        files = self.spill.write(table, index, df)
        return _Part(read, files, len(df), notes, keys, unnamed)

    def _kernels(self, part: str, db: Db, index: int) -> _Part:
        raw = read_kernels(db, part, self.strings["kernels"].on(db))
        notes = Notes()
        kept = drop_invalid(raw, "kernel", notes.dropped, gpu=True)
        unnamed = int(kept["unnamed"].sum())
        return self._spilled("kernels", index, kept.drop("unnamed"), len(raw), notes, unnamed)

    def _memops(self, table: str, kind: str, part: str, db: Db, index: int) -> _Part:
        raw = read_memop_table(db, table, kind, part)
        notes = Notes()
        kept = drop_invalid(raw, "memory op", notes.dropped, gpu=True)
        return self._spilled("memops", index, kept, len(raw), notes)

    def _runtime(self, part: str, db: Db, index: int) -> _Part:
        raw = read_runtime_rows(db, part, self.strings["runtime"].on(db))
        notes = Notes()
        kept = drop_invalid(raw, "CUDA API", notes.dropped, gpu=False)
        return self._spilled("runtime", index, kept, len(raw), notes)

    def _nvtx_domains(self) -> pl.DataFrame:
        """The domain names of the whole table, from its domain-create rows, read on a
        connection of their own (what they count is counted again with their ranges)."""
        with opened(self.db.path, self.pool) as side:
            df, strings = read_nvtx_rows(side, types=(NVTX_DOMAIN_CREATE,))
            return nvtx_domains(df, strings)

    def _nvtx(self, domains: pl.DataFrame, part: str, db: Db, index: int) -> _Part:
        df, strings = read_nvtx_rows(db, part, self.strings["nvtx"].on(db))
        ranges, unnamed = nvtx_ranges(df, strings, domains, partial(self._last_time, db))
        read = len(df)
        del df
        notes = Notes()
        among = pl.col("is_range")
        ranges = drop_invalid(ranges, "NVTX range", notes.dropped, gpu=False, among=among)
        ranges = ranges.select(list(model.NVTX_SCHEMA)).cast(model.NVTX_SCHEMA)
        return self._spilled("nvtx", index, ranges, read, notes, unnamed)

    def _last_time(self, db: Db) -> int | None:
        """The NVTX table's last time (a full scan: once, and only where a range is unended)."""
        with self._last_lock:
            if not self._last:
                self._last.append(db.last_time(NVTX_TABLE))
            return self._last[0]
