"""Figures: written in every format, exact breakdown parts, the right iteration, readable ticks."""

from __future__ import annotations

import math
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.errors import NsysmoeError
from nsysmoe.intervals import IntervalSet
from nsysmoe.measure import lanes
from nsysmoe.measure.lanes import PARTS
from nsysmoe.model import Iterations, Scope
from nsysmoe.ranks import run_analysis
from nsysmoe.renderers.plot import breakdown_figure, ranks_figure, timeline_figure, write_figures
from nsysmoe.renderers.plot.common import MAX_BARS, bars

#: figures need matplotlib, an optional dependency; the exact arithmetic is tested without it
needs_mpl = pytest.mark.skipif(
    find_spec("matplotlib") is None, reason="matplotlib not installed (pip install matplotlib)"
)

STEADY = Scope(window=Iterations(skip=1))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pair():
    off, on = (api.load(p) for p in api.example_paths())
    return off, on, api.compare(off, on, scope=STEADY)


def check_files(paths: list[Path], stems: set[str]) -> None:
    """Each stem once per format, non-empty, and really PNG / SVG."""
    assert {(p.stem, p.suffix) for p in paths} == {(s, e) for s in stems for e in (".png", ".svg")}
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000, p
        if p.suffix == ".png":
            assert data.startswith(PNG_MAGIC), p
        else:
            assert b"<svg" in data[:2000], p


@needs_mpl
def test_example_pair_writes_timelines_and_breakdown(pair, tmp_path: Path) -> None:
    off, on, comparison = pair
    paths = api.plot(comparison, tmp_path)
    # one GPU per side: no per-rank chart (off and on are not two ranks of one run)
    stems = {"breakdown", *(f"timeline-{Path(t.path).stem}" for t in (off, on))}
    # the per-channel A/B chart (renderers.plot.channels), once api.figure_jobs draws it
    stems |= {"channels"} & {stem for stem, _ in api.figure_jobs(comparison)}
    check_files(paths, stems)


def breakdown_parts(comparison) -> dict[str, dict[str, int]]:
    return {s.label: lanes.breakdown(s.analysis.totals) for s in (comparison.off, comparison.on)}


def test_breakdown_parts_add_up_to_span_exactly(pair) -> None:
    comparison = pair[2]
    parts = breakdown_parts(comparison)
    assert set(parts) == {"off", "on"}
    for side in (comparison.off, comparison.on):
        p, g = parts[side.label], side.analysis.gpus
        assert tuple(p) == PARTS and all(v >= 0 for v in p.values())
        assert sum(p.values()) == int(g["span_ns"].sum())
        assert p["exposed comm"] + p["hidden comm"] == int(g["comm_ns"].sum())
        assert p["compute only"] + p["hidden comm"] == int(g["compute_ns"].sum())
        assert sum(p.values()) - p["idle"] == int(g["active_ns"].sum())
    # the same numbers the comparison table reports
    for key, part in (("exposed_ns", "exposed comm"), ("idle_ns", "idle")):
        row = comparison.row(key)
        assert (parts["off"][part], parts["on"][part]) == (row.off, row.on)
    assert parts["off"]["copies only"] > 0  # the examples have copies no kernel overlaps


@needs_mpl
def test_breakdown_labels_the_hidden_share_and_windows(pair) -> None:
    comparison = pair[2]
    fig = breakdown_figure(comparison, breakdown_parts(comparison))
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "36.8 % of comm hidden" in ticks[1] and "0.1 % of comm hidden" in ticks[0]
    window = comparison.off.analysis.window_choice.description
    assert window in fig.get_suptitle().replace("\n", " ")


def plot_in_worker(outdir: str) -> tuple[list[str], bool]:
    c = api.compare(*api.example_paths())
    jobs = [job for job in api.figure_jobs(c) if job[0] == "breakdown"]
    paths = write_figures(Path(outdir), jobs, formats=("png",))
    return [p.name for p in paths], "matplotlib.pyplot" in sys.modules


@needs_mpl
def test_plots_draw_in_a_fresh_worker_process_without_pyplot(tmp_path: Path) -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        names, pyplot = pool.submit(plot_in_worker, str(tmp_path)).result(timeout=120)
    assert names == ["breakdown.png"] and not pyplot
    assert (tmp_path / "breakdown.png").read_bytes().startswith(PNG_MAGIC)


