"""What ``nsys recipe nsysmoe`` computes and writes, without the recipe framework: one report's
analysis (the mapper's work, :func:`analyze_report`, :func:`compare_reports`), the run made of
them (:func:`combine`), and the output folder (:func:`write_outputs`): Parquet tables a
notebook or Dask job reads, nsysmoe's own Markdown and JSON reports, and a notebook that loads
the tables. The framework adapter (:mod:`nsysmoe.recipe.nsys`) only wires these into
``nsys_recipe``'s mapper and reducer, so everything here is tested without nsys."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import polars as pl

from nsysmoe import api
from nsysmoe.ab.ranks import compare_runs
from nsysmoe.errors import NsysmoeError
from nsysmoe.ranks import rank_table, run_analysis
from nsysmoe.renderers import render
from nsysmoe.results import Comparison, Failure, RanksAnalysis, RanksComparison, TraceAnalysis

Result = TraceAnalysis | RanksAnalysis | Comparison | RanksComparison
R = TypeVar("R", TraceAnalysis, Comparison)
#: the Parquet tables written, and what one row is
TABLES = {
    "gpus": "one GPU of one report: every per-GPU metric (ns), the report and side",
    "classes": "one kernel class of one GPU of one report: count, sum of durations, union",
    "channels": "one communication channel of one GPU of one report",
    "phases": "one step phase (an NVTX range projected onto the GPU) of one GPU of one report",
    "iterations": "one iteration of one report (all its GPUs)",
    "ranks": "one GPU of one report with its report's iterations and median step (the rank "
             "table of a multi-report run)",
}  # fmt: skip


def analyze_report(path: str) -> TraceAnalysis | Failure:
    """One report's analysis, detached (only figures travel back from a worker); a report
    nsysmoe cannot read is a :class:`Failure` with its one-line reason, not a crash."""
    try:
        return api.analyze(path, detached=True)
    except NsysmoeError as exc:
        return Failure(path, str(exc))


def compare_reports(pair: tuple[str, str], vary: tuple[str, ...] = (),
                    labels: tuple[str, str] | None = None) -> Comparison | Failure:  # fmt: skip
    """The A/B of one pair of reports (off, on), detached; a failure as in
    :func:`analyze_report`."""
    try:
        got = api.compare(pair[0], pair[1], vary=vary, labels=labels, detached=True)
    except NsysmoeError as exc:
        return Failure(f"{pair[0]} vs {pair[1]}", str(exc))
    assert isinstance(got, Comparison)
    return got


def combine(results: Sequence[TraceAnalysis | Failure]) -> TraceAnalysis | RanksAnalysis:
    """The run the reports make: one report's analysis, or several as the ranks of one run (as
    ``nsysmoe analyze DIR``); a report that failed is listed, the others go on. None read:
    one line saying why each failed."""
    good = _succeeded(results, TraceAnalysis, "no report could be analysed", short=True)
    if len(results) == 1:
        return good[0]
    return run_analysis(list(results))


def combine_ab(results: Sequence[Comparison | Failure], n_off: int, n_on: int
               ) -> Comparison | RanksComparison:  # fmt: skip
    """The A/B the pairs make: one pair's comparison, or the per-rank A/B of several, which
    also says where the sides' report counts differ (as ``nsysmoe analyze OFF_DIR ON_DIR``)."""
    good = _succeeded(results, Comparison, "no pair of reports could be compared")
    if len(results) == 1 and n_off == n_on == 1:  # as many reports a side: one pair's A/B
        return good[0]
    return compare_runs(list(results), n_off, n_on)


def _succeeded(results: Sequence[R | Failure], kind: type[R], nothing: str,
               short: bool = False) -> list[R]:  # fmt: skip
    """The results of ``kind``; where there is none, one line saying why each input failed
    (``short``: by its file's name)."""
    good = [r for r in results if isinstance(r, kind)]
    if not good:
        why = "; ".join(f"{Path(r.path).name if short else r.path}: {r.error}"
                        for r in results if isinstance(r, Failure))  # fmt: skip
        raise NsysmoeError(f"{nothing}: {why}")
    return good


