"""Rank × channel heat map of exposed wait: where the run's communication sat waiting for a late
peer, and on which ranks (the straggler's row is the pale one: it waits for nobody). The values
are the run's :class:`~nsysmoe.results.Collectives` ``waits`` table, drawn as they are."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

import numpy as np

from nsysmoe.model import channel_order_key
from nsysmoe.renderers.plot.common import WIDTH, figure, short_ranks
from nsysmoe.results import Collectives

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_RANKS = 64  # rows; a larger run shows its first ranks (the title says so)


def waits_figure(c: Collectives, side: str = "") -> Figure:
    """The heat map (ms of exposed wait per rank and channel), values written in the cells;
    ``side``: the A/B side's name when the ranks are one side of an A/B, first in the title."""
    w = c.waits
    channels = sorted(set(w["channel"]), key=channel_order_key)
    ranks = sorted(set(w["rank"]))[:MAX_RANKS]
    grid = np.full((len(ranks), len(channels)), np.nan)
    for r in w.iter_rows(named=True):
        if r["rank"] in ranks:
            grid[ranks.index(r["rank"]), channels.index(r["channel"])] = r["exposed_wait_ns"] / 1e6
    height = min(2.0 + 0.32 * len(ranks), 22.0)
    width = min(WIDTH, max(8.5, 4.0 + 1.9 * len(channels)))
    fig = figure(width, height)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(grid, aspect="auto", cmap="Reds", vmin=0)
    ax.set_xticks(range(len(channels)), channels)
    every = sorted(set(w["rank"]) | set(c.stragglers["rank"]))
    shown = dict(zip(every, short_ranks(every), strict=True))  # cut, but never to a twin
    ax.set_yticks(range(len(ranks)), [shown[r] for r in ranks], fontsize=8)
    for (i, j), v in np.ndenumerate(grid):
        if not np.isnan(v):
            dark = v > 0.6 * np.nanmax(grid) if np.nanmax(grid) > 0 else False
            ax.text(j, i, f"{v:,.3f}", ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")  # fmt: skip
    named = ", ".join(f"{r['channel']}: {shown[r['rank']]}"
                      for r in c.stragglers.iter_rows(named=True))  # fmt: skip
    more = f" (first {MAX_RANKS} of {len(set(w['rank']))} ranks)" if len(set(w["rank"])) > \
        MAX_RANKS else ""  # fmt: skip
    subtitle = textwrap.fill(f"{c.matched:,} collectives matched; straggler {named or 'none'}",
                             int(width * 11))  # fmt: skip
    what = f"{side}: exposed wait" if side else "Exposed wait"
    ax.set_title(f"{what} for a late peer, ms per rank and channel{more}\n{subtitle}",
                 fontsize=10)  # fmt: skip
    fig.colorbar(image, ax=ax, label="exposed wait (ms)")
    return fig
