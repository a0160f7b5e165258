"""``--compat hta``: HTA's figure beside nsysmoe's, the conventions, and why they differ."""

from __future__ import annotations

import math
from pathlib import Path

from nsysmoe.renderers.cells import pct
from nsysmoe.renderers.document import Document, Lines, Table
from nsysmoe.results import CompatRun


def _pct(v: float | None) -> str:
    return "NaN (no comm by its rules)" if v is not None and math.isnan(v) else pct(v)


def _pp(v: float | None) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:+.2f} pp"


def compat_table(run: CompatRun) -> Table:
    rows = tuple(
        (f"{Path(r.path).name}:{g['pid']}:{g['device']}", _pct(g["hta_overlap_pct"]),
         _pct(g["hidden_pct"]), _pp(g["diff_pp"]))
        for r in run.results
        for g in r.gpus.iter_rows(named=True)
    )  # fmt: skip
    header = ("rank (file:pid:device)", "HTA comm-comp overlap", "nsysmoe hidden %", "difference")
    return Table(f"HTA-compatible mode ({run.tool})", header, rows, (False, True, True, True))


def document(run: CompatRun) -> Document:
    why = tuple(f"{Path(r.path).name}: {r.explanation or 'no difference'}" for r in run.results)
    return Document((
        compat_table(run),
        Lines(run.results[0].conventions, style="list", title="Conventions in force:"),
        Lines(why, style="list", title="Why the figures differ:"),
    ))  # fmt: skip
