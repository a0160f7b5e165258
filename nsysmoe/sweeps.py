"""A sweep as a result type: N settings of one knob (``nsysmoe sweep``), each a trace measured
on its steady window, side by side.

The settings form one ladder of N sides — the model the training logs' acceptance uses
(:class:`~nsysmoe.acceptance.Acceptance`): each setting against the one before and against the
first (the base), with the same bootstrap CI and run-to-run floor, graded by how many
iterations each profile holds. Each setting's contract is checked against the base's (only the
declared knob may differ). Frozen data with ``to_dict()`` (JSON schema ``nsysmoe.sweep``) and
``to_polars()``; no rendering.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from nsysmoe.acceptance import Acceptance
from nsysmoe.results import Contract, TraceAnalysis

#: per setting, in the order given (times per iteration per GPU, so settings whose windows hold
#: different iteration counts compare; ``files``: 1 for an export, a run's rank files;
#: ``iterations``: those its step is the median of; ``gpus``: over its files)
SETTING_SCHEMA: dict[str, pl.DataType] = {
    "label": pl.String, "path": pl.String, "files": pl.Int64, "iterations": pl.Int64,
    "gpus": pl.Int64,
    "median_step_ns": pl.Int64, "compute_ns": pl.Float64, "exposed_ns": pl.Float64,
    "idle_ns": pl.Float64, "hidden_pct": pl.Float64, "comm_sms_avg": pl.Float64,
    "inflation_extra_ns": pl.Float64, "best": pl.Boolean,
}  # fmt: skip


@dataclass(frozen=True)
class Sweep:
    """N settings of ``knob``: ``runs`` (in the order given, the first the base; each setting's
    analyses: one export's, or a run's rank files' in sorted order), their ``settings``
    (:data:`SETTING_SCHEMA`), per setting the SMs each channel holds
    (``sms_held``: channel → the most on any GPU, None where the SM count is unknown) and the
    exposed communication per channel (``exposed``: channel → ns per iteration per GPU), the
    ``ladder`` of their step times, and each setting's ``contracts`` against the base (one per
    setting after the first). ``best``: the index of the shortest median step."""

    knob: str
    runs: tuple[tuple[TraceAnalysis, ...], ...]
    settings: pl.DataFrame
    sms_held: tuple[dict[str, int | None], ...]
    exposed: tuple[dict[str, float], ...]
    ladder: Acceptance
    contracts: tuple[Contract, ...]
    best: int | None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.settings["label"])

    @property
    def matched(self) -> bool:
        """Every setting's contract against the base holds: only the knob differs."""
        return all(c.matched for c in self.contracts)

    def to_polars(self) -> pl.DataFrame:
        """One row per setting (:data:`SETTING_SCHEMA`)."""
        return self.settings

    def to_dict(self) -> dict[str, object]:
        rows = []
        for i, r in enumerate(self.settings.iter_rows(named=True)):
            vs_base = None if i == 0 else self.ladder.vs_base[i - 1].to_dict()
            rows.append(r | {"sms_held": self.sms_held[i], "exposed_by_channel": self.exposed[i],
                             "vs_base": vs_base,
                             "contract": None if i == 0 else self.contracts[i - 1].to_dict()})
        return {"knob": self.knob, "matched": self.matched, "best": self.best,
                "settings": rows, "ladder": self.ladder.to_dict(),
                "traces": [{"setting": i} | a.to_dict() for i, run in enumerate(self.runs)
                           for a in run]}  # fmt: skip
