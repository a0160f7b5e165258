"""Figures per communication channel: the timeline's channel lanes are exact interval sets (and
agree with the channel table), every kind of input draws, and the A/B channel chart's bars carry
the sides' channel_totals as they are."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.classify import COMPUTE_GEMM_ATTN
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure import lanes
from nsysmoe.measure.channels import CHANNEL_ORDER
from nsysmoe.measure.overlap import COMM
from nsysmoe.model import Window
from nsysmoe.renderers.plot import channels_figure, slug, timeline_figure, write_figures
from nsysmoe.renderers.plot.common import ms_label
from nsysmoe.renderers.plot.timeline import GRAPH_LANE
from nsysmoe.results import GpuLanes
from tests.fixtures.generate import graph_scenario, moe_step_scenario, write_export
from tests.renderers.test_plot import STEADY, check_files, needs_mpl


def iset(df: pl.DataFrame) -> IntervalSet:
    return IntervalSet.from_arrays(df["start"].to_numpy(), df["end"].to_numpy())


def same(a: IntervalSet, b: IntervalSet) -> bool:
    return a.starts.tolist() == b.starts.tolist() and a.ends.tolist() == b.ends.tolist()


def order(channel: str) -> tuple[int, str]:
    return (CHANNEL_ORDER.index(channel) if channel in CHANNEL_ORDER else 99, channel)


def expected_channels(kernels: pl.DataFrame) -> dict[str, tuple[IntervalSet, IntervalSet]]:
    """channel → (exposed, hidden) from the classified kernels of one GPU, written out plainly:
    compute = every non-communication kernel, exposed = C_x − compute, hidden = C_x ∩ compute."""
    compute = iset(kernels.filter(pl.col("class") != COMM))
    comm = kernels.filter(pl.col("class") == COMM)
    out = {}
    for channel in sorted(set(comm["channel"].fill_null("other").to_list()), key=order):
        c = iset(comm.filter(pl.col("channel").fill_null("other") == channel))
        out[channel] = (c - compute, c & compute)
    return out


def check_timeline_exact(analysis) -> list[GpuLanes]:
    """Every drawn GPU's channel lanes against the kernels of the drawn iteration."""
    tl = lanes.timeline(analysis)
    kernels = Window(tl.lo_ns, tl.hi_ns).select(analysis.source.kernels)
    assert tl.gpus
    for g in tl.gpus:
        mine = kernels.filter((pl.col("pid") == g.pid) & (pl.col("device") == g.device))
        want = expected_channels(mine)
        assert len(want) <= lanes.MAX_CHANNEL_LANES  # no lane shared in these inputs
        assert [c.names for c in g.channels] == [(n,) for n in want]  # report order
        for c in g.channels:
            exposed, hidden = want[c.names[0]]
            assert same(c.exposed, exposed) and same(c.hidden, hidden)
            assert not len(c.exposed & c.hidden)
        # the channel lanes partition the GPU's communication lane
        union_e, union_h = IntervalSet.empty(), IntervalSet.empty()
        for c in g.channels:
            union_e, union_h = union_e | c.exposed, union_h | c.hidden
        assert same(union_e, g.exposed) and same(union_h, g.hidden)
    return list(tl.gpus)


@pytest.mark.parametrize("kind", ["nsys", "kineto"])
def test_channel_lanes_are_exact_on_the_shipped_examples(kind: str) -> None:
    for path in api.example_paths(kind):
        gpus = check_timeline_exact(api.analyze(api.load(path), scope=STEADY))
        assert [c.names[0] for c in gpus[0].channels] == ["ep.dispatch", "ep.combine",
                                                            "nccl.allreduce"]  # fmt: skip


def test_channel_lanes_over_the_window_equal_the_channel_table() -> None:
    """The same sets over the whole analysed window give the channel table's exposed and hidden
    time (measured there by a sweep, not by interval sets)."""
    analysis = api.analyze(api.load(api.example_paths()[1]), scope=STEADY)
    src = analysis.source
    kernels, memops = analysis.window.select(src.kernels), analysis.window.select(src.trace.memops)
    for g in analysis.gpus.iter_rows(named=True):
        of = (pl.col("pid") == g["pid"]) & (pl.col("device") == g["device"])
        got = lanes.gpu_lanes(g["pid"], g["device"], None, kernels.filter(of), memops.filter(of))
        table = analysis.channels.filter(of)
        assert [(c.names[0], c.exposed.length, c.hidden.length) for c in got.channels] == list(
            table.select("channel", "exposed_ns", "hidden_ns").iter_rows()
        )


