"""A/B bars of communication per channel: for each channel on either side, one bar per side, its
exposed part (red) then its hidden part (green), so the bar is the channel's union and a shrinking
red part is that channel's communication getting hidden. The values are the sides'
``channel_totals`` (all GPUs summed over the analysed window, :mod:`nsysmoe.measure.channels`),
drawn as they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysmoe.model import channel_order_key
from nsysmoe.renderers.cells import versus
from nsysmoe.renderers.plot.common import (
    COLORS,
    PART_HELP,
    WIDTH,
    figure,
    grid,
    label_room,
    ms_label,
    patch,
    pct_label,
    side_names,
    windows_line,
)
from nsysmoe.results import Comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: bar segments, left to right: (channel_totals column, colour key)
SEGMENTS = (("exposed_ns", "exposed comm"), ("hidden_ns", "hidden comm"))


def channel_values(comparison: Comparison) -> dict[str, dict[str, dict[str, object]]]:
    """``{side label: {channel: row of its channel_totals}}``, the sides off then on."""
    return {
        s.label: {r["channel"]: r for r in s.analysis.channel_totals.iter_rows(named=True)}
        for s in (comparison.off, comparison.on)
    }


def channels_figure(comparison: Comparison) -> Figure:
    """Grouped bars per channel present on either side (report order), off above on, each bar
    exposed + hidden = the channel's communication time, labelled with both values in ms and
    the hidden share; a side without the channel says so instead of a bar."""
    sides = (comparison.off, comparison.on)
    values = channel_values(comparison)
    channels = sorted({c for v in values.values() for c in v}, key=channel_order_key)
    n = max(len(channels), 1)
    fig = figure(WIDTH, 1.9 + 0.62 * len(sides) * n)
    ax = fig.add_subplot()
    longest = max((int(r["comm_ns"]) for v in values.values() for r in v.values()), default=0)
    longest = longest / 1e6 or 1.0
    names = side_names(sides)
    ticks, labels, ends = [], [], []
    for i, channel in enumerate(channels):
        for j, side in enumerate(sides):
            y = i * (len(sides) + 1) + j
            ticks.append(y)
            labels.append(f"{channel}   {names[j]}" if j == 0 else names[j])
            row = values[side.label].get(channel)
            if row is None:
                ax.text(0, y, " absent on this side", va="center", fontsize=8.5, color="grey")
                continue
            left = 0.0
            for column, color in SEGMENTS:
                width = int(row[column]) / 1e6
                ax.barh(y, width, left=left, height=0.8, color=COLORS[color], edgecolor="white",
                        linewidth=0.8, label=f"{names[j]} {channel} {column}")  # fmt: skip
                left += width
            ax.text(left + 0.01 * longest, y, _value_label(row), va="center", fontsize=8.5)
            ends.append((left, _value_label(row)))
    if not channels:
        ax.text(0.5, 0.5, "no communication kernels on either side", transform=ax.transAxes,
                ha="center", va="center", color="grey")  # fmt: skip
        ax.set_yticks([])
    else:
        ax.set_yticks(ticks, labels, fontsize=9)
        ax.set_ylim(ticks[-1] + 0.8, -0.8)  # off of the first channel on top, as in the tables
    ax.tick_params(axis="y", length=0)
    ax.set_xlim(0, max(longest * 1.2, label_room(ends, 8.5, WIDTH - 2.6)))
    ax.set_xlabel("communication time per channel (ms, union per GPU, summed over GPUs)")
    grid(ax, "x")
    fig.legend(handles=[patch(k, PART_HELP[k]) for _, k in SEGMENTS], loc="outside lower center",
               ncols=2, fontsize=8.5, frameon=False)  # fmt: skip
    fig.suptitle(f"Exposed and hidden communication per channel, {versus(*names)}\n"
                 + windows_line(sides), fontsize=10.5)  # fmt: skip
    return fig


def _value_label(row: dict[str, object]) -> str:
    exposed, hidden = int(row["exposed_ns"]), int(row["hidden_ns"])  # type: ignore[call-overload]
    share = pct_label(row["hidden_pct"])  # type: ignore[arg-type]
    return f"exposed {ms_label(exposed)}, hidden {ms_label(hidden)} ({share} hidden)"
