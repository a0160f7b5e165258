"""Values as the text of a report cell: one formatting of times, shares, counts and names."""

from __future__ import annotations

from nsysmoe.results import TraceAnalysis


def ms(ns: int | None) -> str:
    """Nanoseconds as milliseconds with µs precision (the unit reviewers compare)."""
    return "–" if ns is None else f"{ns / 1e6:,.3f}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} %"


def count(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def shorten(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def gpu_label(row: dict) -> str:
    name = f" {row['gpu_name']}" if row.get("gpu_name") else ""
    return f"pid {row['pid']} dev {row['device']}{name}"


def source_text(a: TraceAnalysis) -> str:
    schema = f"schema {a.schema_version}" if a.schema_version else "schema unknown"
    if a.source_format.startswith("kineto"):
        return f"{a.path} (PyTorch profiler trace, Kineto {schema})"
    version = f"nsys {a.product_version}, " if a.product_version else ""
    return f"{a.path} ({version}{schema})"


def window_text(a: TraceAnalysis) -> str:
    w = a.window
    if not w.bounded:
        return a.window_text
    lo = "start" if w.start_ns is None else f"{w.start_ns:,} ns"
    hi = "end" if w.end_ns is None else f"{w.end_ns:,} ns"
    return f"{a.window_text}: [{lo}, {hi})"


def versus(a: str, b: str) -> str:
    """Two side names as one phrase, their common leading words said once ("overlap off vs on",
    "ep=8 vs ep=16")."""
    wa, wb = a.split(" "), b.split(" ")
    n = 0
    while n < min(len(wa), len(wb)) - 1 and wa[n] == wb[n]:
        n += 1
    return " ".join(wa[:n] + [" ".join(wa[n:]), "vs", " ".join(wb[n:])])
