"""Figures for reports: a per-GPU timeline of one steady iteration (a lane per communication
channel), the A/B time breakdown, the A/B exposed and hidden time per channel, and communication
per rank and the exposed wait per rank and channel. They draw what :mod:`nsysmoe.measure.lanes`
and the analyses measured; nothing here classifies or measures.

The tables say *how much* communication the compute hid; these figures show *where* (timeline),
*what the time was spent on* (breakdown, exact parts that add up to the span), *which channel*
got hidden or stayed exposed (channels) and *which rank* lags (ranks). matplotlib is imported
inside the functions, so it stays an optional dependency and costs the CLI nothing, and only
:class:`matplotlib.figure.Figure` objects on an Agg canvas are used, never pyplot's global
state, so figures draw headless and in worker processes in parallel, and a figure is freed as
soon as nothing refers to it (no ``plt.close`` needed, none left open in a loop).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsysmoe.renderers.plot.breakdown import breakdown_figure
from nsysmoe.renderers.plot.channels import channels_figure
from nsysmoe.renderers.plot.ranks import ranks_figure
from nsysmoe.renderers.plot.timeline import timeline_figure
from nsysmoe.renderers.plot.waits import waits_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: PNG resolution of written figures (``--plot``, :func:`write_figures`)
FILE_DPI = 110

#: (file stem, figure maker): makers, not figures, so each figure is drawn only when its turn
#: comes and dropped after it is saved (a 64-rank run never holds 64 timelines in memory)
FigureJob = tuple[str, Callable[[], "Figure"]]


def slug(path: str) -> str:
    """The file name without its trace extension, safe in a file name and a Markdown link."""
    stem = re.sub(r"\.(sqlite|nsys-rep|json(\.gz)?)$", "", Path(path).name)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") or "trace"


def unique_stems(jobs: Sequence[FigureJob]) -> list[FigureJob]:
    """The jobs with stems that would collide (two traces of one file name) made unique:
    ``-2``, ``-3``…"""
    out, used = [], set()
    for stem, make in jobs:
        name, k = stem, 1
        while name in used:
            k += 1
            name = f"{stem}-{k}"
        used.add(name)
        out.append((name, make))
    return out


def write_figures(
    outdir: Path, jobs: Sequence[FigureJob], formats: Sequence[str] = ("png", "svg")
) -> list[Path]:
    """Draw and write each figure into ``outdir`` (created), one file per format; stems that
    would collide get ``-2``, ``-3``… Returns the written paths."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in unique_stems(jobs):
        fig = make()
        written += _save(fig, outdir, name, formats)
        fig.clear()  # its artists freed now, not at the next garbage collection
    return written


def svg_text(fig: Figure) -> str:
    """``fig`` as SVG text from its ``<svg>`` root element on (no XML prolog or doctype, which
    do not belong inside an HTML page; no creation date, so it diffs only where it changed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue().decode("utf-8")
    return text[text.index("<svg"):]


#: PNG resolution for notebooks: sharp on screen, small enough to commit a notebook's outputs
NOTEBOOK_DPI = 72


def png_bytes(fig: Figure, dpi: float = NOTEBOOK_DPI) -> bytes:
    """``fig`` as PNG bytes (IPython's ``image/png`` formatter shows a figure with this)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _save(fig: Figure, outdir: Path, name: str, formats: Sequence[str]) -> list[Path]:
    """``fig`` as ``outdir/name.<fmt>`` per format, the SVG without its creation date."""
    written = []
    for fmt in formats:
        path = outdir / f"{name}.{fmt}"
        # no creation date in the SVG, so regenerated plots diff only where they changed
        meta = {"Date": None} if fmt == "svg" else None
        fig.savefig(path, format=fmt, dpi=FILE_DPI, metadata=meta)
        written.append(path)
    return written


__all__ = [
    "FILE_DPI",
    "NOTEBOOK_DPI",
    "breakdown_figure",
    "channels_figure",
    "png_bytes",
    "ranks_figure",
    "slug",
    "svg_text",
    "timeline_figure",
    "waits_figure",
    "write_figures",
]