@pytest.fixture(scope="module")
def alltoall(tmp_path_factory) -> Path:
    spec, _ = moe_step_scenario(dispatcher="alltoall", overlap=True, steps=3, n_processes=2)
    return write_export(tmp_path_factory.mktemp("a2a") / "alltoall.sqlite", spec)


def test_channel_lanes_are_exact_on_an_alltoall_fixture(alltoall: Path) -> None:
    gpus = check_timeline_exact(api.analyze(api.load(alltoall)))
    assert len(gpus) == 2
    assert all({"ep.dispatch", "ep.combine"} <= {c.names[0] for c in g.channels} for g in gpus)


def synthetic_kernels(channels: dict[str, list[tuple[int, int]]],
                      compute: list[tuple[int, int]]) -> pl.DataFrame:  # fmt: skip
    rows = [(s, e, COMM, ch) for ch, spans in channels.items() for s, e in spans]
    rows += [(s, e, "gemm", None) for s, e in compute]
    return pl.DataFrame(rows, schema={"start": pl.Int64, "end": pl.Int64, "class": pl.String,
                                      "channel": pl.String}, orient="row")  # fmt: skip


SIX = {  # six channels, their lengths 60, 50, 40, 30, 20, 10 ns, listed out of report order
    "other": [(0, 60)],
    "nccl.allgather": [(100, 150)],
    "ep.dispatch": [(200, 240)],
    "nccl.sendrecv": [(300, 330)],
    "ep.combine": [(400, 420)],
    "nccl.allreduce": [(500, 505), (520, 525)],
}


def test_past_the_cap_the_smallest_channels_share_the_last_lane() -> None:
    kernels = synthetic_kernels(SIX, compute=[(50, 110), (415, 510)])
    g = lanes.gpu_lanes(1, 0, None, kernels, kernels.clear().select("start", "end"), cap=4)
    assert [c.names for c in g.channels] == [
        ("ep.dispatch",),
        ("nccl.allgather",),
        ("other",),  # the 3 longest, report order
        ("ep.combine", "nccl.allreduce", "nccl.sendrecv"),  # the rest, report order
    ]
    shared = g.channels[-1]
    c = IntervalSet.from_arrays([300, 400, 500, 520], [330, 420, 505, 525])
    compute = IntervalSet.from_arrays([50, 415], [110, 510])
    assert same(shared.exposed, c - compute) and same(shared.hidden, c & compute)
    assert shared.exposed.length == 30 + 15 + 5 and shared.hidden.length == 5 + 5
    uncapped = lanes.gpu_lanes(1, 0, None, kernels, kernels.clear().select("start", "end"), cap=0)
    assert [c.names[0] for c in uncapped.channels] == sorted(SIX, key=order)


@needs_mpl
def test_a_capped_timeline_says_so_and_names_the_shared_channels() -> None:
    analysis = api.analyze(api.load(api.example_paths()[1]), scope=STEADY)
    tl = lanes.timeline(analysis)
    kernels = synthetic_kernels(SIX, compute=[(50, 110)])
    lo = tl.lo_ns
    shifted = kernels.with_columns(pl.col("start") + lo, pl.col("end") + lo)
    g = lanes.gpu_lanes(1, 0, "X", shifted, shifted.clear().select("start", "end"))
    fig = timeline_figure(replace(tl, gpus=(tl.gpus[0], g)))
    title = fig.get_suptitle()
    assert "at most 4 channel lanes per GPU" in title
    assert "ep.combine, nccl.allreduce, nccl.sendrecv" in title
    ticks = [t.get_text().split("  ")[0] for t in fig.axes[1].get_yticklabels()]
    assert ticks[:4] == ["ep.dispatch", "nccl.allgather", "other", "ep.combine + 2 more"]
    legend = fig.legends[0].get_title().get_text()
    assert all(n in legend for n in SIX)


