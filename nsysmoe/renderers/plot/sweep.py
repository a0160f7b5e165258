"""A sweep's settings as stacked bars: per setting its median step split into compute,
exposed communication and idle (per iteration per GPU), the SMs the dispatcher's kernels held
beside it, the best setting marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsysmoe.renderers.plot.common import WIDTH, figure, grid, ms_label, patch, stacked_segments
from nsysmoe.sweeps import Sweep

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the step's parts, left to right, and the colour each takes
PARTS = (("compute_ns", "compute only", "compute (and hidden comm)"),
         ("exposed_ns", "exposed comm", "exposed comm"), ("idle_ns", "idle", "idle"))  # fmt: skip


def sweep_figure(s: Sweep) -> Figure:
    """One bar per setting (the base on top); a part is labelled inside only when wide enough,
    and the step with the SMs held to the right of each bar."""
    rows = list(s.settings.iter_rows(named=True))
    fig = figure(WIDTH, 1.4 + 0.7 * len(rows))
    ax = fig.add_subplot()
    longest = max((sum((r[c] or 0.0) for c, _, _ in PARTS) for r in rows), default=0.0) / 1e6
    longest = longest or 1.0
    for y, r in enumerate(rows):
        left = stacked_segments(ax, y, [(color, (r[col] or 0.0) / 1e6) for col, color, _ in PARTS],
                                longest)  # fmt: skip
        held = "/".join("–" if s.sms_held[y].get(c) is None else str(s.sms_held[y][c])
                        for c in ("ep.dispatch", "ep.combine"))  # fmt: skip
        step = "–" if r["median_step_ns"] is None else ms_label(r["median_step_ns"])
        mark = "  best" if r["best"] else ""
        ax.text(left + 0.01 * longest, y, f"step {step}, SMs held {held}{mark}", va="center",
                fontsize=9, fontweight="bold" if r["best"] else "normal")  # fmt: skip
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=9.5)
    ax.invert_yaxis()  # the base on top, as in the table
    ax.set_xlim(0, longest * 1.35)
    ax.set_xlabel("median step, ms per iteration per GPU")
    grid(ax, "x")
    fig.legend(handles=[patch(color, label) for _, color, label in PARTS],
               loc="outside lower center", ncols=3, fontsize=8.5, frameon=False)  # fmt: skip
    state = "contract matched" if s.matched else "contract NOT matched"
    fig.suptitle(f"Sweep of {s.knob}: {len(rows)} settings ({state})", fontsize=10.5)
    return fig