@needs_mpl
def test_timeline_draws_the_median_iteration_with_its_hidden_share(pair) -> None:
    analysis = pair[2].on.analysis
    it = analysis.iterations.sort("step_ns", "step")
    row = it.row((len(it) - 1) // 2, named=True)
    title = timeline_figure(lanes.timeline(analysis)).get_suptitle()
    assert f"iteration {row['step']}," in title
    # the drawn interval is the one the per-iteration table measured: same hidden share
    assert f"{row['hidden_pct']:.1f} %" in title
    other = it["step"][0]
    drawn = timeline_figure(lanes.timeline(analysis, step=other)).get_suptitle()
    assert f"iteration {other} (" in drawn
    with pytest.raises(NsysmoeError, match="not among the analysed"):
        lanes.timeline(analysis, step=999)


@needs_mpl
def test_timeline_without_iterations_draws_the_middle_of_the_window(pair) -> None:
    trace = replace(pair[1], nvtx=pair[1].nvtx.clear())
    fig = timeline_figure(lanes.timeline(api.analyze(trace)))
    assert "middle 10 % of the window" in fig.get_suptitle()


def test_sub_pixel_gaps_are_closed_only_for_crowded_lanes() -> None:
    starts = np.arange(0, 15 * (MAX_BARS + 1), 15)
    crowded = IntervalSet.from_arrays(starts, starts + 10)  # 10 ns on, 5 ns off
    assert bars(crowded, 0, pixel_ns=5) == [(0.0, (starts[-1] + 10) / 1e6)]  # up to 5 ns
    assert len(bars(crowded, 0, pixel_ns=4)) == MAX_BARS + 1  # 5-ns gaps are wider: kept
    few = IntervalSet.from_arrays(starts[:10], starts[:10] + 10)
    assert len(bars(few, 0, pixel_ns=5)) == 10


def many_ranks(comparison, n: int):
    """A synthetic n-rank run (from the example sides), rank 17 with the least communication,
    rank 41 with the longest step."""
    analyses = []
    for i in range(n):
        a = (comparison.off, comparison.on)[i % 2].analysis
        less = 30_000_000 * (i == 17)
        gpus = a.gpus.with_columns(pl.col("exposed_ns") - less, pl.col("comm_ns") - less)
        slow = a.iterations.with_columns((pl.col("step_ns") * (1 + 0.2 * (i == 41))).cast(pl.Int64))
        path = f"/runs/job/node{i // 8:02d}/rank{i:02d}.nsys-rep"
        analyses.append(replace(a, path=path, gpus=gpus, iterations=slow))
    return run_analysis(analyses)


def overlapping(texts) -> list[tuple[str, str]]:
    """Pairs of visible texts whose drawn boxes intersect."""
    shown = [t for t in texts if t.get_visible() and t.get_text()]
    boxes = [t.get_window_extent() for t in shown]
    return [
        (shown[i].get_text(), shown[j].get_text())
        for i in range(len(boxes))
        for j in range(i + 1, len(boxes))
        if boxes[i].overlaps(boxes[j])
    ]


def slanted_labels_clear(ax) -> bool:
    """Parallel slanted tick labels never touch when neighbouring anchors are further apart,
    across the text direction, than a line of text is high (their bounding boxes do overlap)."""
    labels = ax.get_xticklabels()
    anchors = [ax.transData.transform((x, 0))[0] for x in ax.get_xticks()]
    gap = min(b - a for a, b in zip(anchors, anchors[1:], strict=False))
    across = gap * math.sin(math.radians(labels[0].get_rotation()))
    return across > 1.2 * labels[0].get_fontsize() * ax.figure.dpi / 72


@needs_mpl
def test_ranks_figure_stays_readable_with_64_ranks(pair, tmp_path: Path) -> None:
    run = many_ranks(pair[2], 64)
    assert run.stragglers.by_comm_wait.rank.startswith("rank17")
    assert run.stragglers.by_step_time.rank.startswith("rank41")
    fig = ranks_figure(run)
    fig.canvas.draw()
    bars, key, steps = fig.axes
    assert steps.get_ylabel().startswith("median step")
    assert len(bars.get_xticklabels()) == 64
    assert overlapping(bars.get_xticklabels()) == []
    assert len(key.texts) == 64 and overlapping(key.texts) == []
    legend = [t.get_text() for t in bars.get_legend().get_texts()]
    assert any("#17 rank17" in t for t in legend) and any("#41 rank41" in t for t in legend)
    # the 64 copies of one trace are one run whose collectives all match: the heat map too
    check_files(api.plot(run, tmp_path), {"ranks", "waits"})


@needs_mpl
def test_real_trace_timeline(traces: Path, tmp_path: Path) -> None:
    trace = api.load(traces / "nsys" / "nersc-ddp-4gpu-baseline.sqlite")
    analysis = api.analyze(trace, scope=STEADY)
    paths = api.plot(analysis, tmp_path)
    check_files(paths, {"timeline-nersc-ddp-4gpu-baseline"})


@needs_mpl
def test_real_six_rank_run(traces: Path, tmp_path: Path) -> None:
    paths = sorted(str(p) for p in (traces / "nsys" / "nccl-allreduce-6ranks").glob("*.sqlite"))
    assert len(paths) == 6
    run = api.analyze_many(paths)
    fig = ranks_figure(run)
    fig.canvas.draw()
    (bars,) = fig.axes  # no iterations in these files: no step-time panel, no key
    assert len(bars.get_xticklabels()) == 6 and slanted_labels_clear(bars)
    straggler = run.stragglers.by_comm_wait.rank.split(".sqlite")[0]
    assert any(straggler in t.get_text() for t in bars.get_legend().get_texts())
    check_files(api.plot(run, tmp_path), {"ranks", "waits"})
