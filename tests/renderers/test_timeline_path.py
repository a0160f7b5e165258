"""The critical path drawn on the timeline (issue 34, "HTML: the path drawn on the timeline"):
the timeline draws the iteration whose path the analysis holds, a "critical path" lane on top of
each GPU panel carries exactly that path's time in the drawn interval, coloured by what the path
was doing, and an analysis without a path gets the figure it had before."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest
from matplotlib.colors import to_rgba

import nsysmoe
from nsysmoe import api
from nsysmoe.measure import lanes
from nsysmoe.renderers.plot import timeline_figure
from nsysmoe.renderers.plot.common import COLORS
from tests.fixtures.generate import straggler_scenario, write_export
from tests.renderers.test_plot import needs_mpl

#: the path's categories per colour group of the lane (any other category is a channel's)
GROUPS = {
    "path compute": ("gemm", "attention", "compute.other", "memcpy", "memset"),
    "path host": ("host", "sync"),
    "path gap": ("unexplained", "idle"),
}


@pytest.fixture(scope="module", params=[0, 1], ids=["overlap-off", "overlap-on"])
def analysis(request):
    return api.analyze(api.example_paths()[request.param])


def path_axes(fig):
    """The axes of the path lanes: one lane, labelled "critical path …"."""
    return [ax for ax in fig.axes
            if any(t.get_text().startswith("critical path") for t in ax.get_yticklabels())]


def widths_ms(ax, color_key: str | None = None) -> float:
    """The drawn bars' total width (ms on the x axis), of one colour or all."""
    total = 0.0
    for coll in ax.collections:
        if color_key is not None and tuple(coll.get_facecolor()[0]) != to_rgba(COLORS[color_key]):
            continue
        total += sum(p.get_extents().width for p in coll.get_paths())
    return total


