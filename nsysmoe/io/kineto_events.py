"""Kineto trace files to rows: the file read (gzip detected by content), the JSON decoded with
floats kept as text, and one pass over the events into plain row tuples and polars frames.

Kept apart from :mod:`nsysmoe.io.kineto` (which shapes the canonical tables) so the decoded
document, the memory peak, lives only inside :func:`frames`.

Hostile input is bounded: gzip is decompressed in chunks up to a cap (:data:`MAX_JSON_ENV`),
invalid UTF-8 inside strings becomes U+FFFD (counted), and a ``ts``/``dur`` that is not a number
of µs within ±2^62 ns (``1.5e99999``, ``"soon"``, missing) makes its event malformed (counted).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import polars as pl

from nsysmoe.errors import NsysmoeError

GZIP_MAGIC = b"\x1f\x8b"
#: Kineto ``cat`` → the row kind kept; anything else (python_function, ac2g flows, ...) is ignored
GPU_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
CPU_KINDS = {
    "cuda_runtime": "api",
    "cuda_driver": "api",
    "user_annotation": "range",
    "cpu_op": "range",
    "gpu_user_annotation": "gpu_annotation",
}
HINT = "pass a trace written by torch.profiler (export_chrome_trace or tensorboard_trace_handler)"
#: environment variable: the most bytes a gzip trace may decompress to
MAX_JSON_ENV = "NSYSMOE_MAX_JSON_BYTES"
MIN_CAP = 64 << 20  # the default cap: 50x the compressed size, at least 64 MiB
CAP_RATIO = 50  # real Kineto traces compress 13-18x
CHUNK = 8 << 20
#: |ns| must stay below this, so start + dur never overflows int64
LIMIT_NS = 1 << 62

GPU_ROW = {
    "kind": pl.String,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "dur": pl.Int64,
    "corr_id": pl.Int64,
    "name": pl.String,
    "bytes": pl.Int64,
    # the launch shape (nsysmoe.model.LAUNCH_SHAPE), kernels only: args grid, block,
    # "registers per thread", "shared memory"
    "blocks": pl.Int64,
    "threads": pl.Int64,
    "registers": pl.Int64,
    "shared_bytes": pl.Int64,
}
CPU_ROW = {
    "kind": pl.String,
    "os_pid": pl.Int64,
    "os_tid": pl.Int64,
    "start": pl.Int64,
    "dur": pl.Int64,
    "corr_id": pl.Int64,
    "name": pl.String,
}
MEMORY_ROW = {"device": pl.Int64, "start": pl.Int64, "total": pl.Int64, "device_type": pl.Int64}


def is_kineto(head: bytes) -> bool:
    """Gzip magic, or JSON text opening with ``{`` (after an optional BOM and whitespace); ``[``
    too, so a Chrome trace in JSON-array form is told it lacks ``traceEvents``, not that it is no
    SQLite file."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return head.startswith(GZIP_MAGIC) or text[:1] in (b"{", b"[")


def to_ns(us: int | str) -> int:
    """Exact ns from a Kineto µs value: a JSON int, or a JSON float's text (``parse_float=str``).

    ``"1694128201545123.456"`` → ``1694128201545123456``: the decimal point moves three places in
    the text, so no binary float ever rounds it. Digits beyond ns round half to even (Decimal).
    Anything else (text, ``1.5e99999``, beyond ±2^62 ns) raises ValueError or ArithmeticError,
    before any huge integer is built.
    """
    if type(us) is int:
        ns = us * 1000
    else:
        whole, _, frac = us.partition(".")
        if len(frac) <= 3 and frac.isdigit():
            ns = int(whole + frac.ljust(3, "0"))
        else:
            value = Decimal(us).scaleb(3)
            if not value.is_finite() or abs(value) >= LIMIT_NS:
                raise ValueError(f"{us[:40]} µs is no time")
            ns = int(value.to_integral_value(rounding=ROUND_HALF_EVEN))
    if not -LIMIT_NS < ns < LIMIT_NS:
        raise ValueError("time beyond ±2^62 ns")
    return ns


def frames(
    path: Path,
) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Header fields, the GPU/CPU/memory frames with well-formed ts/dur, and the malformed count.

    ``meta`` also holds ``malformed_kernels`` (malformed events that were kernels) and
    ``replaced`` (invalid UTF-8 sequences shown with U+FFFD). The row lists are dropped as soon
    as their frames exist, so at most one copy of the events is alive at a time.
    """
    meta, (gpu_rows, cpu_rows, memory_rows, malformed, bad_kernels) = _rows(path)
    gpu = frame(gpu_rows, GPU_ROW)
    cpu = frame(cpu_rows, CPU_ROW)
    memory = frame(memory_rows, MEMORY_ROW).drop_nulls("start")
    del gpu_rows, cpu_rows, memory_rows
    # ts/dur beyond int64 became null in _frame: malformed too
    valid = pl.col("start").is_not_null() & pl.col("dur").is_not_null()
    malformed += int(gpu.select((~valid).sum()).item() + cpu.select((~valid).sum()).item())
    bad_kernels += int(gpu.select((~valid & (pl.col("kind") == "kernel")).sum()).item())
    meta["malformed_kernels"] = bad_kernels
    return meta, gpu.filter(valid), cpu.filter(valid), memory, malformed


#: GPU, CPU and memory rows, the malformed events, the malformed kernel events
Scanned = tuple[list[tuple], list[tuple], list[tuple], int, int]


def _rows(path: Path) -> tuple[dict[str, Any], Scanned]:
    """The header fields read_kineto needs and the scanned rows; a function of its own so the
    decoded document (the big object) is freed on return, before any frame is built."""
    doc, replaced = _load(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise NsysmoeError(f"{path}: JSON without a traceEvents list, not a Kineto trace; {HINT}")
    info = doc.get("distributedInfo")
    meta = {
        "rank": info.get("rank") if isinstance(info, dict) else None,
        "props": doc.get("deviceProperties"),
        "schema_version": doc.get("schemaVersion"),
        # a synthetic trace names its generator: not a measurement (io.generated.generator)
        "generated_by": doc.get("generatedBy"),
        "system": _system(doc, info),
        "replaced": replaced,
    }
    return meta, _scan(events)


#: header fields of a Kineto trace -> the TARGET_INFO_SYSTEM_ENV-like name they are kept as
SYSTEM_FIELDS = {"backend": "DistributedBackend", "world_size": "WorldSize",
                 "nccl_version": "NcclVersion", "cuda_driver_version": "CudaDriverVersion",
                 "cuda_runtime_version": "CudaRuntimeVersion"}  # fmt: skip


def _system(doc: object, info: object) -> dict[str, str]:
    """What a Kineto trace says of its run (``distributedInfo`` and the CUDA versions of newer
    PyTorch), as text by the names nsys exports use."""
    out: dict[str, str] = {}
    for source in (info, doc):
        if isinstance(source, dict):
            for field, name in SYSTEM_FIELDS.items():
                value = source.get(field)
                if isinstance(value, str | int | float) and not isinstance(value, bool):
                    out.setdefault(name, str(value))
    return out


def _load(path: Path) -> tuple[Any, int]:
    """The decoded JSON document, floats kept as their text, and how many invalid UTF-8
    sequences became U+FFFD; every failure is one NsysmoeError."""
    try:
        text, replaced = _read_text(path)
    except FileNotFoundError:
        raise NsysmoeError(f"{path}: no such file; check the path") from None
    except IsADirectoryError:
        raise NsysmoeError(f"{path}: is a directory; pass a trace file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        reason = str(exc) or type(exc).__name__
        raise NsysmoeError(
            f"{path}: unreadable gzip ({reason}); the file is truncated or corrupt, copy it again"
        ) from None
    except OSError as exc:
        raise NsysmoeError(f"{path}: cannot read ({exc.strerror or exc}); check the file") from None
    try:
        return json.loads(text, parse_float=str), replaced
    except (ValueError, RecursionError) as exc:  # JSONDecodeError; an int of > 4300 digits
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NsysmoeError(f"{path}: not valid JSON ({reason}); the file is truncated or not a "
                           f"trace; {HINT}") from None  # fmt: skip


def _read_text(path: Path) -> tuple[str, int]:
    """Whole file as text, gunzipped when it starts with the gzip magic (suffixes lie), and the
    count of invalid UTF-8 sequences shown as U+FFFD (outside strings they fail as JSON).

    A function of its own so the compressed and decompressed bytes are freed on return, before
    the JSON objects exist.
    """
    if path.is_dir():
        raise IsADirectoryError(path)
    data = _read_bytes(path)
    try:
        return data.decode("utf-8-sig"), 0
    except UnicodeDecodeError:
        text = data.decode("utf-8-sig", "replace")
        return text, text.count("\ufffd") - data.count("\ufffd".encode())


def _read_bytes(path: Path) -> bytes | bytearray:
    """The file's bytes, gunzipped in chunks: a gzip bomb stops at the cap, not at RAM's end."""
    with path.open("rb") as fh:
        if fh.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
            fh.seek(0)
            return fh.read()
        fh.seek(0)
        limit, why = _cap(os.fstat(fh.fileno()).st_size)
        out = bytearray()
        with gzip.GzipFile(fileobj=fh) as gz:
            while chunk := gz.read(CHUNK):
                if len(out) + len(chunk) > limit:
                    raise NsysmoeError(
                        f"{path}: gzip data expands beyond {limit:,} bytes ({why}), which looks "
                        f"like a gzip bomb; if the trace is genuine, set {MAX_JSON_ENV} to a "
                        "larger number of bytes"
                    )
                out += chunk
        return out


def _cap(compressed: int) -> tuple[int, str]:
    """The most bytes a gzip trace may expand to, and where that limit comes from."""
    raw = os.environ.get(MAX_JSON_ENV)
    if raw is None or not raw.strip():
        limit = max(MIN_CAP, CAP_RATIO * compressed)
        return limit, f"the default limit: {CAP_RATIO}x the compressed size, at least 64 MiB"
    if not raw.strip().isdigit() or int(raw) <= 0:
        raise NsysmoeError(
            f"{MAX_JSON_ENV}={raw!r} is not a number of bytes; set it to a whole number such as "
            f"{4 << 30} (4 GiB), or unset it"
        )
    return int(raw), f"the limit set by {MAX_JSON_ENV}"


def _scan(events: list[Any]) -> Scanned:
    """One pass over the events: a tuple per kept event, the count of malformed ones and of the
    malformed ones that were kernels. A complete event (``"ph": "X"``) without ``dur`` is
    malformed: it has no length, not a zero one."""
    gpu: list[tuple] = []
    cpu: list[tuple] = []
    memory: list[tuple] = []
    malformed = bad_kernels = 0
    for ev in events:
        try:
            ph = ev.get("ph")
            if ph != "X":
                if ph == "i" and ev.get("name") == "[memory]":
                    a = ev["args"]
                    memory.append(
                        (a.get("Device Id"), to_ns(ev["ts"]), a["Total Allocated"],
                         a.get("Device Type"))
                    )  # fmt: skip
                continue
            cat = ev.get("cat")
            kind = GPU_KINDS.get(cat)
            if kind is not None:
                a = ev.get("args") or {}
                gpu.append(
                    (kind, a.get("device", ev.get("pid")), a.get("stream", ev.get("tid")),
                     to_ns(ev["ts"]), to_ns(ev["dur"]), a.get("correlation"),
                     ev.get("name"), a.get("bytes"), *_shape(a))
                )  # fmt: skip
                continue
            kind = CPU_KINDS.get(cat)
            if kind is not None:
                a = ev.get("args") or {}
                cpu.append(
                    (kind, ev.get("pid"), ev.get("tid"), to_ns(ev["ts"]), to_ns(ev["dur"]),
                     a.get("correlation"), ev.get("name"))
                )  # fmt: skip
        except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError):
            malformed += 1
            bad_kernels += type(ev) is dict and ev.get("cat") == "kernel" and ev.get("ph") == "X"
    return gpu, cpu, memory, malformed, bad_kernels


#: the most a grid or block dimension, a register count or a shared memory size can be
_DIMENSION = (1 << 31) - 1
_GRID = (_DIMENSION, 65535, 65535)


def _count(v: object, most: int = _DIMENSION) -> int | None:
    """A launch figure: an int in [0, most], else unknown."""
    return v if type(v) is int and 0 <= v <= most else None


def _shape(a: dict[str, Any]) -> tuple[int | None, ...]:
    """A kernel event's blocks, threads per block, registers per thread and shared memory per
    block from its args (None for any that is missing or not a launch's: a grid is a list of
    three ints within CUDA's limits)."""
    grid, block = a.get("grid"), a.get("block")
    blocks = threads = None
    if type(grid) is list and len(grid) == 3:
        dims = [_count(v, most) for v, most in zip(grid, _GRID, strict=True)]
        blocks = None if None in dims else dims[0] * dims[1] * dims[2]  # type: ignore[operator]
    if type(block) is list and len(block) == 3:
        dims = [_count(v) for v in block]
        product = None if None in dims else dims[0] * dims[1] * dims[2]  # type: ignore[operator]
        threads = _count(product)
    return blocks, threads, _count(a.get("registers per thread")), _count(a.get("shared memory"))


def frame(rows: list[tuple], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Rows → frame in one call; only if polars rejects a value (a list where an id belongs, an
    int beyond int64) are the rows cleaned, and wrong values become null."""
    try:
        return pl.DataFrame(rows, schema=schema, orient="row")
    except (pl.exceptions.PolarsError, TypeError, OverflowError):
        clean = [tuple(_clean(v, t) for v, t in zip(r, schema.values(), strict=True)) for r in rows]
        return pl.DataFrame(clean, schema=schema, orient="row")


def _clean(value: Any, dtype: pl.DataType) -> Any:
    if dtype == pl.String:
        return value if isinstance(value, str) else None
    ok = type(value) is int and -(2**63) <= value < 2**63
    return value if ok else None
