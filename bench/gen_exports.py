"""Write large nsys 2024.5.1 (schema 3.13.2) SQLite exports of an MoE training run, fast.

Tables are created by executing the CREATE TABLE statements of a real export
(``tests/fixtures/ddl/real-nsys-2024.5.1-schema3.13.2.sql``, plus NVTX_EVENTS and MEMSET from
``…-extra.sql``, copied from another export by the same exporter) and the ENUM rows of a real
export; like a lazy export, only tables that get rows are created. Every timestamp is built with
numpy for all iterations at once from one iteration's template (``template.py``); rows go in with
``executemany`` under ``journal_mode=OFF, synchronous=OFF``.

Faithfulness (schema doc §10): StringIds from 0 '[Unknown]'; runtime names with ``_vNNNN``
suffixes (eventClass 0) and driver calls (eventClass 1, NCCL's ``cuLaunchKernelEx``);
correlationIds restart per process; globalPid = (1<<48)|(pid<<24), globalTid = globalPid|tid;
NVTX names inline (``text``: PyTorch ops, HybridEP phases, iterations) or registered
(``textId``: NCCL, in a domain created first); kernel start ≥ its launch call's end; no overlap
on one stream; rows sorted by start.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from catalog import K
from numpy.typing import NDArray
from template import MAX_DEPTH, NCCL_DOMAIN, Template, build

REPO = Path(__file__).resolve().parents[1]
DDL_DIR = REPO / "tests" / "fixtures" / "ddl"
DDL_FILES = ("real-nsys-2024.5.1-schema3.13.2.sql", "real-nsys-2024.5.1-schema3.13.2-extra.sql")
ENUM_FILE = "enums-nsys-2024.5.1-schema3.13.2.sql"
EXPORTER = "2024.5.1.113"
GENERATOR_VERSION = 3  # bump when the output changes, so cached exports are rebuilt

VM_ID = 1 << 48
STREAMS = {"compute": 7, "copy": 13, "ep": 21, "nccl": 29}
SLACK_NS = 2300  # CPU time between two slots; > 2 × the widest NVTX widening (depth 0)
WIDEN_NS = 100  # an NVTX range at depth d starts/ends (MAX_DEPTH - d) × this before/after
ITER_GAP_NS = (20_000, 45_000)  # host time between an iteration's sync and the next one
LAUNCH_LATENCY_NS = (2_500, 6_000)  # API end -> earliest GPU start
STREAM_GAP_NS = (800, 2_500)  # idle between two ops on one stream
T0_NS = 1_250_000_000  # first iteration (the capture started earlier)
INFLATION = 1.07  # GEMM/attention slow-down while an EP kernel runs beside it (overlap on)

I64 = NDArray[np.int64]
_CREATE = re.compile(r"^CREATE TABLE (\w+) \(.*?\);[ \t]*$", re.S | re.M)


def global_pid(pid: int) -> int:
    return VM_ID | (pid << 24)


@dataclass(frozen=True)
class ExportParams:
    """What an export holds; the cache key of the generated file."""

    processes: int
    kernels_per_process: int
    layers: int
    dispatcher: str  # "hybridep" | "deepep"
    overlap: bool
    seed: int
    first_pid: int = 2_814_305
    first_device: int = 0
    op_every: int = 1  # one PyTorch op range (`…, op_id = N`) in this many is recorded

    def key(self) -> dict[str, Any]:
        return {"generator": GENERATOR_VERSION, **asdict(self)}


# --------------------------------------------------------------------------------------------
# strings and schema


class Strings:
    """StringIds interning; id 0 is '[Unknown]' as in every real export."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {"[Unknown]": 0}

    def id(self, value: str) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.ids)
        return found

    def rows(self) -> list[tuple[int, str]]:
        return [(i, v) for v, i in self.ids.items()]


def ddl_statements() -> dict[str, str]:
    statements: dict[str, str] = {}
    for name in DDL_FILES:
        for match in _CREATE.finditer((DDL_DIR / name).read_text()):
            statements.setdefault(match.group(1), match.group(0))
    return statements


