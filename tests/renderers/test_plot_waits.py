"""The rank × channel exposed-wait heat map draws the run's waits table as it is."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from nsysmoe.api import analyze, analyze_many, figure_jobs
from nsysmoe.parallel import Executor
from nsysmoe.renderers.plot import waits_figure
from tests.fixtures.generate import straggler_scenario, write_export


def test_heat_map_cells_are_the_exposed_waits(tmp_path: Path) -> None:
    specs, _ = straggler_scenario(layout="files")
    paths = [str(write_export(tmp_path / f"{s.label}.sqlite", s, "3.13.2")) for s in specs]
    run = analyze_many(paths, executor=Executor(1))
    fig = waits_figure(run.collectives)
    (ax,) = [a for a in fig.axes if a.get_title()]
    cells = sorted(t.get_text() for t in ax.texts)
    want = sorted(f"{v / 1e6:,.3f}" for v in run.collectives.waits["exposed_wait_ns"])
    assert cells == want
    assert "straggler" in ax.get_title()
    names = [n for n, _ in figure_jobs(run)]
    assert "waits" in names
    fig.savefig(tmp_path / "waits.png")


def test_no_heat_map_without_matched_collectives() -> None:
    from nsysmoe.api import example_paths

    names = [n for n, _ in figure_jobs(analyze(example_paths()[0]))]
    assert "waits" not in names
