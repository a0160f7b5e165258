"""Communication per rank (exposed vs hidden, stacked), the median step time above it, and the
stragglers the ranks analysis named, outlined."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from nsysmoe.errors import NsysmoeError
from nsysmoe.renderers.plot.common import (
    COLORS,
    PART_HELP,
    WIDTH,
    figure,
    grid,
    same_window_text,
    short_ranks,
    window_key,
)
from nsysmoe.results import RanksAnalysis

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_NAMED_RANKS = 16  # above this, ticks are rank indices and a mapping panel names the ranks


def ranks_figure(run: RanksAnalysis, side: str = "") -> Figure:
    """Exposed and hidden communication per rank (stacked: the bar is the rank's communication
    union), the median step time in a panel above when iterations were found, stragglers
    outlined and their tick labels coloured.

    Collectives wait for the slowest peer, so the straggler is the rank with the *least*
    communication (everyone else waits in comm kernels) and, with steps, the longest step.
    Step times get their own panel, not a twin axis, so no marker reads against the wrong
    scale. A step time is a file's (the median of its iterations), so the panel is drawn only
    when the ranks come from more than one file; ranks of one file share one step time, which
    the title gives instead. Up to :data:`MAX_NAMED_RANKS` ranks are named under the bars;
    beyond that the ticks are indices and a key below maps index → rank, so 64 ranks stay
    readable; names are cut only as far as they stay distinct. ``side``: the A/B side's name
    ("overlap on") when the run is one side of an A/B, put first in the title.
    """
    r = run.ranks
    if r.is_empty():
        raise NsysmoeError("no rank was analysed (every file failed); nothing to plot")
    n, ranks = len(r), r["rank"].to_list()
    x = np.arange(n)
    exposed, hidden, step = _per_rank_ms(r)
    per_file = r["file"].n_unique() > 1 if "file" in r.columns else True
    has_steps, named = bool(np.isfinite(step).any()) and per_file, n <= MAX_NAMED_RANKS
    fig, rows = _ranks_layout(n, has_steps, named)
    ax = fig.add_subplot(rows[int(has_steps)])
    width = 0.8 if n <= 32 else 0.9
    ax.bar(x, exposed, width, color=COLORS["exposed comm"], label=PART_HELP["exposed comm"])
    ax.bar(
        x,
        hidden,
        width,
        bottom=exposed,
        color=COLORS["hidden comm"],
        label=PART_HELP["hidden comm"],
    )
    colored = _mark_stragglers(ax, run, ranks, exposed + hidden, width)
    ax.set_ylim(0, (float(np.max(exposed + hidden)) or 1.0) * 1.3)  # headroom for the legend
    ax.set_ylabel("communication in the window (ms)")
    ax.set_xlim(-0.7, n - 0.3)
    _rank_ticks(ax, x, ranks, colored, key=None if named else (fig, rows))
    grid(ax, "y")
    ax.legend(loc="upper left", fontsize=8, ncols=2, framealpha=0.9)
    if has_steps:
        _step_panel(fig.add_subplot(rows[0], sharex=ax), x, step, colored)
    fig.suptitle(_ranks_title(run, n, step, per_file, side), fontsize=10.5)
    return fig


def _per_rank_ms(r: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exposed, hidden and median step time per rank in ms; steps are NaN where a run found no
    iterations (the column may be missing), so the caller can tell "no steps" from "0 ms"."""
    n = len(r)
    exposed, hidden = r["exposed_ns"].to_numpy() / 1e6, r["hidden_ns"].to_numpy() / 1e6
    step = (
        np.asarray(r["step_ns"].to_numpy() if "step_ns" in r.columns else [np.nan] * n, dtype=float)
        / 1e6
    )
    return exposed, hidden, step