def _insert(conn: sqlite3.Connection, table: str, columns: Sequence[str], rows: Iterable) -> None:
    marks = ", ".join("?" for _ in columns)
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


# --------------------------------------------------------------------------------------------
# timeline of one process


@dataclass
class Timeline:
    """Times of one process, shape (iterations, slots); gpu_* only where a GPU op is. Relative
    to each iteration's origin until :meth:`place` makes them absolute."""

    cpu_start: I64
    cpu_end: I64
    gpu_start: I64
    gpu_end: I64
    length: I64  # host time from an iteration's origin to the next one's (shape (iterations,))

    def place(self, origin: I64) -> Timeline:
        gpu = self.gpu_end > 0
        at = origin[:, None]
        return Timeline(
            self.cpu_start + at,
            self.cpu_end + at,
            np.where(gpu, self.gpu_start + at, 0),
            np.where(gpu, self.gpu_end + at, 0),
            self.length,
        )


def simulate(t: Template, iterations: int, overlap: bool, rng: np.random.Generator) -> Timeline:
    """Host and GPU times of every slot of every iteration, relative to the iteration's origin;
    loops over slots only, vectorised over iterations."""
    n, s = iterations, len(t.slots)
    api_ns = np.array([x.api_ns for x in t.slots], dtype=np.int64)
    api = (api_ns * rng.uniform(1.0, 1.12, (n, s))).astype(np.int64)
    step = api + SLACK_NS
    cpu_start = np.cumsum(step, axis=1) - step + MAX_DEPTH * WIDEN_NS
    cpu_end = cpu_start + api
    gpu_start = np.zeros((n, s), dtype=np.int64)
    gpu_end = np.zeros((n, s), dtype=np.int64)
    tail = {name: np.zeros(n, dtype=np.int64) for name in STREAMS}
    inflate_until = np.zeros(n, dtype=np.int64)
    for k, slot in enumerate(t.slots):
        if slot.kind == "sync":
            busy = np.maximum.reduce(list(tail.values()))
            cpu_end[:, k] = np.maximum(cpu_end[:, k], busy + 1500)
            continue
        if slot.kind not in ("kernel", "memcpy", "memset"):
            continue
        comm = slot.stream in ("ep", "nccl")
        ready = cpu_end[:, k] + rng.integers(*LAUNCH_LATENCY_NS, n)
        sigma = 0.12 if comm else 0.04
        dur = np.maximum(slot.dur_ns * rng.lognormal(0.0, sigma, n), 1000).astype(np.int64)
        if comm:  # the comm stream waits (event) for the compute work queued before it
            start = np.maximum.reduce([tail[slot.stream], ready, tail["compute"]])
        else:
            start = np.maximum(tail[slot.stream], ready)
        if overlap and slot.inflate:
            dur = np.where(start < inflate_until, (dur * INFLATION).astype(np.int64), dur)
        end = start + dur
        tail[slot.stream] = end + rng.integers(*STREAM_GAP_NS, n)
        if slot.stream == "copy" or slot.wait == "always" or (slot.wait == "off" and not overlap):
            tail["compute"] = np.maximum(tail["compute"], end + rng.integers(*STREAM_GAP_NS, n))
        elif slot.wait == "off":
            inflate_until = np.maximum(inflate_until, end)
        gpu_start[:, k], gpu_end[:, k] = start, end
    length = cpu_end[:, -1] + rng.integers(*ITER_GAP_NS, n)
    return Timeline(cpu_start, cpu_end, gpu_start, gpu_end, length)


def origins(lengths: list[I64]) -> I64:
    """Common iteration origins of all processes: the collectives at the end of a step hold
    every rank until the slowest one arrives, so step i+1 starts together on every rank."""
    longest = np.max(np.stack(lengths), axis=0)
    return T0_NS + np.concatenate(([0], np.cumsum(longest)[:-1])).astype(np.int64)


# --------------------------------------------------------------------------------------------
# rows


