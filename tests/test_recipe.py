"""``nsys recipe nsysmoe`` (issue 37 point 3): the outputs without the framework, then the real
recipe run by nsys 2023.4's recipe framework in its own Python (numpy<2, pandas<2.3,
pyarrow<20, as that framework needs) on the real reports of ``shared/traces/nsys-2023``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.recipe import outputs
from nsysmoe.renderers import render
from nsysmoe.results import Comparison
from tests.conftest import REPO, require_shared

EXAMPLES = api.example_paths()
#: what the recipe framework of nsys 2023.4 needs beside nsysmoe (shared/tools/get-nsys)
FRAMEWORK_DEPS = ("numpy<2", "pandas<2.3", "pyarrow<20", "psutil")


def json_gpus(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every GPU row of an analysis JSON (one trace, or many ranks' traces)."""
    return [g for t in doc["traces"] for g in t["gpus"]]  # many ranks: every file's trace


def assert_table_equals_json(table: pl.DataFrame, gpus: list[dict[str, Any]]) -> None:
    """Each Parquet row's figures are the JSON's for the same (pid, device)."""
    by_key = {(g["pid"], g["device"]): g for g in gpus}
    assert len(table) == len(by_key)
    for row in table.to_dicts():
        want = by_key[(row["pid"], row["device"])]
        shared = [k for k in row if k in want and not isinstance(want[k], dict | list)]
        assert len(shared) >= 15, shared
        assert {k: row[k] for k in shared} == {k: want[k] for k in shared}


# -- the outputs, no framework -----------------------------------------------------------------


def test_one_report_outputs_equal_the_analysis(tmp_path: Path) -> None:
    result = outputs.combine([outputs.analyze_report(str(EXAMPLES[1]))])
    written = outputs.write_outputs(result, tmp_path)
    assert set(written) == {f"{n}.parquet" for n in outputs.TABLES} | {
        "nsysmoe.md", "nsysmoe.json", "nsysmoe.ipynb"}
    doc = json.loads((tmp_path / "nsysmoe.json").read_text())
    assert doc == json.loads(render(api.analyze(EXAMPLES[1]), "json"))
    gpus = pl.read_parquet(tmp_path / "gpus.parquet")
    assert gpus["report"].unique().to_list() == [str(EXAMPLES[1])]
    assert_table_equals_json(gpus, json_gpus(doc))
    by_gpu = {(g["pid"], g["device"]): g for g in json_gpus(doc)}
    classes = pl.read_parquet(tmp_path / "classes.parquet").to_dicts()
    assert classes and all(
        by_gpu[(r["pid"], r["device"])]["classes"][r["class"]]
        == {"count": r["count"], "sum_ns": r["sum_ns"], "union_ns": r["union_ns"]}
        for r in classes)  # fmt: skip
    phases = pl.read_parquet(tmp_path / "phases.parquet").to_dicts()
    assert phases and all(by_gpu[(r["pid"], r["device"])]["phases"][r["phase"]]["comm_ns"]
                          == r["comm_ns"] for r in phases)  # fmt: skip
    iterations = pl.read_parquet(tmp_path / "iterations.parquet")
    assert len(iterations) == len(doc["traces"][0]["iterations"])
    notebook = json.loads((tmp_path / "nsysmoe.ipynb").read_text())
    assert notebook["nbformat"] == 4 and "read_parquet" in "".join(
        c["source"] for c in notebook["cells"])


def test_many_reports_are_ranks_and_a_bad_one_is_listed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.nsys-rep"
    bad.write_bytes(b"not a report")
    results = [outputs.analyze_report(str(p)) for p in (*EXAMPLES, bad)]
    result = outputs.combine(results)
    out = tmp_path / "out"
    out.mkdir()
    outputs.write_outputs(result, out)
    ranks = pl.read_parquet(out / "ranks.parquet")
    assert sorted(ranks["report"].unique().to_list()) == sorted(map(str, EXAMPLES))
    doc = json.loads((out / "nsysmoe.json").read_text())
    assert [f["path"] for f in doc["failures"]] == [str(bad)]


def test_nothing_readable_is_one_line() -> None:
    from nsysmoe.errors import NsysmoeError

    with pytest.raises(NsysmoeError, match="no report could be analysed: x.nsys-rep: "):
        outputs.combine([outputs.analyze_report("x.nsys-rep")])


def test_ab_outputs_carry_both_sides(tmp_path: Path) -> None:
    result = outputs.combine_ab([outputs.compare_reports((str(EXAMPLES[0]), str(EXAMPLES[1])))],
                                1, 1)  # fmt: skip
    outputs.write_outputs(result, tmp_path)
    gpus = pl.read_parquet(tmp_path / "gpus.parquet")
    assert isinstance(result, Comparison)
    labels = [result.off.name, result.on.name]
    assert gpus["side"].unique(maintain_order=True).to_list() == labels
    doc = json.loads((tmp_path / "nsysmoe.json").read_text())
    assert doc == json.loads(render(api.compare(*EXAMPLES), "json"))


def test_recipe_path_holds_the_recipe() -> None:
    got = subprocess.run([sys.executable, "-m", "nsysmoe", "recipe-path"], capture_output=True,
                         text=True, check=True, cwd=REPO)  # fmt: skip
    folder = Path(got.stdout.strip())
    meta = json.loads((folder / "nsysmoe" / "metadata.json").read_text())
    module = folder / "nsysmoe" / (meta["module_name"].replace(".", "/") + ".py")
    assert module.is_file() and f"class {meta['class_name']}(" in module.read_text()