def clipped(drawn: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    return drawn.with_columns(pl.col("start_ns").clip(lo, hi), pl.col("end_ns").clip(lo, hi))


def ns(frame: pl.DataFrame) -> int:
    return int((frame["end_ns"] - frame["start_ns"]).sum())


@needs_mpl
def test_the_path_lane_draws_the_path_within_the_drawn_iteration(analysis) -> None:
    drawn = analysis.critical_path.drawn
    assert not drawn.is_empty()
    tl = lanes.timeline(analysis)
    fig = timeline_figure(tl)
    (top,) = path_axes(fig)  # one GPU in the examples: one path lane, above its lanes
    assert len(fig.axes) == 2 * len(tl.gpus)
    assert top.get_position().y0 > fig.axes[0].get_position().y1
    mine = clipped(drawn.filter(pl.col("pid") == tl.gpus[0].pid), tl.lo_ns, tl.hi_ns)
    assert ns(mine) > 0.9 * (tl.hi_ns - tl.lo_ns)  # the path spans (nearly) the iteration
    assert widths_ms(top) == pytest.approx(ns(mine) / 1e6, rel=1e-9, abs=1e-9)
    for key, categories in GROUPS.items():
        want = ns(mine.filter(pl.col("category").is_in(categories)))
        assert widths_ms(top, key) == pytest.approx(want / 1e6, rel=1e-9, abs=1e-9), key
    comm = ns(mine.filter(~pl.col("category").is_in([c for g in GROUPS.values() for c in g])))
    assert widths_ms(top, "path comm") == pytest.approx(comm / 1e6, rel=1e-9, abs=1e-9)
    step = drawn["step"][0]
    assert f"critical path of iteration {step}" in fig.get_suptitle()
    legend = fig.legends[0]
    assert f"critical path of iteration {step}" in legend.get_title().get_text()
    texts = [t.get_text() for t in legend.get_texts()]
    assert all(any(t.startswith(f"path: {w}") for t in texts)
               for w in ("compute", "communication", "host", "gap"))  # fmt: skip


def test_the_timeline_draws_the_paths_iteration(analysis) -> None:
    it = analysis.iterations
    drawn = analysis.critical_path.drawn
    step = int(drawn["step"][0])
    row = it.filter(pl.col("step") == step).row(0, named=True)
    tl = lanes.timeline(analysis)
    assert (tl.lo_ns, tl.hi_ns) == (row["start_ns"], row["end_ns"])
    assert set(tl.critical_path["step"]) == {step}
    # a path of another iteration than the median-duration one: the timeline follows the path
    median = it.sort("step_ns", "step").row((len(it) - 1) // 2, named=True)["step"]
    other = it.filter(pl.col("step") != median).row(0, named=True)
    shift = other["start_ns"] - row["start_ns"]
    moved = drawn.with_columns(pl.lit(other["step"], pl.Int64).alias("step"),
                               pl.col("start_ns") + shift, pl.col("end_ns") + shift)  # fmt: skip
    a = replace(analysis, critical_path=replace(analysis.critical_path, drawn=moved))
    tl = lanes.timeline(a)
    assert (tl.lo_ns, tl.hi_ns) == (other["start_ns"], other["end_ns"])
    assert tl.how.startswith(f"iteration {other['step']},")
    want = clipped(moved, tl.lo_ns, tl.hi_ns)
    assert ns(tl.critical_path) == ns(want) > 0
    assert tl.critical_path["start_ns"].min() >= tl.lo_ns
    assert tl.critical_path["end_ns"].max() <= tl.hi_ns
    # an asked iteration that is not the path's: no path to draw on it
    assert lanes.timeline(a, step=other["step"]).critical_path.height == want.height
    assert lanes.timeline(a, step=median).critical_path.is_empty()


@needs_mpl
def test_without_a_path_the_figure_is_as_before(analysis) -> None:
    off = api.analyze(analysis.path, scope=nsysmoe.Scope(critical_path=False))
    assert off.critical_path is None
    with_path = timeline_figure(lanes.timeline(analysis))
    tl = lanes.timeline(off)
    assert tl.critical_path.is_empty()
    fig = timeline_figure(tl)
    assert len(with_path.axes) == 2 * len(tl.gpus) and len(fig.axes) == len(tl.gpus)
    assert path_axes(fig) == []
    assert "critical path" not in fig.get_suptitle()
    assert "critical path" not in fig.legends[0].get_title().get_text()
    # the lanes under the path lane are the same ones
    def ticks(f):
        return [[t.get_text() for t in ax.get_yticklabels()] for ax in f.axes[: len(tl.gpus)]]

    assert ticks(fig) == ticks(with_path)


@needs_mpl
def test_every_gpu_panel_gets_a_path_lane_empty_where_the_path_never_went(tmp_path) -> None:
    (spec,), _ = straggler_scenario(n_ranks=4, layout="multi", straggler=1)
    a = api.analyze(write_export(tmp_path / "four.sqlite", spec, "3.13.2"))
    tl = lanes.timeline(a)
    fig = timeline_figure(tl)
    tops = path_axes(fig)
    assert len(tl.gpus) == 4 and len(tops) == 4 and len(fig.axes) == 8
    path = clipped(a.critical_path.drawn, tl.lo_ns, tl.hi_ns)
    for g, top in zip(tl.gpus, tops, strict=True):
        want = ns(path.filter(pl.col("pid") == g.pid))
        assert widths_ms(top) == pytest.approx(want / 1e6, rel=1e-9, abs=1e-9)
        if not want:
            assert len(top.collections) == 0 and top.get_yticklabels()[0].get_text() == (
                "critical path  0 ms")  # fmt: skip
    assert sum(widths_ms(t) for t in tops) == pytest.approx(ns(path) / 1e6, rel=1e-9)


@needs_mpl
def test_the_html_pages_timeline_svg_carries_the_path_lane() -> None:
    svgs = api.figure_svgs(api.analyze(api.example_paths()[0]))
    (svg,) = (v for k, v in svgs.items() if k.startswith("timeline-"))
    assert "critical path" in svg
