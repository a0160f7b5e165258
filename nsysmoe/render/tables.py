"""The report's tables as plain rows of strings, shared by the terminal and Markdown renderers."""

from __future__ import annotations

from dataclasses import dataclass

from nsysmoe.measure import walls
from nsysmoe.result import TraceAnalysis

TOP_NVTX = 15


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: tuple[bool, ...]  # right-align numeric columns


def ms(ns: int | None) -> str:
    """Nanoseconds as milliseconds with µs precision (the unit reviewers compare)."""
    return "–" if ns is None else f"{ns / 1e6:,.3f}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} %"


def count(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def gpu_label(row: dict) -> str:
    name = f" {row['gpu_name']}" if row.get("gpu_name") else ""
    return f"pid {row['pid']} dev {row['device']}{name}"


def gpu_table(a: TraceAnalysis) -> Table:
    header = (
        "GPU",
        "kernels",
        "span ms",
        "active ms",
        "idle ms",
        "comm ms",
        "hidden ms",
        "exposed ms",
        "hidden %",
        "comm∩GEMM/attn ms",
    )
    rows = tuple(
        (
            gpu_label(r),
            count(r["kernels"]),
            ms(r["span_ns"]),
            ms(r["active_ns"]),
            ms(r["idle_ns"]),
            ms(r["comm_ns"]),
            ms(r["hidden_ns"]),
            ms(r["exposed_ns"]),
            pct(r["hidden_pct"]),
            ms(r["comm_gemm_attn_ns"]),
        )
        for r in a.gpus.iter_rows(named=True)
    )
    return Table(
        "Communication hidden by compute, per GPU",
        header,
        rows,
        (False,) + (True,) * (len(header) - 1),
    )


def class_table(a: TraceAnalysis) -> Table:
    header = ("GPU", "class", "kernels", "sum of durations ms", "union ms")
    labels = {(r["pid"], r["device"]): gpu_label(r) for r in a.gpus.iter_rows(named=True)}
    rows = tuple(
        (
            labels.get((r["pid"], r["device"]), ""),
            r["class"],
            count(r["count"]),
            ms(r["sum_ns"]),
            ms(r["union_ns"]),
        )
        for r in a.classes.iter_rows(named=True)
        if r["count"]
    )
    return Table(
        "Kernel classes (sum of durations is not wall time; union is)",
        header,
        rows,
        (False, False, True, True, True),
    )


def nvtx_table(a: TraceAnalysis, top: int = TOP_NVTX) -> Table:
    header = ("NVTX range (CPU side)", "count", "total ms")
    rows = tuple(
        (r["name"], count(r["count"]), ms(r["total_ns"]))
        for r in a.nvtx.head(top).iter_rows(named=True)
    )
    more = len(a.nvtx) - top
    title = "NVTX ranges by total CPU-side duration"
    if more > 0:
        title += f" (top {top} of {len(a.nvtx)}; --format json lists all)"
    return Table(title, header, rows, (False, True, True))


def unclassified_table(a: TraceAnalysis) -> Table:
    header = ("unclassified kernel name", "count", "sum ms")
    rows = tuple(
        (shorten(r["name"]), count(r["count"]), ms(r["sum_ns"]))
        for r in a.unclassified.iter_rows(named=True)
    )
    return Table(
        "Busiest kernels no rule recognised (extend with --rules FILE)",
        header,
        rows,
        (False, True, True),
    )


def shorten(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def window_text(a: TraceAnalysis) -> str:
    w = a.window
    if not w.bounded:
        return a.window_text
    lo = "start" if w.start_ns is None else f"{w.start_ns:,} ns"
    hi = "end" if w.end_ns is None else f"{w.end_ns:,} ns"
    return f"{a.window_text}: [{lo}, {hi})"


def iteration_table(a: TraceAnalysis) -> Table:
    header = ("iteration", "step ms", "comm ms", "hidden ms", "exposed ms", "hidden %", "idle ms")
    rows = tuple(
        (str(r["step"]), ms(r["step_ns"]), ms(r["comm_ns"]), ms(r["hidden_ns"]),
         ms(r["exposed_ns"]), pct(r["hidden_pct"]), ms(r["idle_ns"]))
        for r in a.iterations.iter_rows(named=True)
    )  # fmt: skip
    where = "GPU" if a.step_timeline == "gpu" else "CPU"
    title = f"Per iteration (all GPUs together; step = {where} period)"
    return Table(title, header, rows, (False,) + (True,) * 6)


def source_text(a: TraceAnalysis) -> str:
    schema = f"schema {a.schema_version}" if a.schema_version else "schema unknown"
    if a.source_format.startswith("kineto"):
        return f"{a.path} (PyTorch profiler trace, Kineto {schema})"
    version = f"nsys {a.product_version}, " if a.product_version else ""
    return f"{a.path} ({version}{schema})"


def wall_lines(a: TraceAnalysis) -> list[str]:
    w = a.wall
    ev = w.evidence
    lines = [
        f"Dominant wall: {w.wall} — {w.reason}",
        f"  evidence: exposed comm {ms(ev.get('exposed_comm_ns'))} ms "
        f"({pct(ev.get('exposed_comm_pct_of_span'))} of span), idle {ms(ev.get('idle_ns'))} ms "
        f"({pct(ev.get('idle_pct_of_span'))} of span), memory: {memory_text(ev)}",
        f"  thresholds: exposed comm ≥ {walls.COMM_EXPOSED_PCT:g} % of span, idle ≥ "
        f"{walls.HOST_IDLE_PCT:g} % of span, peak memory ≥ {walls.MEMORY_PEAK_PCT:g} %",
        "  knobs: " + "; ".join(w.knobs),
    ]
    per_gpu = {v.wall for v in a.gpu_walls}
    if len(per_gpu) > 1:
        lines.append(
            "  per GPU: "
            + ", ".join(
                f"{gpu_label(r)}: {v.wall}"
                for r, v in zip(a.gpus.iter_rows(named=True), a.gpu_walls, strict=True)
            )
        )
    return lines


def memory_text(ev: dict) -> str:
    if "peak_allocated_bytes" in ev:
        pct_text = pct(ev.get("peak_memory_pct"))
        return f"peak {ev['peak_allocated_bytes'] / 2**30:,.2f} GiB ({pct_text} of GPU memory)"
    return str(ev.get("memory_usage", "not captured"))


def optional_tables(a: TraceAnalysis) -> list[Table]:
    """The tables a report shows only when the trace has that data."""
    tables = []
    if not a.iterations.is_empty():
        tables.append(iteration_table(a))
    if not a.nvtx.is_empty():
        tables.append(nvtx_table(a))
    if not a.unclassified.is_empty():
        tables.append(unclassified_table(a))
    return tables


WARMUP_FACTOR = 1.1  # a first iteration this much slower than the median looks like warm-up


def warmup_hint(a: TraceAnalysis) -> list[str]:
    """Say so when the first measured iteration is still slow (warm-up left in the window)."""
    it = a.iterations
    if len(it) < 3 or not a.window.bounded:
        return []
    first, median = int(it["step_ns"][0]), float(it["step_ns"].median())
    if first <= WARMUP_FACTOR * median:
        return []
    slower = 100.0 * (first / median - 1)
    return [f"hint: iteration {it['step'][0]} is {slower:.0f} % slower than the median "
            "iteration: warm-up may still be in the window (--skip N)"]  # fmt: skip


def notes(a: TraceAnalysis) -> list[str]:
    """What the trace did not capture, what the reader left out, and window hints."""
    return (
        [f"{k}: {v}" for k, v in a.not_captured.items()]
        + [f"warning: {w}" for w in a.warnings]
        + warmup_hint(a)
    )
