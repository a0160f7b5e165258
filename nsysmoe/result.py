"""Result objects: frozen data plus provenance; renderers turn them into text, never the reverse."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from nsysmoe.measure.overlap import Window
from nsysmoe.measure.walls import WallVerdict
from nsysmoe.report import Report

JSON_SCHEMA = "nsysmoe.analysis"
JSON_VERSION = 1

#: Per-iteration table: one row per kept iteration, all GPUs of the trace together.
ITERATION_SCHEMA = {
    "step": pl.Int64,
    "start_ns": pl.Int64,  # GPU start of the iteration (earliest process)
    "end_ns": pl.Int64,  # GPU end of the iteration's window (latest process)
    "step_ns": pl.Int64,  # GPU period (median over processes)
    "comm_ns": pl.Int64,
    "hidden_ns": pl.Int64,
    "exposed_ns": pl.Int64,
    "hidden_pct": pl.Float64,
    "idle_ns": pl.Int64,  # per GPU: the iteration window's length − active time, summed
}


@dataclass(frozen=True)
class TraceAnalysis(Report):
    """Everything ``nsysmoe analyze`` measured on one trace.

    ``gpus``: one row per GPU (pid, device, gpu_name and the metrics of
    :mod:`nsysmoe.measure.overlap`); ``classes``: per (pid, device, class) count/sum_ns/union_ns;
    ``nvtx``: CPU-side range totals (name, count, total_ns, min_ns, max_ns);
    ``unclassified``: busiest kernel names no rule recognised (name, count, sum_ns);
    ``iterations``: per-iteration step time and communication (:data:`ITERATION_SCHEMA`).
    """

    path: str
    source_format: str
    schema_version: str | None
    product_version: str | None
    window: Window
    cpu_window: Window
    window_text: str
    rules_source: str
    gpus: pl.DataFrame
    classes: pl.DataFrame
    nvtx: pl.DataFrame
    unclassified: pl.DataFrame
    iterations: pl.DataFrame
    step_timeline: str
    gpu_walls: tuple[WallVerdict, ...]
    wall: WallVerdict
    not_captured: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def _render(self, fmt: str) -> str:
        from nsysmoe.render import RENDERERS

        return RENDERERS[fmt]([self])

    def to_polars(self) -> pl.DataFrame:
        """The per-GPU table (one row per (pid, device))."""
        return self.gpus

    def to_dict(self) -> dict[str, object]:
        classes = self.classes.partition_by("pid", "device", as_dict=True)
        gpus = []
        for row, wall in zip(self.gpus.iter_rows(named=True), self.gpu_walls, strict=True):
            per_class = classes.get((row["pid"], row["device"]))
            row["classes"] = {
                c["class"]: {"count": c["count"], "sum_ns": c["sum_ns"], "union_ns": c["union_ns"]}
                for c in (per_class.iter_rows(named=True) if per_class is not None else [])
            }
            row["wall"] = wall.to_dict()
            gpus.append(row)
        return {
            "path": self.path,
            "format": self.source_format,
            "schema_version": self.schema_version,
            "product_version": self.product_version,
            "window": {
                "start_ns": self.window.start_ns,
                "end_ns": self.window.end_ns,
                "description": self.window_text,
                "cpu_start_ns": self.cpu_window.start_ns,
                "cpu_end_ns": self.cpu_window.end_ns,
            },
            "rules": self.rules_source,
            "gpus": gpus,
            "nvtx": self.nvtx.select("name", "style", "count", "total_ns").to_dicts(),
            "wall": self.wall.to_dict(),
            "unclassified": self.unclassified.to_dicts(),
            "iterations": self.iterations.to_dicts(),
            "iteration_timeline": self.step_timeline,
            "not_captured": self.not_captured,
            "warnings": list(self.warnings),
        }
