"""Figures that mean what they say: a per-rank chart only of one run's ranks, labels never cut so
far that two names read alike, titles whose every claim holds ("windows differ" only when the
windows do), the sides' names in A/B figures; figures that show inline in Jupyter, leak nothing
when drawn in a loop, and come as inline SVG text for the HTML page."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import matplotlib
import polars as pl
import pytest

matplotlib.use("Agg")

from nsysmoe import api  # noqa: E402
from nsysmoe.measure import lanes  # noqa: E402
from nsysmoe.model import Iterations, Scope, Window  # noqa: E402
from nsysmoe.parallel import Executor  # noqa: E402
from nsysmoe.ranks import run_analysis  # noqa: E402
from nsysmoe.renderers.plot import (  # noqa: E402
    FILE_DPI,
    NOTEBOOK_DPI,
    breakdown_figure,
    channels_figure,
    ranks_figure,
    timeline_figure,
    waits_figure,
)
from nsysmoe.renderers.plot.common import short_ranks, window_key, windows_line  # noqa: E402
from tests.fixtures.generate import straggler_scenario, write_export  # noqa: E402

STEADY = Scope(window=Iterations(skip=1))
SVG = "{http://www.w3.org/2000/svg}svg"
#: rank file names that differ only in the middle: cut at a fixed column they read alike
LONG = "moe-straggler-experiment-2026-01-15-{}-hybridep-ep8-overlap-on-steady-window"


@pytest.fixture(scope="module")
def examples():
    return api.compare(*api.example_paths(), scope=STEADY)


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """Two 4-rank exports (one process per GPU in one file each), rank 1 then rank 2 late."""
    d = tmp_path_factory.mktemp("multi")
    paths = []
    for straggler, name in ((1, "base"), (2, "patched")):
        (spec,), _ = straggler_scenario(n_ranks=4, layout="multi", straggler=straggler)
        paths.append(write_export(d / f"{name}.sqlite", spec, "3.13.2"))
    return paths


@pytest.fixture(scope="module")
def long_named_run(tmp_path_factory):
    """A 4-file run whose file names part only in the middle."""
    d = tmp_path_factory.mktemp("long")
    specs, _ = straggler_scenario(n_ranks=4, layout="files")
    paths = [str(write_export(d / f"{LONG.format(f'rank{i}')}.sqlite", s, "3.13.2"))
             for i, s in enumerate(specs)]  # fmt: skip
    return paths


def stems(result) -> list[str]:
    return [stem for stem, _ in api.figure_jobs(result)]


def flat(text: str) -> str:
    return text.replace("\n", " ")


# --- the per-rank chart: only of one run's ranks ------------------------------------------------


def test_ab_of_single_gpu_traces_has_no_per_rank_chart(examples) -> None:
    assert len(examples.off.analysis.gpus) == len(examples.on.analysis.gpus) == 1
    assert not [s for s in stems(examples) if s.startswith("ranks")]
    assert stems(examples) == ["timeline-moe-hybridep-overlap-off",
                               "timeline-moe-hybridep-overlap-on",
                               "breakdown", "channels"]  # fmt: skip


def test_ab_of_multi_gpu_sides_draws_one_chart_per_side_of_its_own_ranks(multi) -> None:
    c = api.compare(*multi, labels=("base run", "patched run"))
    jobs = dict(api.figure_jobs(c))
    assert {"ranks-off", "ranks-on", "waits-off", "waits-on"} <= set(jobs)
    assert "ranks" not in jobs  # never off and on in one chart
    for label, side in (("off", c.off), ("on", c.on)):
        fig = jobs[f"ranks-{label}"]()
        fig.canvas.draw()
        title = flat(fig.get_suptitle())
        assert title.startswith(f"{side.name}: communication per rank (4 ranks)")
        (bars,) = fig.axes  # one file: its ranks share one step time, so no step panel
        ticks = [t.get_text() for t in bars.get_xticklabels()]
        assert len(ticks) == 4 and all(Path(side.analysis.path).stem in t for t in ticks)
        assert "one file: its median step" in title
        heat = jobs[f"waits-{label}"]()
        assert next(a for a in heat.axes if a.get_title()).get_title().startswith(
            f"{side.name}: exposed wait for a late peer")  # fmt: skip
    # each side's straggler is its own run's late rank, not a GPU of the other run
    for side, fig in ((c.off, jobs["ranks-off"]()), (c.on, jobs["ranks-on"]())):
        legend = " ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
        assert "straggler" in legend and Path(side.analysis.path).stem in legend


def test_a_trace_with_several_gpus_gets_its_chart_unless_they_ran_no_communication(multi) -> None:
    a = api.analyze(multi[0])
    assert len(a.gpus) == 4 and stems(a)[1:] == ["ranks", "waits"]
    quiet = replace(a, totals=replace(a.totals, comm_ns=0),
                    collectives=replace(a.collectives, matched=0))  # fmt: skip
    assert stems(quiet) == [stems(a)[0]]


# --- labels never cut to ambiguity --------------------------------------------------------------


def test_rank_labels_cut_in_the_middle_stay_distinct(long_named_run) -> None:
    run = api.analyze_many(long_named_run, executor=Executor(1))
    ranks = run.ranks["rank"].to_list()
    assert len(ranks) == 4 and all(len(r) > 60 for r in ranks)
    for limit in (34, 48, 60):
        shown = short_ranks(ranks, limit)
        assert len(set(shown)) == 4 and all(len(s) <= limit for s in shown)
    fig = ranks_figure(run)
    fig.canvas.draw()
    ticks = [t.get_text().split(" ", 1)[1] for t in fig.axes[0].get_xticklabels()]
    assert len(set(ticks)) == 4 and all(f"k{i}" in t for i, t in enumerate(ticks))  # "…rank0…"
    heat = waits_figure(run.collectives)
    (ax,) = [a for a in heat.axes if a.get_title()]
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert len(set(rows)) == len(rows) == 4


def off_the_figure(fig, dpi: float = 100) -> list[str]:
    """Visible texts that do not end inside the figure (cut off when saved at ``dpi``: text is
    relatively wider at a low resolution, where glyphs snap to whole pixels)."""
    from matplotlib.text import Text

    fig.set_dpi(dpi)
    fig.canvas.draw()
    box = fig.bbox
    hidden = set()  # labels of ticks outside the view, which matplotlib does not draw
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks():
                if not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9:
                    hidden |= {id(tick.label1), id(tick.label2)}
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text() or id(t) in hidden:
            continue
        e = t.get_window_extent()
        if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
            out.append(t.get_text())
    return out


def test_no_label_runs_off_a_figure(examples, multi, long_named_run) -> None:
    figs = dict(api.figures(examples))
    figs |= {f"ab-{k}": v for k, v in api.figures(api.compare(*multi)).items()}
    figs |= api.figures(api.analyze_many(long_named_run, executor=Executor(1)))
    for stem, fig in figs.items():
        for dpi in (NOTEBOOK_DPI, FILE_DPI):  # notebooks, written files
            assert off_the_figure(fig, dpi) == [], (stem, dpi)


def test_extension_is_kept_where_dropping_it_would_join_two_ranks() -> None:
    assert short_ranks(["x.sqlite:1:0", "x.nsys-rep:1:0", "y.sqlite:2:0"]) == [
        "x.sqlite:1:0", "x.nsys-rep:1:0", "y:2:0"]  # fmt: skip


def test_sides_with_one_name_are_told_apart(examples) -> None:
    same = replace(examples, on=replace(examples.on, name=examples.off.name))
    fig = breakdown_figure(same, {s.label: lanes.breakdown(s.analysis.totals)
                                  for s in (same.off, same.on)})  # fmt: skip
    ticks = [t.get_text().split("\n")[0] for t in fig.axes[0].get_yticklabels()]
    assert ticks == ["overlap off (off)", "overlap off (on)"]
    labels = [t.get_text() for t in channels_figure(same).axes[0].get_yticklabels()]
    assert {t.split("   ")[-1] for t in labels} == {"overlap off (off)", "overlap off (on)"}


# --- titles true --------------------------------------------------------------------------------


def test_ab_figures_use_the_side_names(examples) -> None:
    c = replace(examples, off=replace(examples.off, name="default"),
                on=replace(examples.on, name="100 MB buckets"))  # fmt: skip
    figs = api.figures(c)
    for stem in ("breakdown", "channels"):
        assert figs[stem].get_suptitle().split("\n")[0].endswith("default vs 100 MB buckets")
    ticks = [t.get_text() for t in figs["breakdown"].axes[0].get_yticklabels()]
    assert ticks[0].startswith("default\n") and ticks[1].startswith("100 MB buckets\n")
    assert figs["breakdown"].legends[0].get_title().get_text() == "values: default → 100 MB buckets"
    assert figs["timeline-moe-hybridep-overlap-off"].get_suptitle().startswith("default: ")
    assert figs["timeline-moe-hybridep-overlap-on"].get_suptitle().startswith("100 MB buckets: ")
    # the names given by the variable: said once, not "overlap overlap off vs overlap on"
    title = api.figures(examples)["channels"].get_suptitle().split("\n")[0]
    assert title == "Exposed and hidden communication per channel, overlap off vs on"


def test_windows_differ_only_when_they_do(examples) -> None:
    off, on = examples.off, examples.on
    assert window_key(off.analysis) == window_key(on.analysis)
    assert windows_line((off, on)).startswith("window (both sides): ")
    # the detected warm-up differs per side: the same iterations, described in other words
    c = api.compare(*api.example_paths())
    assert c.off.analysis.window_choice.description != c.on.analysis.window_choice.description
    for fig in (api.figures(c)[s] for s in ("breakdown", "channels")):
        title = flat(fig.get_suptitle())
        assert "differ" not in title
        assert f"window (both sides): the same {len(c.off.analysis.iterations)} iterations" in title
    # a relative time window: each side's text names its own first GPU activity
    rel = api.compare(*api.example_paths(), scope=Scope(window=Window(0, 40_000_000, True)))
    a = rel.on.analysis
    c = a.window_choice
    text = c.description.replace("5,622,126", "5,623,126")
    assert text != c.description  # as if the on trace's first GPU activity came 1 µs later
    moved = Window(a.window.start_ns + 1000, a.window.end_ns + 1000)
    later = replace(rel.on, analysis=replace(a, window_choice=replace(
        c, description=text, origin_ns=c.origin_ns + 1000, window=moved, cpu_window=moved)))
    line = windows_line((rel.off, later))
    assert "differ" not in line and "the same time window, [0 ns, 40,000,000 ns)" in line
    # iterations that are not the same: now they differ, and each side's window is given
    fewer = on.analysis.iterations.filter(pl.col("step") != on.analysis.iterations["step"][0])
    other = replace(on, analysis=replace(on.analysis, iterations=fewer))
    line = flat(windows_line((off, other)))
    assert line.startswith("windows differ: overlap off: ") and "; overlap on: " in line


def test_ranks_title_says_windows_differ_only_when_they_do(long_named_run) -> None:
    rel = Scope(window=Window(0, 8_000_000, relative=True))
    run = api.analyze_many(long_named_run, scope=rel, executor=Executor(1))
    assert len({a.window_choice.description for a in run.analyses}) > 1  # each file's origin
    title = flat(ranks_figure(run).get_suptitle())
    assert "differ" not in title and "the same time window" in title
    whole = api.analyze_many(long_named_run[:2], executor=Executor(1))
    tight = api.analyze_many(long_named_run[2:], scope=rel, executor=Executor(1))
    mixed = run_analysis([*whole.analyses, *tight.analyses])
    assert "windows differ per file" in flat(ranks_figure(mixed).get_suptitle())


def test_timeline_title_says_what_it_measured(examples) -> None:
    tl = lanes.timeline(examples.on.analysis)
    title = timeline_figure(tl).get_suptitle()
    assert "in this iteration (its GPU)" in title and "all GPUs" not in title
    legend = timeline_figure(tl).legends[0].get_title().get_text()
    assert "one lane per channel" in legend
    g = tl.gpus[0]
    sets = {n: c.exposed | c.hidden for c in g.channels for n in c.names}
    two = lanes.channel_lanes(sets, g.gemm_attn | g.other_compute | g.graph, cap=2)
    shared = replace(tl, max_channel_lanes=2, gpus=(replace(g, channels=two),))
    legend = timeline_figure(shared).legends[0].get_title().get_text()
    assert "one lane per channel" not in legend and "at most 2 per GPU" in legend


# --- Jupyter, memory, SVG -----------------------------------------------------------------------

JUPYTER = """
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
import nsysmoe
figs = nsysmoe.figures(nsysmoe.analyze(nsysmoe.example_paths()[0]))
data, _ = shell.display_formatter.format(next(iter(figs.values())))
assert data["image/png"][:8] == b"\\x89PNG\\r\\n\\x1a\\n", sorted(data)
import matplotlib.pyplot as plt
assert plt.get_fignums() == []
print("ok")
"""


def test_figures_display_inline_in_jupyter_without_matplotlib_inline() -> None:
    out = subprocess.run([sys.executable, "-c", JUPYTER], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_plot_in_a_loop_leaves_no_figure_behind(examples, tmp_path: Path, monkeypatch) -> None:
    import matplotlib.pyplot as plt

    drawn: list[weakref.ref] = []
    jobs = api.figure_jobs

    def watched(result):
        def keep(make):
            def wrapped():
                fig = make()
                drawn.append(weakref.ref(fig))
                return fig
            return wrapped
        # the A/B charts only: the timelines would only make the loop slower
        ab = {"breakdown", "channels"}
        return [(stem, keep(make)) for stem, make in jobs(result) if stem in ab]

    monkeypatch.setattr(api, "figure_jobs", watched)
    before = len(plt.get_fignums())
    for i in range(3):
        paths = api.plot(examples, tmp_path / str(i))
        assert sorted(p.name for p in paths) == ["breakdown.png", "breakdown.svg", "channels.png",
                                                 "channels.svg"]  # fmt: skip
    svgs = api.figure_svgs(examples)
    gc.collect()
    assert len(plt.get_fignums()) == before
    assert len(drawn) == 4 * len(svgs) == 8 and not [r for r in drawn if r() is not None]


@pytest.mark.parametrize("kind", ["trace", "comparison", "run"])
def test_figure_svgs_gives_one_svg_root_per_stem(kind, examples, multi) -> None:
    run = [str(p) for p in multi]
    make = {"trace": lambda: api.analyze(multi[0]), "comparison": lambda: examples,
            "run": lambda: api.analyze_many(run, executor=Executor(1))}  # fmt: skip
    result = make[kind]()
    svgs = api.figure_svgs(result)
    assert list(svgs) == stems(result) and svgs
    for stem, text in svgs.items():
        assert text.startswith("<svg") and "<?xml" not in text and "<!DOCTYPE" not in text, stem
        assert ET.fromstring(text).tag == SVG, stem
        assert "dc:date" not in text, stem  # no creation date: regenerated pages diff clean


def test_stems_are_unique_for_two_files_of_one_name(tmp_path: Path, examples) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d, src in ((a, api.example_paths()[0]), (b, api.example_paths()[1])):
        d.mkdir()
        (d / "run.sqlite").write_bytes(src.read_bytes())
    c = api.compare(a / "run.sqlite", b / "run.sqlite", labels=("off run", "on run"))
    svgs = api.figure_svgs(c)
    assert list(svgs)[:2] == ["timeline-run", "timeline-run-2"]
    titles = [f.get_suptitle().split(":")[0] for f in list(api.figures(c).values())[:2]]
    assert titles == ["off run", "on run"]
    assert {p.stem for p in api.plot(c, tmp_path / "figs")} == set(svgs)
