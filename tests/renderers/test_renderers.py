"""Every result type through every format, from one set of results: each format says the same
headline numbers, JSON carries the envelope and the result's own data, and trace text is
escaped for the medium it lands in."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest

from nsysmoe import __version__, api
from nsysmoe.errors import NsysmoeError
from nsysmoe.model import Iterations, Scope
from nsysmoe.renderers import document, render
from nsysmoe.renderers.document import Details, Heading, Lines, Table
from nsysmoe.renderers.json import SCHEMAS
from nsysmoe.results import KernelSummary
from tests.renderers.pages import assert_well_formed

TEXT_FORMATS = ("terminal", "markdown", "html")
HOSTILE = "evil<script>alert(1)</script>|kernel"


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    off, on = (str(p) for p in api.example_paths())
    analysis = api.analyze(off, scope=Scope(window=Iterations(skip=1)))
    return {
        "trace": analysis,
        "comparison": api.compare(off, on),
        "ranks": api.analyze_many([off, on]),
        "ranks_comparison": api.compare_many([off], [on]),
        "compat": api.compat([off]),
        "kernels": KernelSummary(off, api.kernel_summary(off), top=5),
    }


#: a number each report must show, in every text format: (result key, how to get it)
HEADLINES = {
    "trace": lambda r: f"{r.gpus['hidden_pct'][0]:.2f} %",
    "comparison": lambda c: f"{c.row('hidden_pct').on:.2f} %",
    "ranks": lambda run: f"{run.ranks['hidden_pct'][0]:.2f} %",
    "ranks_comparison": lambda rc: f"{rc.rows[0].on / 1e6:,.3f}",
    "compat": lambda cr: f"{cr.results[0].gpus['hidden_pct'][0]:.2f} %",
    "kernels": lambda k: f"{k.table['sum_ns'][0] / 1e6:,.3f}",
}


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("kind", list(HEADLINES))
def test_every_result_in_every_text_format(results, kind: str, fmt: str) -> None:
    result = results[kind]
    text = render(result, fmt)
    assert text.strip(), (kind, fmt)
    assert HEADLINES[kind](result) in text, (kind, fmt)
    if fmt == "html":
        assert_well_formed(text)


@pytest.mark.parametrize("kind", list(HEADLINES))
def test_json_is_the_envelope_around_to_dict(results, kind: str) -> None:
    result = results[kind]
    doc = json.loads(render(result, "json"))
    schema, version = SCHEMAS[type(result)]
    assert (doc.pop("schema"), doc.pop("version")) == (schema, version)
    assert doc.pop("nsysmoe_version") == __version__
    body = {"traces": [result.to_dict()]} if kind == "trace" else result.to_dict()
    assert doc == json.loads(json.dumps(body))


def test_terminal_and_markdown_say_the_same_tables(results, monkeypatch) -> None:  # noqa: ANN001
    """One document, two formats: every table title and every cell reaches both."""
    monkeypatch.setenv("COLUMNS", "1000")  # no cell wrapped to the terminal's width
    for kind in HEADLINES:
        doc = document(results[kind])
        tables = [b for b in doc.blocks if isinstance(b, Table)]
        tables += [t for b in doc.blocks if isinstance(b, Details) for t in b.blocks
                   if isinstance(t, Table)]
        term, md = render(results[kind], "terminal"), render(results[kind], "markdown")
        for t in tables:
            if t.title:  # the headline of one trace has none: its window heads a column
                assert t.title in term and f"**{t.title}**" in md, (kind, t.title)
            for row in t.rows[:3]:
                for cell in row:
                    assert cell in term, (kind, cell)


def test_csv_only_for_the_kernel_table(results) -> None:
    text = render(results["kernels"], "csv")
    assert text.splitlines()[0].startswith("name,class,subclass,count,sum_ns")
    assert len(text.splitlines()) == 1 + 5
    with pytest.raises(NsysmoeError, match="csv"):
        render(results["trace"], "csv")


def test_figures_are_linked_in_markdown_and_html_only(results) -> None:
    figs = ("figs/breakdown.png",)
    c = results["comparison"]
    md = render(c, "markdown", figures=figs)
    assert md.endswith("\n\n![breakdown](figs/breakdown.png)\n") and "#### Figures" in md
    assert "upload them with it" in md.split("#### Figures")[1]
    assert 'src="figs/breakdown.png"' in render(c, "html", figures=figs)
    assert render(c, "terminal", figures=figs) == render(c, "terminal")


def test_trace_text_is_escaped_for_each_medium(results) -> None:
    """A kernel name with markup: Markdown escapes it in the table cell, HTML escapes it
    everywhere, the terminal shows it as text."""
    k = results["kernels"]
    table = k.table.with_columns(pl.lit(HOSTILE).alias("name"))
    hostile = KernelSummary(HOSTILE, table, top=1)
    md = render(hostile, "markdown")
    assert "<script>" not in md.split("\n", 2)[2] and "evil&lt;script&gt;" in md
    assert "\\|kernel" in md  # the pipe cannot end the cell
    page = render(hostile, "html")
    assert "<script" not in page and "evil&lt;script&gt;" in page
    assert_well_formed(page)
    assert HOSTILE in render(hostile, "terminal")


def test_html_quotes_and_notes_are_escaped(results) -> None:
    a = results["trace"]
    hostile = replace(a, warnings=(f"<details ontoggle=alert(1)>{HOSTILE}",))
    page = render(hostile, "html")
    assert "<details ontoggle" not in page and "&lt;details ontoggle" in page
    assert_well_formed(page)


def test_heading_and_lines_blocks_reach_every_format(results) -> None:
    doc = document(results["comparison"])
    assert isinstance(doc.blocks[0], Heading) and isinstance(doc.blocks[1], Table)  # headline
    assert any(isinstance(b, Lines) for b in doc.blocks[2:4])
    md = render(results["comparison"], "markdown")
    assert md.startswith("### nsysmoe A/B: overlap off vs on\n\n**overlap off vs on, all GPUs")
    assert "> overlap off: " in md
    assert render(results["comparison"], "terminal").startswith("overlap off vs on, all GPUs")
    assert "<h3>nsysmoe A/B: overlap off vs on</h3>" in render(results["comparison"], "html")