def tick_labels(fig, i: int = 0) -> list[str]:
    return [t.get_text() for t in fig.axes[i].get_yticklabels()]


@needs_mpl
def test_timeline_lanes_name_the_channels_in_report_order() -> None:
    analysis = api.analyze(api.load(api.example_paths()[1]), scope=STEADY)
    tl = lanes.timeline(analysis)
    fig = timeline_figure(tl)
    ticks = tick_labels(fig)
    g = tl.gpus[0]
    assert [t.split("  ")[0] for t in ticks] == ["ep.dispatch", "ep.combine", "nccl.allreduce",
                                                 "GEMM/attention", "other compute",
                                                 "memcpy/memset", "idle"]  # fmt: skip
    for tick, c in zip(ticks, g.channels, strict=False):
        total = ms_label(c.exposed.length + c.hidden.length)
        assert tick == f"{c.names[0]}  {total}, {ms_label(c.exposed.length)} exp."
    # red exposed and green hidden per channel lane: two bar collections each
    assert len(fig.axes[0].collections) == 2 * len(g.channels) + 4
    assert "one lane per channel (ep.dispatch, ep.combine, nccl.allreduce)" in (
        fig.legends[0].get_title().get_text())  # fmt: skip


@needs_mpl
def test_example_pair_draws_every_figure_with_the_channel_chart(tmp_path: Path) -> None:
    off, on = (api.load(p) for p in api.example_paths())
    comparison = api.compare(off, on, scope=STEADY)
    jobs = api.figure_jobs(comparison)
    if "channels" not in dict(jobs):  # until api.figure_jobs draws it for every A/B
        jobs.append(("channels", partial(channels_figure, comparison)))
    stems = {"breakdown", "channels"} | {f"timeline-{slug(t.path)}" for t in (off, on)}
    check_files(write_figures(tmp_path, jobs), stems)


@needs_mpl
def test_single_trace_and_kineto_trace_draw(tmp_path: Path) -> None:
    for path in (api.example_paths()[0], api.example_paths("kineto")[1]):
        analysis = api.analyze(api.load(path))
        paths = api.plot(analysis, tmp_path / path.name)
        check_files(paths, {f"timeline-{slug(str(path))}"})


@needs_mpl
def test_trace_without_communication_draws_one_empty_comm_lane(traces: Path, tmp_path) -> None:
    analysis = api.analyze(api.load(traces / "nsys" / "jacobi-p2p-memcpy-2gpu.sqlite"))
    tl = lanes.timeline(analysis)
    assert all(g.channels == () for g in tl.gpus)
    fig = timeline_figure(tl)
    assert tick_labels(fig)[0] == "communication  0 ms"
    assert "no communication kernels" in fig.legends[0].get_title().get_text()
    check_files(api.plot(analysis, tmp_path), {"timeline-jacobi-p2p-memcpy-2gpu"})


@needs_mpl
def test_only_the_other_channel(tmp_path: Path) -> None:
    """Rules that name no channel: every communication kernel is ``other``, one lane."""
    analysis = api.analyze(api.load(api.example_paths()[1]), scope=STEADY)
    src = analysis.source
    kernels = src.kernels.with_columns(
        pl.when(pl.col("class") == COMM).then(pl.lit("other")).alias("channel")
    )
    analysis = replace(analysis, source=replace(src, kernels=kernels))
    (g,) = check_timeline_exact(analysis)
    assert [c.names for c in g.channels] == [("other",)]
    fig = timeline_figure(lanes.timeline(analysis))
    assert tick_labels(fig)[0].startswith("other  ")
    check_files(write_figures(tmp_path, api.figure_jobs(analysis)),
                {f"timeline-{slug(analysis.path)}"})  # fmt: skip