class Rows:
    """Column lists of every event table, appended per process, sorted by start at the end."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, list[Any]]] = {}

    def add(self, table: str, columns: dict[str, Any]) -> None:
        out = self.tables.setdefault(table, {c: [] for c in columns})
        for name, values in columns.items():
            out[name].append(values)

    def sorted(self, table: str) -> tuple[list[str], Iterable[tuple]]:
        cols = self.tables[table]
        merged: dict[str, Any] = {}
        for name, parts in cols.items():
            if isinstance(parts[0], np.ndarray):
                merged[name] = np.concatenate(parts)
            else:
                merged[name] = [v for part in parts for v in part]
        order = np.argsort(merged["start"], kind="stable")
        lists = []
        for values in merged.values():
            if isinstance(values, np.ndarray):
                lists.append(values[order].tolist())
            else:
                lists.append([values[i] for i in order.tolist()])
        return list(cols), zip(*lists, strict=True)


def _lookup(t: Template, idx: I64, fn: Any) -> I64:
    table = np.array([fn(t.slots[k]) for k in range(len(t.slots))], dtype=np.int64)
    return table[idx]


def process_rows(
    rows: Rows,
    strings: Strings,
    t: Template,
    tl: Timeline,
    pid: int,
    device: int,
    first_iteration: int,
    op_every: int = 1,
) -> None:
    """Kernel, memcpy, memset, runtime and NVTX rows of one process; ``op_every``: one PyTorch
    op range in this many is written (op ids stay those of a run that recorded them all)."""
    n, s = tl.cpu_start.shape
    gpid = global_pid(pid)
    tids = np.array([gpid | pid, gpid | (pid + 113)], dtype=np.int64)  # main, autograd thread
    kinds = [x.kind for x in t.slots]
    has_api = np.array([k != "cpu" for k in kinds])
    api_index = np.cumsum(has_api) - 1  # correlation ids count API calls, per process
    n_api = int(has_api.sum())
    corr = 117 + np.arange(n)[:, None] * n_api + api_index[None, :]
    iters = np.broadcast_to(np.arange(n)[:, None], (n, s))
    slots = np.broadcast_to(np.arange(s)[None, :], (n, s))

    def pick(mask_1d: NDArray[np.bool_]) -> tuple[I64, I64]:
        m = np.broadcast_to(mask_1d[None, :], (n, s))
        return iters[m], slots[m]

    # runtime API rows
    i, k = pick(has_api)
    rows.add(
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        {
            "start": tl.cpu_start[i, k],
            "end": tl.cpu_end[i, k],
            "eventClass": _lookup(t, k, lambda x: x.api_class),
            "globalTid": tids[_lookup(t, k, lambda x: x.thread)],
            "correlationId": corr[i, k],
            "nameId": _lookup(t, k, lambda x: strings.id(x.api) if x.api else 0),
            "returnValue": np.zeros(len(i), dtype=np.int64),
        },
    )

    # kernels
    i, k = pick(np.array([x == "kernel" for x in kinds]))
    per_slot = {  # per kernel slot constants, looked up by slot index
        "streamId": _lookup(t, k, lambda x: STREAMS.get(x.stream, 0)),
        "demangledName": _lookup(t, k, lambda x: strings.id(K[x.kernel].name) if x.kernel else 0),
        "shortName": _lookup(t, k, lambda x: strings.id(K[x.kernel].short) if x.kernel else 0),
        "registersPerThread": _lookup(t, k, lambda x: K[x.kernel].registers if x.kernel else 0),
        "gridX": _lookup(t, k, lambda x: K[x.kernel].grid[0] if x.kernel else 0),
        "gridY": _lookup(t, k, lambda x: K[x.kernel].grid[1] if x.kernel else 0),
        "gridZ": _lookup(t, k, lambda x: K[x.kernel].grid[2] if x.kernel else 0),
        "blockX": _lookup(t, k, lambda x: K[x.kernel].block[0] if x.kernel else 0),
        "blockY": _lookup(t, k, lambda x: K[x.kernel].block[1] if x.kernel else 0),
        "blockZ": _lookup(t, k, lambda x: K[x.kernel].block[2] if x.kernel else 0),
        "dynamicSharedMemory": _lookup(t, k, lambda x: K[x.kernel].dynamic_smem if x.kernel else 0),
    }
    count = len(i)
    zeros = np.zeros(count, dtype=np.int64)
    rows.add(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        {
            "start": tl.gpu_start[i, k],
            "end": tl.gpu_end[i, k],
            "deviceId": np.full(count, device),
            "contextId": np.ones(count, dtype=np.int64),
            "correlationId": corr[i, k],
            "globalPid": np.full(count, gpid),
            **per_slot,
            "gridId": np.arange(1, count + 1) + 40 * pid % 1000,
            "launchType": zeros,
            "cacheConfig": zeros,
            "staticSharedMemory": zeros,
            "localMemoryPerThread": zeros,
            "localMemoryTotal": np.full(count, 285_474_816),
            "sharedMemoryExecuted": per_slot["dynamicSharedMemory"] + 1024,
            "sharedMemoryLimitConfig": np.ones(count, dtype=np.int64),
        },
    )

    for kind, table in (
        ("memcpy", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("memset", "CUPTI_ACTIVITY_KIND_MEMSET"),
    ):
        i, k = pick(np.array([x == kind for x in kinds]))
        count = len(i)
        rows.add(
            table,
            {
                "start": tl.gpu_start[i, k],
                "end": tl.gpu_end[i, k],
                "deviceId": np.full(count, device),
                "contextId": np.ones(count, dtype=np.int64),
                "streamId": _lookup(t, k, lambda x: STREAMS.get(x.stream, 0)),
                "correlationId": corr[i, k],
                "globalPid": np.full(count, gpid),
                "bytes": np.full(count, 16 << 20 if kind == "memcpy" else 512 << 20),
                **(
                    {
                        "copyKind": np.full(count, 1),
                        "srcKind": np.full(count, 1),  # HtoD, pinned
                        "dstKind": np.full(count, 2),
                    }
                    if kind == "memcpy"
                    else {"value": np.zeros(count, dtype=np.int64), "memKind": np.full(count, 2)}
                ),
            },
        )

    # NVTX: the NCCL domain is created first, then the ranges of every iteration
    n_ops = sum(x.op for x in t.ranges)
    all_op_index = np.cumsum([x.op for x in t.ranges]) - 1
    kept = [not x.op or o % op_every == 0 for x, o in zip(t.ranges, all_op_index, strict=True)]
    ranges = [x for x, keep in zip(t.ranges, kept, strict=True) if keep]
    op_index = all_op_index[np.array(kept)]
    r = len(ranges)
    first = np.array([x.first for x in ranges])
    last = np.array([x.last for x in ranges])
    widen = np.array([(MAX_DEPTH - x.depth) * WIDEN_NS for x in ranges], dtype=np.int64)
    starts = (tl.cpu_start[:, first] - widen).ravel()
    ends = (tl.cpu_end[:, last] + widen).ravel()
    thread = np.tile(tids[[x.thread for x in ranges]], n)
    texts: list[str | None] = []
    text_ids: list[int | None] = []
    for it in range(n):
        op_base = 1 + (first_iteration + it) * n_ops
        for x, o in zip(ranges, op_index.tolist(), strict=True):
            if x.registered:
                texts.append(None)
                text_ids.append(strings.id(x.text))
            elif x.op:
                texts.append(f"{x.text}, op_id = {op_base + o}")
                text_ids.append(None)
            else:
                texts.append(x.text.replace("{it}", str(first_iteration + it)))
                text_ids.append(None)
    domain = np.tile([x.domain for x in ranges], n)
    rows.add(
        "NVTX_EVENTS",
        {
            "start": np.concatenate(([tl.cpu_start[0, 0] - 5_000_000], starts)),
            "end": [None, *ends.tolist()],
            "eventType": np.concatenate(([75], np.full(n * r, 59))),
            "text": ["NCCL", *texts],
            "globalTid": np.concatenate(([tids[0]], thread)),
            "textId": [None, *text_ids],
            "domainId": np.concatenate(([NCCL_DOMAIN], domain)),
        },
    )


# --------------------------------------------------------------------------------------------
# one export file


def _metadata(label: str) -> list[tuple[str, str]]:
    rep, out = f"{label}.nsys-rep", f"{label}.sqlite"
    return [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", EXPORTER),
        ("EXPORT_PRODUCT_DATE", "2024.5"),
        ("EXPORT_SCHEMA_VERSION", "3.13.2"),
        ("EXPORT_SCHEMA_VERSION_MAJOR", "3"),
        ("EXPORT_SCHEMA_VERSION_MINOR", "13"),
        ("EXPORT_SCHEMA_VERSION_MICRO", "2"),
        ("EXPORT_SCHEMA_VERSION_CKSUM", "1271772049 158887"),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_HOST", "nsysmoe-bench"),
        ("EXPORT_PARAM_INPUT_FILE", rep),
        ("EXPORT_PARAM_OUTPUT_FILE", out),
        ("EXPORT_PARAM_LAZY", "true"),
    ]


def write_export(path: Path, params: ExportParams) -> dict[str, int]:
    """Generate ``path`` (replaced atomically); returns row counts per table."""
    template = build(params.layers, params.dispatcher)
    kernels_per_iter = sum(x.kind == "kernel" for x in template.slots)
    iterations = math.ceil(params.kernels_per_process / kernels_per_iter)
    strings = Strings()
    rows = Rows()
    timelines = [
        simulate(template, iterations, params.overlap, np.random.default_rng([params.seed, p]))
        for p in range(params.processes)
    ]
    origin = origins([tl.length for tl in timelines])
    procs = []
    for p, relative in enumerate(timelines):
        pid = params.first_pid + 17 * p
        device = (params.first_device + p) % 8
        tl = relative.place(origin)
        _check(template, tl)
        process_rows(rows, strings, template, tl, pid, device, first_iteration=1,
                     op_every=params.op_every)  # fmt: skip
        procs.append((pid, device))

    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    statements = ddl_statements()
    enum_sql = (DDL_DIR / ENUM_FILE).read_text()
    enum_tables = set(re.findall(r"^INSERT INTO (\w+) ", enum_sql, re.M))
    meta_tables = [
        "META_DATA_EXPORT",
        "PROCESSES",
        "ThreadNames",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_STREAM",
        "TARGET_INFO_SESSION_START_TIME",
        "ANALYSIS_DETAILS",
    ]
    wanted = {"StringIds", *rows.tables, *meta_tables, *enum_tables}
    counts: dict[str, int] = {}
    with conn:
        for name, sql in statements.items():
            if name in wanted:
                conn.execute(sql)
        conn.executescript(enum_sql)
        for table in rows.tables:
            columns, data = rows.sorted(table)
            _insert(conn, table, columns, data)
            counts[table] = sum(len(part) for part in rows.tables[table]["start"])
        _write_metadata(conn, strings, procs, path.stem)
        _insert(conn, "StringIds", ("id", "value"), strings.rows())
    conn.close()
    os.replace(tmp, path)
    return counts


def _write_metadata(
    conn: sqlite3.Connection, strings: Strings, procs: list[tuple[int, int]], label: str
) -> None:
    _insert(conn, "META_DATA_EXPORT", ("name", "value"), _metadata(label))
    _insert(
        conn,
        "PROCESSES",
        ("globalPid", "pid", "name"),
        [(global_pid(pid), pid, "python3") for pid, _ in procs],
    )
    threads = []
    for pid, _ in procs:
        threads.append((strings.id("python3"), 0, global_pid(pid) | pid))
        threads.append((strings.id("pt_autograd_0"), 0, global_pid(pid) | (pid + 113)))
    _insert(conn, "ThreadNames", ("nameId", "priority", "globalTid"), threads)
    devices = sorted({device for _, device in procs})
    _insert(
        conn,
        "TARGET_INFO_GPU",
        (
            "vmId",
            "id",
            "name",
            "busLocation",
            "isDiscrete",
            "totalMemory",
            "smCount",
            "cuDevice",
            "chipName",
            "computeMajor",
            "computeMinor",
        ),
        [
            (
                VM_ID,
                d,
                "NVIDIA H100 80GB HBM3",
                f"0000:{0x18 + 0x10 * d:02x}:00.0",
                1,
                85_045_510_144,
                132,
                d,
                "GH100",
                9,
                0,
            )
            for d in devices
        ],
    )
    _insert(
        conn,
        "TARGET_INFO_CUDA_STREAM",
        ("streamId", "hwId", "vmId", "processId", "contextId", "priority", "flag"),
        [
            (sid, 0, 1, pid, 1, 0, 1 if name == "compute" else 2)
            for pid, _ in procs
            for name, sid in STREAMS.items()
        ],
    )
    _insert(
        conn,
        "TARGET_INFO_SESSION_START_TIME",
        ("utcEpochNs", "utcTime", "localTime"),
        [(1_768_478_400_000_000_000, "2026-01-15T12:00:00", "2026-01-15T12:00:00")],
    )
    _insert(
        conn,
        "ANALYSIS_DETAILS",
        ("globalVid", "duration", "startTime", "stopTime"),
        [(VM_ID, 0, 0, 0)],
    )


def _check(t: Template, tl: Timeline) -> None:
    """The faithfulness rules the timeline must keep (cheap, vectorised)."""
    gpu = np.array([x.kind in ("kernel", "memcpy", "memset") for x in t.slots])
    assert np.all(tl.gpu_start[:, gpu] >= tl.cpu_end[:, gpu]), "GPU op starts before its launch"
    assert np.all(tl.gpu_end[:, gpu] > tl.gpu_start[:, gpu])
    for stream in STREAMS:
        cols = np.array([x.stream == stream and gpu[j] for j, x in enumerate(t.slots)])
        if cols.any():
            s, e = tl.gpu_start[:, cols].ravel(), tl.gpu_end[:, cols].ravel()
            order = np.argsort(s)
            assert np.all(s[order][1:] >= e[order][:-1]), f"overlap on stream {stream}"
    assert np.all(tl.cpu_start[1:, 0] > tl.cpu_end[:-1, -1]), "iterations overlap on the host"


# --------------------------------------------------------------------------------------------
# cache


def ensure(path: Path, params: ExportParams, meta: Path) -> tuple[bool, dict[str, int]]:
    """Generate ``path`` unless ``meta`` (its parameter sidecar, kept outside the trace
    directories so a directory of exports holds exports only) records the same parameters;
    (generated?, row counts). A sidecar an older bench left beside the file is moved to
    ``meta`` (when ``meta`` is missing) or deleted."""
    beside = path.with_suffix(".json")
    if beside.exists():
        if not meta.exists():
            meta.parent.mkdir(parents=True, exist_ok=True)
            os.replace(beside, meta)
        else:
            beside.unlink()
    if path.exists() and meta.exists():
        saved = json.loads(meta.read_text())
        if saved.get("params") == params.key():
            return False, saved["counts"]
    meta.unlink(missing_ok=True)  # a file being rebuilt has no valid sidecar
    counts = write_export(path, params)
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"params": params.key(), "counts": counts}, indent=1))
    return True, counts


Job = tuple[Path, ExportParams, Path]  # (export, its parameters, its sidecar)


def _ensure_star(job: Job) -> tuple[bool, dict[str, int]]:
    return ensure(*job)


def ensure_many(jobs: list[Job], workers: int) -> list[tuple[bool, dict[str, int]]]:
    """``ensure`` for many files, in ``workers`` processes (largest first, so one big file
    does not run alone at the end)."""
    if workers <= 1 or len(jobs) <= 1:
        return [ensure(*job) for job in jobs]
    from concurrent.futures import ProcessPoolExecutor

    def rows(i: int) -> int:
        return jobs[i][1].processes * jobs[i][1].kernels_per_process

    order = sorted(range(len(jobs)), key=rows, reverse=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(order, pool.map(_ensure_star, [jobs[i] for i in order]), strict=True))
    return [done[i] for i in range(len(jobs))]