def analyses(result: Result) -> list[tuple[str, TraceAnalysis]]:
    """Every report's analysis in ``result`` with its side ('' outside an A/B)."""
    if isinstance(result, TraceAnalysis):
        return [("", result)]
    if isinstance(result, RanksAnalysis):
        return [("", a) for a in result.analyses]
    pairs = (result,) if isinstance(result, Comparison) else result.pairs
    return [(side.name, side.analysis) for c in pairs for side in (c.off, c.on)]


def tables(result: Result) -> dict[str, pl.DataFrame]:
    """The Parquet tables of :data:`TABLES`, each row keyed by ``report`` (its path) and
    ``side`` (the A/B side's label, '' outside an A/B); ns integers as nsysmoe measures them."""
    out: dict[str, list[pl.DataFrame]] = {name: [] for name in TABLES}
    for side, a in analyses(result):
        keys = [pl.lit(a.path).alias("report"), pl.lit(side).alias("side")]
        out["gpus"].append(a.gpus.select(*keys, pl.all()))
        out["classes"].append(a.classes.select(*keys, pl.all()))
        out["channels"].append(a.channels.select(*keys, pl.all()))
        out["phases"].append(a.phases.select(*keys, pl.all()))
        out["iterations"].append(a.iterations.select(*keys, pl.all()))
        out["ranks"].append(rank_table((a,)).select(*keys, pl.all()))
    return {name: pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
            for name, frames in out.items()}  # fmt: skip


def write_outputs(result: Result, folder: Path) -> dict[str, str]:
    """Write ``result`` into ``folder`` (which exists): :data:`TABLES` as Parquet,
    ``nsysmoe.md`` and ``nsysmoe.json`` (nsysmoe's own reports of the run or A/B), and
    ``nsysmoe.ipynb`` (loads the tables, shows the report). Returns file name → kind."""
    written = {}
    for name, df in tables(result).items():
        df.write_parquet(folder / f"{name}.parquet")
        written[f"{name}.parquet"] = "Parquet"
    (folder / "nsysmoe.md").write_text(render(result, "markdown"), encoding="utf-8")
    (folder / "nsysmoe.json").write_text(render(result, "json"), encoding="utf-8")
    written |= {"nsysmoe.md": "Markdown", "nsysmoe.json": "JSON"}
    (folder / "nsysmoe.ipynb").write_text(json.dumps(notebook(), indent=1), encoding="utf-8")
    written["nsysmoe.ipynb"] = "Notebook"
    return written


def notebook() -> dict[str, object]:
    """A notebook beside the tables: loads each with pandas (the recipe framework's own
    dataframes) and shows nsysmoe's Markdown report."""
    def cell(kind: str, text: str) -> dict[str, object]:
        base: dict[str, object] = {"cell_type": kind, "metadata": {}, "source": text}
        return base | ({"outputs": [], "execution_count": None} if kind == "code" else {})

    rows = "\n".join(f"- `{name}.parquet`: {what}" for name, what in TABLES.items())
    cells = [
        cell("markdown", "# nsysmoe: communication hidden, exposed and idle per GPU\n\n"
                         f"The tables this recipe wrote (integers are nanoseconds):\n\n{rows}"),
        cell("code", "import pandas as pd\nfrom IPython.display import Markdown, display\n\n"
                     "tables = {name: pd.read_parquet(f'{name}.parquet')\n"
                     f"          for name in {list(TABLES)!r}}}\n"
                     "tables['gpus']"),
        cell("code", "tables['channels']"),
        cell("code", "tables['iterations']"),
        cell("code", "display(Markdown(open('nsysmoe.md', encoding='utf-8').read()))"),
    ]
    for i, c in enumerate(cells):  # nbformat 4.5: every cell has an id
        c["id"] = f"cell-{i}"
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                        "display_name": "Python 3",
                                                        "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
