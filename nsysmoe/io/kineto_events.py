"""Kineto trace files to rows: the file read (gzip detected by content), the JSON decoded with
floats kept as text, and one pass over the events into plain row tuples and polars frames.

Kept apart from :mod:`nsysmoe.io.kineto` (which shapes the canonical tables) so the decoded
document, the memory peak, lives only inside :func:`frames`.
"""

from __future__ import annotations

import gzip
import json
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

GPU_ROW = {
    "kind": pl.String,
    "device": pl.Int64,
    "stream": pl.Int64,
    "start": pl.Int64,
    "dur": pl.Int64,
    "corr_id": pl.Int64,
    "name": pl.String,
    "bytes": pl.Int64,
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
    """
    if type(us) is int:
        return us * 1000
    whole, _, frac = us.partition(".")
    if len(frac) <= 3 and frac.isdigit():
        return int(whole + frac.ljust(3, "0"))
    return int(Decimal(us).scaleb(3).to_integral_value(rounding=ROUND_HALF_EVEN))


def frames(
    path: Path,
) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Header fields, the GPU/CPU/memory frames with well-formed ts/dur, and the malformed count.

    The row lists are dropped as soon as their frames exist, so at most one copy of the events
    is alive at a time.
    """
    meta, (gpu_rows, cpu_rows, memory_rows, malformed) = _rows(path)
    gpu = frame(gpu_rows, GPU_ROW)
    cpu = frame(cpu_rows, CPU_ROW)
    memory = frame(memory_rows, MEMORY_ROW).drop_nulls("start")
    del gpu_rows, cpu_rows, memory_rows
    # ts/dur beyond int64 became null in _frame: malformed too
    valid = pl.col("start").is_not_null() & pl.col("dur").is_not_null()
    malformed += int(gpu.select((~valid).sum()).item() + cpu.select((~valid).sum()).item())
    return meta, gpu.filter(valid), cpu.filter(valid), memory, malformed


def _rows(path: Path) -> tuple[dict[str, Any], tuple[list[tuple], list[tuple], list[tuple], int]]:
    """The header fields read_kineto needs and the scanned rows; a function of its own so the
    decoded document (the big object) is freed on return, before any frame is built."""
    doc = _load(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise NsysmoeError(f"{path}: JSON without a traceEvents list, not a Kineto trace; {HINT}")
    info = doc.get("distributedInfo")
    meta = {
        "rank": info.get("rank") if isinstance(info, dict) else None,
        "props": doc.get("deviceProperties"),
        "schema_version": doc.get("schemaVersion"),
    }
    return meta, _scan(events)


def _load(path: Path) -> Any:
    """The decoded JSON document, floats kept as their text; every failure is one NsysmoeError."""
    try:
        text = _read_text(path)
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
    except UnicodeDecodeError:
        raise NsysmoeError(f"{path}: not UTF-8 JSON text; {HINT}") from None
    try:
        return json.loads(text, parse_float=str)
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise NsysmoeError(f"{path}: not valid JSON ({reason}); the file is truncated or not a "
                           f"trace; {HINT}") from None  # fmt: skip


def _read_text(path: Path) -> str:
    """Whole file as text, gunzipped when it starts with the gzip magic (suffixes lie).

    A function of its own so the compressed and decompressed bytes are freed on return, before
    the JSON objects exist.
    """
    if path.is_dir():
        raise IsADirectoryError(path)
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):
        data = gzip.decompress(data)
    return data.decode("utf-8-sig")


def _scan(events: list[Any]) -> tuple[list[tuple], list[tuple], list[tuple], int]:
    """One pass over the events: a tuple per kept event, and the count of malformed ones."""
    gpu: list[tuple] = []
    cpu: list[tuple] = []
    memory: list[tuple] = []
    malformed = 0
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
                     to_ns(ev["ts"]), to_ns(ev.get("dur", 0)), a.get("correlation"),
                     ev.get("name"), a.get("bytes"))
                )  # fmt: skip
                continue
            kind = CPU_KINDS.get(cat)
            if kind is not None:
                a = ev.get("args") or {}
                cpu.append(
                    (kind, ev.get("pid"), ev.get("tid"), to_ns(ev["ts"]), to_ns(ev.get("dur", 0)),
                     a.get("correlation"), ev.get("name"))
                )  # fmt: skip
        except (AttributeError, KeyError, TypeError, ValueError, ArithmeticError):
            malformed += 1
    return gpu, cpu, memory, malformed


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
