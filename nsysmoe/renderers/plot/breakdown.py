"""A/B stacked bars of where the window's GPU time went, all GPUs summed: the parts
:func:`nsysmoe.measure.lanes.breakdown` measured, disjoint and adding up to the span."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nsysmoe.renderers.cells import versus
from nsysmoe.renderers.plot.common import (
    PART_HELP,
    WIDTH,
    figure,
    grid,
    ms_label,
    patch,
    pct_label,
    side_names,
    stacked_segments,
    windows_line,
)
from nsysmoe.results import Comparison, Side

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def breakdown_figure(comparison: Comparison, parts: dict[str, dict[str, int]]) -> Figure:
    """Each bar is the span (first to last GPU work, per GPU, summed); the parts (per side label,
    in drawing order) are disjoint, so a shorter bar is a faster window and a shrinking red part
    is communication that got hidden. Values too small to label inside their segment are in the
    legend, which lists every part."""
    sides = (comparison.off, comparison.on)
    order = list(parts[sides[0].label])
    used = [p for p in order if any(parts[s.label][p] for s in sides)]
    fig = figure(WIDTH, 4.6)
    ax = fig.add_subplot()
    longest = max(sum(parts[s.label].values()) for s in sides) / 1e6 or 1.0
    for y, side in enumerate(sides):
        _stacked_bar(ax, y, parts[side.label], used, longest)
    names = side_names(sides)
    ax.set_yticks(range(len(sides)), [_side_label(s, n) for s, n in zip(sides, names, strict=True)],
                  fontsize=9.5)  # fmt: skip
    ax.invert_yaxis()  # off on top, as in the tables
    ax.set_xlim(0, longest * 1.14)  # room for the span label
    ax.set_xlabel("GPU time in the analysed window (ms, summed over GPUs)")
    grid(ax, "x")
    _legend(fig, parts, used, sides, names)
    fig.suptitle(f"Where the GPU time went, {versus(*names)}\n{windows_line(sides)}",
                 fontsize=10.5)  # fmt: skip
    return fig


def _stacked_bar(ax: Axes, y: int, values: dict[str, int], used: list[str], longest: float) -> None:
    """One side's bar, parts left to right, then its span to the right of it.

    A part is labelled inside only when at least 7 % of the longest bar, so labels never spill
    over their segment; the legend carries every value anyway.
    """
    left = stacked_segments(ax, y, [(part, values[part] / 1e6) for part in used], longest)
    ax.text(left + 0.01 * longest, y, f"span {ms_label(left * 1e6)}", va="center", fontsize=9)


def _legend(fig: Figure, parts: dict[str, dict[str, int]], used: list[str],
            sides: Sequence[Side], names: Sequence[str]) -> None:  # fmt: skip
    """Every used part with its value per side (off → on), so parts too thin to label in the
    bars are still readable."""
    handles = [
        patch(p, f"{PART_HELP[p]}: " + " → ".join(ms_label(parts[s.label][p]) for s in sides))
        for p in used
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8.5, frameon=False,
               title=f"values: {' → '.join(names)}",
               title_fontsize=8.5)  # fmt: skip


def _side_label(side: Side, name: str) -> str:
    n = len(side.analysis.gpus)
    pct = side.analysis.totals.hidden_pct
    hidden = "no communication kernels" if pct is None else f"{pct_label(pct)} of comm hidden"
    return f"{name}\n{hidden}\n{n} GPU{'s' if n != 1 else ''}"
