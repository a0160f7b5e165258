"""notebooks/explore.ipynb executes headless from any working directory, so a broken notebook
fails the build; every figure cell shows its figure as an image; and the notebook is committed
with its outputs (so it reads on GitHub), small enough to keep in the repository.

Figure cells carry the cell tag ``figure``; one that draws a shared real trace also carries
``shared-trace`` and shows its image only where the shared traces are present (they must be
under ``CI=true``). Regenerate the saved outputs with ``python -m tests.test_notebook``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, TRACES

NOTEBOOK = REPO / "notebooks" / "explore.ipynb"
REAL = TRACES / "nsys" / "nersc-ddp-4gpu-baseline.sqlite"  # the one the notebook reads
IMAGES = {"image/png", "image/svg+xml"}
MAX_BYTES = 1_500_000  # the committed notebook, outputs included


def code_cells(nb) -> list:  # noqa: ANN001 - a NotebookNode
    return [c for c in nb.cells if c.cell_type == "code"]


def tags(cell) -> list[str]:  # noqa: ANN001
    return list(cell.get("metadata", {}).get("tags", []))


def images(cell) -> list:  # noqa: ANN001
    return [o for o in cell.get("outputs", []) if IMAGES & set(o.get("data", {}))]


def errors(nb) -> list:  # noqa: ANN001
    return [o for c in code_cells(nb) for o in c.get("outputs", [])
            if o.get("output_type") == "error"]  # fmt: skip


def execute(nb, cwd: Path):  # noqa: ANN001, ANN201
    """Run every cell in a fresh kernel started in ``cwd``; the kernel inherits the environment
    (``NSYSMOE_SHARED`` where set). No timings recorded, so a saved notebook diffs clean."""
    import nbclient

    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(cwd)}}).execute()  # fmt: skip
    return nb


def test_figure_cells_are_tagged() -> None:
    """Every cell that shows a figure is tagged, so the checks below cover all of them."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    shows = [c for c in code_cells(nb) if re.search(r"figures(\([^)]*\))?\[", c.source)]
    assert len(shows) >= 4
    assert all("figure" in tags(c) for c in shows), [c.source for c in shows
                                                     if "figure" not in tags(c)]  # fmt: skip


def test_explore_notebook_runs_anywhere_and_shows_every_figure(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    if not REAL.is_file() and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"shared trace missing at {REAL} under CI=true")
    # a working directory with nothing in it: the notebook finds its data without one
    nb = execute(nbformat.read(NOTEBOOK, as_version=4), tmp_path)
    assert not errors(nb), errors(nb)
    html = [o for c in code_cells(nb) for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]  # fmt: skip
    assert html, "results should render as HTML in Jupyter"
    figure_cells = [c for c in code_cells(nb) if "figure" in tags(c)]
    for cell in figure_cells:
        if "shared-trace" in tags(cell) and not REAL.is_file():
            assert "not found" in str(cell.outputs)
            continue
        assert images(cell), f"no image from the figure cell:\n{cell.source}"
        assert "not found" not in str(cell.outputs)


def test_committed_notebook_holds_its_outputs_and_stays_small() -> None:
    """Read on GitHub, the notebook shows what it computed: every cell run, no error, an image
    from every figure cell (the shared trace's where it was present when saved)."""
    nbformat = pytest.importorskip("nbformat")
    assert NOTEBOOK.stat().st_size < MAX_BYTES
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(c.execution_count for c in code_cells(nb)), "save the notebook executed"
    assert not errors(nb)
    for cell in code_cells(nb):
        if "figure" in tags(cell) and "shared-trace" not in tags(cell):
            assert images(cell), f"saved without its image:\n{cell.source}"
    assert len(images_all := [o for c in code_cells(nb) for o in images(c)]) >= 3, images_all


def main() -> None:
    """Execute the notebook in its folder and save it with its outputs (PNG at the modest
    resolution :data:`nsysmoe.renderers.plot.NOTEBOOK_DPI`), ids and metadata kept."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in code_cells(nb):
        cell.outputs, cell.execution_count = [], None
    execute(nb, NOTEBOOK.parent)
    if errors(nb):
        sys.exit(f"not saved: the notebook failed: {errors(nb)[0].get('evalue')}")
    nbformat.write(nb, NOTEBOOK)
    print(f"{NOTEBOOK}: {NOTEBOOK.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