# -- the real recipe, in the framework's own Python ---------------------------------------------


@pytest.fixture(scope="module")
def framework(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH and NSYS_RECIPE_PATH for ``nsys recipe``: nsys 2023.4 (get-nsys) and a venv with
    the framework's requirements and this checkout of nsysmoe installed."""
    tool = require_shared().parent / "tools" / "get-nsys"
    ci = os.environ.get("CI", "").lower() == "true"
    got = subprocess.run(["bash", str(tool)], capture_output=True, text=True, timeout=900)
    if got.returncode != 0:
        (pytest.fail if ci else pytest.skip)(f"get-nsys failed: {got.stderr.strip()[-300:]}")
    venv = tmp_path_factory.mktemp("recipe") / "venv"
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(venv / "bin" / "pip"), "install", "-q", *FRAMEWORK_DEPS, str(REPO)]]
    for cmd in steps:
        made = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if made.returncode != 0:
            (pytest.fail if ci else pytest.skip)(f"{cmd[0]}: {made.stderr.strip()[-300:]}")
    where = subprocess.run([str(venv / "bin" / "nsysmoe"), "recipe-path"], capture_output=True,
                           text=True, check=True)  # fmt: skip
    nsys_dir = str(Path(got.stdout.strip()).parent)
    return {"PATH": os.pathsep.join([str(venv / "bin"), nsys_dir, os.environ["PATH"]]),
            "NSYS_RECIPE_PATH": where.stdout.strip()}


def nsys_recipe(framework: dict[str, str], cwd: Path,
                *args: str) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(["nsys", "recipe", "nsysmoe", *args], capture_output=True, text=True,
                          env={**os.environ, **framework}, cwd=cwd, timeout=600)  # fmt: skip


def test_nsys_recipe_on_the_real_reports(framework: dict[str, str], tmp_path: Path) -> None:
    reports = require_shared() / "nsys-2023" / "reports"
    got = nsys_recipe(framework, tmp_path, "--input", str(reports), "--output", "out")
    assert got.returncode == 0, got.stdout + got.stderr
    out = tmp_path / "out"
    assert (out / "out.nsys-analysis").is_file()
    analysis = json.loads((out / "out.nsys-analysis").read_text())
    assert analysis["RecipeName"] == "nsysmoe" and "gpus.parquet" in analysis["Outputs"]
    cli = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", str(reports), "--format",
                          "json"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PATH": framework["PATH"]})  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    gpus = pl.read_parquet(out / "gpus.parquet")
    assert_table_equals_json(gpus, json_gpus(json.loads(cli.stdout)))
    assert (out / "nsysmoe.md").read_text().startswith("### nsysmoe: many ranks")


def test_nsys_recipe_ab(framework: dict[str, str], tmp_path: Path) -> None:
    reports = require_shared() / "nsys-2023" / "reports"
    off, on = (str(reports / f"nersc-ddp-4gpu-{n}.qdrep") for n in ("baseline", "bucketcap100mb"))
    got = nsys_recipe(framework, tmp_path, "--input", off, "--versus", on, "--vary", "nccl",
                      "--labels", "default,100 MB buckets", "--output", "ab", "--mode", "none")
    assert got.returncode == 0, got.stdout + got.stderr
    doc = json.loads((tmp_path / "ab" / "nsysmoe.json").read_text())
    cli = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", off, on, "--vary", "nccl",
                          "--labels", "default,100 MB buckets", "--format", "json"],
                         capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PATH": framework["PATH"]})  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    want = json.loads(cli.stdout)
    for key in ("labels", "contract", "metrics", "verdicts", "per_gpu", "step_change"):
        assert doc[key] == want[key], key
    sides = pl.read_parquet(tmp_path / "ab" / "gpus.parquet")["side"].unique(maintain_order=True)
    assert sides.to_list() == ["default", "100 MB buckets"]


def test_nsys_recipe_unreadable_input_is_one_line(framework: dict[str, str],
                                                  tmp_path: Path) -> None:  # fmt: skip
    bad = tmp_path / "bad.nsys-rep"
    bad.write_bytes(b"not a report")
    got = nsys_recipe(framework, tmp_path, "--input", str(bad), "--output", "out")
    assert got.returncode == 1
    said = got.stdout + got.stderr  # nsys recipe logs to stdout
    assert "no report could be analysed: bad.nsys-rep:" in said
    assert "Traceback" not in said
    assert not (tmp_path / "out").exists()


def test_the_notebook_is_valid_nbformat() -> None:
    """nbformat 4.5 wants an id on every cell (review: 5 schema errors without them)."""
    import nbformat

    nb = nbformat.from_dict(outputs.notebook())
    nbformat.validate(nb)
    assert len({c["id"] for c in nb["cells"]}) == len(nb["cells"])


def test_ab_with_more_reports_on_one_side_says_so() -> None:
    """Two --input reports against one --versus: one pair is compared, and the run says the
    counts differ (as the CLI's folders do), not a clean one-pair A/B (review)."""
    from nsysmoe.results import RanksComparison

    pairs = [outputs.compare_reports((str(EXAMPLES[0]), str(EXAMPLES[1])))]
    result = outputs.combine_ab(pairs, 2, 1)
    assert isinstance(result, RanksComparison) and not result.matched
    assert any("2 files off, 1 on" in n for n in result.contract_notes), result.contract_notes
