"""notebooks/explore.ipynb executes headless, so a broken notebook fails the build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED

NOTEBOOK = REPO / "notebooks" / "explore.ipynb"


def test_explore_notebook_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if (SHARED / "traces").is_dir():
        monkeypatch.setenv("NSYSMOE_SHARED", str(SHARED))
    elif os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"shared traces missing at {SHARED} under CI=true")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors
    html = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]  # fmt: skip
    assert html, "results should render as HTML in Jupyter"
    if (SHARED / "traces").is_dir():
        text = str(nb.cells[-1].outputs)
        assert "not found" not in text
