"""The top-level API: ``import nsysmoe`` is cheap, its names are the functions (no module shadows
them, whatever was imported before), ``nsysmoe.api`` keeps working, and the README example runs."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import nsysmoe
from nsysmoe import api

README = Path(__file__).parents[1] / "README.md"


def test_top_level_names_are_the_api_functions() -> None:
    for module in ("ab", "peers", "pipeline", "renderers", "model"):  # once shadowed the API
        importlib.import_module(f"nsysmoe.{module}")
    for name in ("load", "analyze", "compare", "compat", "render", "plot", "figures",
                 "analyze_many", "compare_many", "kernel_summary", "example_paths"):  # fmt: skip
        assert getattr(nsysmoe, name) is getattr(api, name), name
        assert callable(getattr(nsysmoe, name)), name
    assert nsysmoe.Scope is nsysmoe.model.Scope and nsysmoe.Window is nsysmoe.model.Window


def test_import_is_cheap() -> None:
    """``import nsysmoe`` (and so ``nsysmoe --help``) loads neither polars nor numpy."""
    code = "import sys, nsysmoe; print('polars' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_readme_api_example_runs_as_written() -> None:
    text = README.read_text()
    block = re.search(r"### Python / Jupyter\n\n```python\n(.*?)```", text, re.S)
    assert block, "README lost its API example"
    code = block.group(1)
    assert "import nsysmoe\n" in code and "from nsysmoe import api" not in code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "### nsysmoe A/B: overlap off vs on" in out.stdout