@needs_mpl
def test_whole_graph_rows_get_their_own_lane(tmp_path: Path) -> None:
    spec, _ = graph_scenario("graph")
    path = write_export(tmp_path / "graph.sqlite", spec)
    analysis = api.analyze(api.load(path))
    (g,) = check_timeline_exact(analysis)
    tl = lanes.timeline(analysis)
    kernels = Window(tl.lo_ns, tl.hi_ns).select(analysis.source.kernels)
    assert len(g.graph) and same(g.graph, iset(kernels.filter(pl.col("class") == "graph")))
    other = kernels.filter(~pl.col("class").is_in([COMM, "graph", *COMPUTE_GEMM_ATTN]))
    assert same(g.other_compute, iset(other))
    # graph rows count as compute: hidden under them is hidden
    assert same(g.hidden, iset(kernels.filter(pl.col("class") == COMM))
                & iset(kernels.filter(pl.col("class") != COMM)))  # fmt: skip
    ticks = tick_labels(timeline_figure(tl))
    assert f"{GRAPH_LANE}  {ms_label(g.graph.length)}" in ticks
    check_files(api.plot(analysis, tmp_path / "figs"), {"timeline-graph"})


# --- the A/B channel chart -----------------------------------------------------------------


@pytest.fixture(scope="module")
def comparison():
    return api.compare(*(api.load(p) for p in api.example_paths()), scope=STEADY)


def bar_values(fig) -> dict[str, tuple[float, float]]:
    """container label → (left, width) of its one bar, in ns."""
    out = {}
    for container in fig.axes[0].containers:
        (rect,) = container.patches
        out[container.get_label()] = (rect.get_x() * 1e6, rect.get_width() * 1e6)
    return out


@needs_mpl
def test_channel_chart_bars_carry_the_channel_totals(comparison) -> None:
    fig = channels_figure(comparison)
    got = bar_values(fig)
    texts = [t.get_text() for t in fig.axes[0].texts]
    n = 0
    for side in (comparison.off, comparison.on):
        for row in side.analysis.channel_totals.iter_rows(named=True):
            key = f"{side.name} {row['channel']}"
            left, exposed = got[f"{key} exposed_ns"]
            hidden_left, hidden = got[f"{key} hidden_ns"]
            assert left == 0 and exposed == pytest.approx(row["exposed_ns"], abs=1e-3)
            assert hidden == pytest.approx(row["hidden_ns"], abs=1e-3)
            assert hidden_left == pytest.approx(row["exposed_ns"], abs=1e-3)  # stacked
            label = (f"exposed {ms_label(row['exposed_ns'])}, hidden {ms_label(row['hidden_ns'])}"
                     f" ({row['hidden_pct']:.1f} % hidden)")  # fmt: skip
            assert label in texts
            n += 2
    assert len(got) == n == 12
    ticks = tick_labels(fig)
    assert ticks == ["ep.dispatch   overlap off", "overlap on", "ep.combine   overlap off",
                     "overlap on", "nccl.allreduce   overlap off", "overlap on"]  # fmt: skip


@needs_mpl
def test_channel_chart_with_a_channel_on_one_side_only_and_with_none(comparison) -> None:
    on = comparison.on.analysis
    only = on.channel_totals.filter(pl.col("channel") != "ep.combine")
    extra = on.channel_totals.filter(pl.col("channel") == "nccl.allreduce").with_columns(
        pl.lit("my.channel").alias("channel"))  # fmt: skip
    c = replace(comparison, on=replace(comparison.on, analysis=replace(
        on, channel_totals=pl.concat([only, extra]))))  # fmt: skip
    fig = channels_figure(c)
    ticks = tick_labels(fig)
    assert ticks[::2] == ["ep.dispatch   overlap off", "ep.combine   overlap off",
                          "nccl.allreduce   overlap off", "my.channel   overlap off"]  # fmt: skip
    assert sum(" absent on this side" == t.get_text() for t in fig.axes[0].texts) == 2
    assert "on ep.combine exposed_ns" not in bar_values(fig)
    empty = replace(
        c,
        off=replace(
            c.off, analysis=replace(c.off.analysis, channel_totals=on.channel_totals.clear())
        ),
        on=replace(c.on, analysis=replace(on, channel_totals=on.channel_totals.clear())),
    )
    fig = channels_figure(empty)
    fig.canvas.draw()
    assert bar_values(fig) == {}
    assert any("no communication kernels" in t.get_text() for t in fig.axes[0].texts)
