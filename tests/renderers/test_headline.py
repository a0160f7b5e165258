"""The report a reviewer reads (issue 15): every report opens with a headline of at most 12
lines, none over 100 characters, that answers the question; detail follows, folded where it is
long; the CLI says what it did with --plot and --dask."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.model import STEADY
from nsysmoe.renderers import render
from nsysmoe.renderers.report.comparison import TOP_NVTX_ROWS, shown_rows
from tests.conftest import require_shared

HEADLINE_LINES = 12
WIDTH = 100


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", *args], env=env,
                          capture_output=True, text=True, check=False, cwd=cwd)  # fmt: skip


def headline(text: str, ends_before: str) -> list[str]:
    """The lines before the first detail block (``ends_before`` starts it)."""
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith(ends_before))
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def test_the_readme_first_command_opens_with_a_short_headline() -> None:
    out = cli(*map(str, api.example_paths()))
    assert out.returncode == 0, out.stderr
    head = headline(out.stdout, "overlap off: ")  # the sources follow the headline
    assert len(head) <= HEADLINE_LINES, "\n".join(head)
    assert max(map(len, head)) <= WIDTH, "\n".join(head)
    text = "\n".join(head)
    for what in ("overlap off vs on", "iterations 2–7 (2 skipped as warm-up)", "contract matched",
                 "median step time", "exposed communication", "hidden by compute",
                 "ep.dispatch exposed", "ep.combine exposed", "Dominant wall",
                 "improvement"):  # fmt: skip
        assert what in text, what
    assert "hint:" not in out.stdout and "warm-up may still be in the window" not in out.stdout
    assert max(map(len, out.stdout.splitlines())) <= WIDTH


def test_a_single_trace_opens_with_its_headline_and_the_steady_window() -> None:
    off = str(api.example_paths()[0])
    out = cli(off)
    assert out.returncode == 0, out.stderr
    head = headline(out.stdout, "window: ")
    assert len(head) <= HEADLINE_LINES and max(map(len, head)) <= WIDTH, "\n".join(head)
    assert "1 GPU, iterations 2–7 (2 skipped as warm-up)" in head[3] or any(
        "iterations 2–7 (2 skipped as warm-up)" in line for line in head)
    assert any(line.startswith("Dominant wall:") for line in head)
    whole = cli(off, "--whole-trace")
    assert "whole trace" in whole.stdout and "skipped as warm-up" not in whole.stdout


def test_the_nersc_headline_says_the_contract_breaks() -> None:
    t = require_shared() / "nsys"
    out = cli(str(t / "nersc-ddp-4gpu-baseline.sqlite"),
              str(t / "nersc-ddp-4gpu-bucketcap100mb.sqlite"))  # fmt: skip
    head = headline(out.stdout, "baseline: ")
    assert len(head) <= HEADLINE_LINES and max(map(len, head)) <= WIDTH, "\n".join(head)
    text = "\n".join(head)
    assert "baseline vs bucketcap100mb" in text and "contract NOT matched" in text
    assert "WARNING: contract NOT matched (kernels differ)" in text
    assert "improvement?" in text  # a verdict over a broken contract is a question


def test_cpu_side_nvtx_rows_default_to_the_largest_changes() -> None:
    c = api.compare(*api.example_paths())
    cpu = [r for r in c.rows if r.key.startswith("nvtx:")]
    assert len(cpu) > TOP_NVTX_ROWS
    shown = shown_rows(c.rows)
    kept = [r for r in shown if r.key.startswith("nvtx:")]
    assert len(kept) == TOP_NVTX_ROWS
    dropped = min(abs(r.delta or 0) for r in kept)
    assert all(abs(r.delta or 0) <= dropped for r in cpu if r not in kept)
    assert all(r in shown for r in c.rows if not r.key.startswith("nvtx:"))  # GPU rows stay
    assert len(shown_rows(c.rows, all_nvtx=True)) == len(c.rows)
    md = render(c, "markdown")
    assert f"{len(cpu) - TOP_NVTX_ROWS} more CPU-side NVTX rows: --all-nvtx" in md


def test_per_iteration_tables_fold_in_markdown() -> None:
    md = render(api.compare(*api.example_paths()), "markdown")
    assert "<details><summary>Per iteration</summary>" in md
    one = render(api.analyze(api.example_paths()[0], scope=STEADY), "markdown")
    assert "<details><summary>Per iteration</summary>" in one


def test_plot_says_where_it_wrote(tmp_path: Path) -> None:
    out = cli(*map(str, api.example_paths()), "--plot", "figs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stderr.splitlines() if "wrote" in x)
    assert line.startswith("nsysmoe: wrote ") and f"to figs{os.sep}:" in line
    assert all(stem in line for stem in ("breakdown", "channels"))
    assert (tmp_path / "figs" / "breakdown.png").is_file()


@pytest.mark.parametrize("n", [1, 2])
def test_dask_on_one_file_per_side_is_said(n: int) -> None:
    out = cli(*map(str, api.example_paths()[:n]), "--dask", "local", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "note: --dask local: one file per side is analysed here" in out.stderr


def test_all_nvtx_and_wide_and_the_html_page_from_the_cli(tmp_path: Path) -> None:
    ex = list(map(str, api.example_paths()))
    short, every = cli(*ex, "--format", "markdown"), cli(*ex, "--format", "markdown", "--all-nvtx")
    n_cpu = sum("(CPU) (ms)" in line for line in every.stdout.splitlines())
    assert sum("(CPU) (ms)" in line for line in short.stdout.splitlines()) == TOP_NVTX_ROWS < n_cpu
    assert "--all-nvtx" not in every.stdout.split("Measurement contract")[0].split("**")[-2]
    page = tmp_path / "report.html"
    out = cli(*ex, "--format", "html", "-o", str(page))
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<svg") >= 3
    assert "overlap off vs on" in text and "<script" not in text


def test_wide_keeps_full_kernel_names() -> None:
    t = require_shared() / "nsys" / "nvfuser-h100-schema3.16.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    run = [sys.executable, "-m", "nsysmoe", "kernels", str(t), "--top", "0", "--format",
           "markdown"]  # fmt: skip
    full = api.kernel_summary(str(t))["name"].to_list()
    short = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    rows = [unescape(line.split(" | ")[0].removeprefix("| "))
            for line in short.splitlines()[4:]]  # Markdown escapes <, >, |, * and `
    assert len(set(rows)) == len(set(full))  # distinct names stay distinct
    assert max(map(len, rows)) <= 100 < max(map(len, full))
    wide = subprocess.run([*run[:4], "--wide", *run[4:]], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert wide.returncode == 0, wide.stderr
    assert all(name in unescape(wide.stdout) for name in full[:5])


def unescape(markdown: str) -> str:
    """Markdown text as the reader sees it: entities and backslash escapes undone."""
    return re.sub(r"\\([\\`*|])", r"\1", html.unescape(markdown))


def test_many_ranks_open_with_their_headline() -> None:
    t = require_shared()
    out = cli(str(t / "kineto" / "dlrm-8ranks"))
    assert out.returncode == 0, out.stderr
    head = headline(out.stdout, "8 traces, 8 ranks")
    assert len(head) <= HEADLINE_LINES and max(map(len, head)) <= WIDTH, "\n".join(head)
    text = "\n".join(head)
    assert text.startswith("8 ranks, iteration 10 ")  # one iteration: said in the singular
    for what in ("median step time (over ranks)", "exposed communication (all ranks)",
                 "nccl.sendrecv exposed", "Dominant wall", "straggler"):  # fmt: skip
        assert what in text, what