def _ranks_layout(n: int, has_steps: bool, named: bool) -> tuple[Figure, Any]:
    """The figure and its row grid: step panel (if any), bars, index key (if not named).

    The key grows with its rows and the bars keep a fixed height, so 64 ranks stay as legible
    as 6.
    """
    key_rows = 0 if named else -(-n // 4)
    heights = [1.6] * has_steps + [4.0] + [0.13 * key_rows + 0.3] * (not named)
    fig = figure(WIDTH, sum(heights) + (1.8 if named else 1.2))
    return fig, fig.add_gridspec(len(heights), 1, height_ratios=heights)


def _mark_stragglers(
    ax: Axes, run: RanksAnalysis, ranks: list[str], total: np.ndarray, width: float
) -> dict[int, str]:
    """Outline each straggler's bar and return index → colour, for ticks, key and markers.

    A rank that is the straggler both ways gets both outlines but keeps the first colour for
    its tick, key entry and step marker.
    """
    marks = {
        "by_step_time": ("longest step", "#e6550d", "-"),
        "by_comm_wait": ("least comm: the others wait for it", "#6a3d9a", "--"),
    }
    colored: dict[int, str] = {}
    names = short_ranks(ranks, 60)
    for kind, straggler in run.stragglers.named():
        if straggler.rank in ranks:
            what, color, style = marks[kind]
            i = ranks.index(straggler.rank)
            colored.setdefault(i, color)
            label = f"straggler ({what}): #{i} {names[i]}"
            ax.bar(
                i,
                total[i],
                width,
                fill=False,
                edgecolor=color,
                linewidth=2.2,
                linestyle=style,
                label=label,
            )
    return colored


def _rank_ticks(
    ax: Axes,
    x: np.ndarray,
    ranks: list[str],
    colored: dict[int, str],
    key: tuple[Figure, Any] | None,
) -> None:
    """Rank names under the bars, or (``key`` given) indices and a key panel naming them;
    stragglers' labels in their colour either way."""
    n = len(ranks)
    if key is None:
        ax.set_xticks(
            x,
            [f"#{i} {s}" for i, s in enumerate(short_ranks(ranks))],
            rotation=30,
            ha="right",
            rotation_mode="anchor",
            fontsize=8,
        )
        ax.set_xlabel("rank (file:pid:device)")
    else:
        # every index up to 64 (vertical, so they never touch); beyond, every k-th + stragglers
        ticks = sorted(set(x[:: max(1, -(-n // 64))].tolist()) | set(colored))
        ax.set_xticks(ticks, [str(i) for i in ticks], fontsize=7, rotation=90)
        ax.set_xlabel("rank index (names in the key below)")
        fig, rows = key
        _rank_key(fig.add_subplot(rows[-1]), ranks, colored)
    for tick, text in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True):
        if round(tick) in colored:
            text.set_color(colored[round(tick)])
            text.set_fontweight("bold")


def _step_panel(top: Axes, x: np.ndarray, step: np.ndarray, colored: dict[int, str]) -> None:
    """Median step time per rank against the median over ranks; stragglers in their colour."""
    n = len(x)
    top.plot(x, step, "D", color="black", markersize=3.5 if n > 32 else 5)
    for i, color in colored.items():  # the stragglers' markers in their colour
        top.plot([i], step[i : i + 1], "D", color=color, markersize=6 if n > 32 else 8)
    top.axhline(
        float(np.nanmedian(step)),
        color="grey",
        linewidth=0.8,
        linestyle=":",
        label="median over ranks",
    )
    top.set_ylabel("median step\ntime (ms)")
    top.set_ylim(0, np.nanmax(step) * 1.15)
    top.tick_params(labelbottom=False)
    top.legend(loc="lower right", fontsize=8)
    grid(top, "y")


def _ranks_title(run: RanksAnalysis, n: int, step: np.ndarray, per_file: bool,
                 side: str = "") -> str:  # fmt: skip
    """Title with the window: one text when every file has the same window in the same words
    (so 64 ranks do not repeat it), "windows differ per file" only when they are not the same
    window; and why there is no step panel, when there is none."""
    texts = [a.window_choice.description for a in run.analyses]
    if len({window_key(a) for a in run.analyses}) > 1:
        window = "windows differ per file"
    elif len(set(texts)) == 1:
        window = texts[0]
    else:
        window = f"{same_window_text(run.analyses[0])} in every file"
    if not np.isfinite(step).any():
        note = " (no iterations in any file's window, so no step times)"
    elif not per_file:
        note = (f" (one file: its median step, {np.nanmedian(step):,.3f} ms, is every rank's, so "
                "no per-rank step panel)")  # fmt: skip
    else:
        note = ""
    title = f"Communication per rank ({n} ranks), exposed vs hidden under compute{note}; window: "
    title = f"{side}: {title[0].lower()}{title[1:]}" if side else title
    return "\n".join(textwrap.wrap(title + window, 130))


def _rank_key(ax: Axes, ranks: list[str], colored: dict[int, str]) -> None:
    """index → rank, four columns, for runs too wide to name ranks under the bars."""
    ax.set_axis_off()
    rows = -(-len(ranks) // 4)
    for i, rank in enumerate(short_ranks(ranks, 48)):
        col, row = divmod(i, rows)
        ax.text(
            col / 4,
            1 - (row + 0.5) / rows,
            f"{i:>3} {rank}",
            fontsize=6.5,
            family="monospace",
            va="center",
            transform=ax.transAxes,
            color=colored.get(i, "black"),
            fontweight="bold" if i in colored else "normal",
        )
