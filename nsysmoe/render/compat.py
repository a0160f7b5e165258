"""``--compat hta``: HTA's figure beside nsysmoe's, the conventions, and why they differ."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from nsysmoe import __version__
from nsysmoe.compat import CompatResult
from nsysmoe.render import markdown, terminal
from nsysmoe.render.json import dumps
from nsysmoe.render.tables import Table, pct


def _pct(v: float | None) -> str:
    return "NaN (no comm by its rules)" if v is not None and math.isnan(v) else pct(v)


def _pp(v: float | None) -> str:
    return "–" if v is None or math.isnan(v) else f"{v:+.2f} pp"


def compat_table(paths: Sequence[str], results: Sequence[CompatResult]) -> Table:
    rows = tuple(
        (f"{Path(p).name}:{g['pid']}:{g['device']}", _pct(g["hta_overlap_pct"]),
         _pct(g["hidden_pct"]), _pp(g["diff_pp"]))
        for p, r in zip(paths, results, strict=True)
        for g in r.gpus.iter_rows(named=True)
    )  # fmt: skip
    header = ("rank (file:pid:device)", "HTA comm-comp overlap", "nsysmoe hidden %", "difference")
    return Table(f"HTA-compatible mode ({results[0].tool})", header, rows,
                 (False, True, True, True))  # fmt: skip


def _parts(paths, results, fmt_table: Callable[[Table], str], bullet: str) -> list[str]:  # noqa: ANN001
    conventions = "\n".join(bullet + c for c in results[0].conventions)
    parts = [fmt_table(compat_table(paths, results)), "Conventions in force:\n" + conventions]
    why = [f"{bullet}{Path(p).name}: {r.explanation or 'no difference'}"
           for p, r in zip(paths, results, strict=True)]  # fmt: skip
    parts.append("Why the figures differ:\n" + "\n".join(why))
    return parts


def render_compat(fmt: str, paths: Sequence[str], results: Sequence[CompatResult]) -> str:
    if fmt == "json":
        doc = {"schema": "nsysmoe.compat", "version": 1, "nsysmoe_version": __version__,
               "tool": results[0].tool, "conventions": list(results[0].conventions),
               "traces": [{"path": p, "gpus": r.gpus.to_dicts(), "reasons": list(r.reasons)}
                          for p, r in zip(paths, results, strict=True)]}  # fmt: skip
        return dumps(doc)
    if fmt == "markdown":
        return "\n\n".join(_parts(paths, results, markdown.format_table, "- ")) + "\n"
    return "\n\n".join(_parts(paths, results, terminal.format_table, "  - ")) + "\n"
