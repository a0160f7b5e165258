"""Trace text is escaped for the medium it lands in, in one place per renderer: Markdown (no
new rows, quotes or headings from a newline, no HTML, no links), the terminal (no escape
sequences), CSV (no formulas), HTML (everything escaped)."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.renderers import render
from nsysmoe.renderers.markdown import cell, code, text
from nsysmoe.renderers.terminal import safe
from nsysmoe.results import KernelSummary

NEWLINE_NAME = "kern\n# Heading\n| injected | row |"
ESC_NAME = "k\x1b[2J\x1b]0;pwned\x07\u202eevil"


@pytest.fixture(scope="module")
def kernels() -> KernelSummary:
    off = api.example_paths()[0]
    return KernelSummary(str(off), api.kernel_summary(off), top=3)


def hostile(k: KernelSummary, name: str) -> KernelSummary:
    return replace(k, table=k.table.with_columns(pl.lit(name).alias("name")))


def test_markdown_cell_and_text_escapes() -> None:
    assert cell("a|b") == "a\\|b"
    assert text("a\nb\r\nc") == "a b c"
    assert text("<script>x</script> & [y](javascript:z)") == (
        "&lt;script&gt;x&lt;/script&gt; &amp; [y]\\(javascript:z)"
    )
    assert code("a`b``c") == "```a`b``c```" and code("`x") == "`` `x ``"


def test_markdown_newline_in_a_name_adds_no_row_or_heading(kernels) -> None:  # noqa: ANN001
    md = render(hostile(kernels, NEWLINE_NAME), "markdown")
    lines = md.splitlines()
    assert not any(line.startswith("#") for line in lines)
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 1 + 3  # header + the three shown kernels
    assert all(row.count(" | ") == 5 for row in rows)  # six cells each: no injected columns


def test_markdown_quotes_escape_trace_text() -> None:
    off, on = api.example_paths()
    c = api.compare(off, on)
    a = replace(c.off.analysis, warnings=("<script>alert(1)</script>\n# x",))
    md = render(replace(c, off=replace(c.off, analysis=a)), "markdown")
    assert "<script>" not in md and "&lt;script&gt;alert(1)&lt;/script&gt; # x" in md


def test_terminal_shows_control_characters_inert(kernels, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("COLUMNS", "1000")  # the name on one line: no cell wrapped to the width
    out = render(hostile(kernels, ESC_NAME), "terminal")
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "k\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil" in out
    assert safe("a\tb\nc") == "a b c"


def test_csv_cells_cannot_be_formulas(kernels) -> None:  # noqa: ANN001
    for name in ("=HYPERLINK(\"x\")", "+1+1", "-2", "@SUM(A1)", "\tx"):
        rows = list(csv.DictReader(io.StringIO(render(hostile(kernels, name), "csv"))))
        assert {r["name"] for r in rows} == {"'" + name}, name
        assert rows[0]["sum_ns"].isdigit()  # numbers untouched
    plain = list(csv.DictReader(io.StringIO(render(kernels, "csv"))))
    assert plain[0]["name"] == kernels.table["name"][0]


def test_markdown_shows_controls_and_links_nothing() -> None:
    assert text("k\x1b]0;T\x07\x9b\u202e") == "k\\x1b]0;T\\x07\\x9b\\u202e"
    assert code("k\x1b[2J`") == "`` k\\x1b[2J` ``"  # a code span: controls shown, nothing else
    assert text("see https://e.x/y and www.e.x, mail a.b@e.x") == (
        "see https\\://e.x/y and www\\.e.x, mail a.b<!-- -->@e.x")
    assert code("https://e.x www.e.x a@e.x") == "`https://e.x www.e.x a@e.x`"  # never linked
    # a backslash of the name shows: it cannot escape a "|", "&lt;" or an escape of ours
    assert cell("a\\|b") == "a\\\\\\|b" and text("a\\<b") == "a\\\\&lt;b"
    assert text("x\\://e.x") == "x\\\\\\://e.x" and text("end\\") == "end\\\\"
    assert text("\\x1b is text") == "\\x1b is text"  # before a letter a backslash is literal


def test_html_shows_controls(kernels) -> None:  # noqa: ANN001
    out = render(hostile(kernels, ESC_NAME), "html")
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "k\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil" in out


def test_csv_shows_controls(kernels) -> None:  # noqa: ANN001
    rows = list(csv.DictReader(io.StringIO(render(hostile(kernels, ESC_NAME + "\r\x9b"), "csv"))))
    assert {r["name"] for r in rows} == {"k\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil\\x0d\\x9b"}


def test_terminal_shows_the_bytes_of_a_name_that_is_not_utf8() -> None:
    # a C1 control's byte (0x9b: CSI) and any other byte shown as the byte: no lone surrogate
    # reaches a report (a strict UTF-8 stream or file would refuse it)
    assert safe("a\udc9b\udcff\ud800b") == "a\\x9b\\xff\\ud800b"
