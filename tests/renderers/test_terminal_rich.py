"""The terminal renderer on rich: widths (argument, COLUMNS, terminal, 100 when piped), colour
only where asked for (NO_COLOR, FORCE_COLOR, a terminal), tables that fit (text wraps, numbers
stay whole and right-aligned), and trace text that stays inert: no escape sequence and no rich
markup from a kernel name."""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.renderers import document, render
from nsysmoe.renderers.document import Caption, Details, Document, Heading, Lines, Table
from nsysmoe.renderers.terminal import (
    DEFAULT_WIDTH,
    detect_color,
    detect_width,
    format_document,
)
from nsysmoe.results import KernelSummary

MARKUP = "[bold red]x[/]"
OSC = "\x1b]0;pwned\x07"
SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm")


@pytest.fixture(scope="module")
def comparison():  # noqa: ANN201 - a Comparison
    return api.compare(*api.example_paths())


def _hostile_doc(name: str) -> Document:
    return Document((
        Heading("h", terminal=f"heading {name}"),
        Caption((("window", name, True),)),
        Table(f"title {name}", (f"head {name}", "ms"), ((name, "1.000"), ("ok", "2.000")),
              (False, True)),
        Lines((f"said {name}", f"WARNING: {name}")),
        Lines((name,), style="list", title=f"list {name}"),
        Details("more", (Lines((f"detail {name}",), style="notes"),)),
    ))  # fmt: skip


@pytest.mark.parametrize("color", [False, True])
def test_trace_text_is_printed_literally_and_inertly(color: bool) -> None:
    out = format_document(_hostile_doc(MARKUP + OSC), width=100, color=color)
    plain = SGR.sub("", out)
    assert "\x1b" not in plain and "\x07" not in out  # the only escapes are rich's own colours
    assert plain.count(MARKUP + "\\x1b]0;pwned\\x07") == 10  # every block, as written
    if not color:
        assert out == plain


def test_kernel_name_with_markup_and_osc_in_a_report() -> None:
    off = api.example_paths()[0]
    k = KernelSummary(str(off), api.kernel_summary(off), top=2)
    for name in (MARKUP, OSC, f"{MARKUP} {OSC}"):
        hostile = replace(k, table=k.table.with_columns(pl.lit(name).alias("name")))
        out = render(hostile, "terminal")
        assert "\x1b" not in out and "\x07" not in out
        assert out.count(name.replace("\x1b", "\\x1b").replace("\x07", "\\x07")) == 2


def test_width_from_argument_columns_or_100_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect_width() == DEFAULT_WIDTH == 100  # pytest's stdout is not a terminal
    assert detect_width(tty=False) == 100
    monkeypatch.setenv("COLUMNS", "150")
    assert detect_width() == 150 and detect_width(tty=True) == 150
    doc = Document((Lines(("word " * 100,)),))
    assert max(map(len, format_document(doc).splitlines())) == 150 - 1  # wrapped at COLUMNS
    assert max(map(len, format_document(doc, width=60).splitlines())) <= 60
    monkeypatch.setenv("COLUMNS", "not a number")
    assert detect_width() == 100


def test_colour_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect_color() is False  # not a terminal
    assert detect_color(tty=True) is True
    monkeypatch.setenv("TERM", "dumb")
    assert detect_color(tty=True) is False
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    assert detect_color(tty=True) is False
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert detect_color(tty=True) is False  # NO_COLOR wins
    monkeypatch.delenv("NO_COLOR")
    assert detect_color(tty=False) is True  # forced, into a pipe too
    monkeypatch.setenv("FORCE_COLOR", "0")
    assert detect_color(tty=True) is False
    monkeypatch.setenv("NO_COLOR", "")  # empty: not set (no-color.org)
    monkeypatch.delenv("FORCE_COLOR")
    assert detect_color(tty=True) is True


def test_plain_unless_asked(comparison, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    assert "\x1b" not in render(comparison, "terminal")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in render(comparison, "terminal")
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in render(comparison, "terminal")


def test_colours_say_the_verdicts_roles_and_warnings() -> None:
    doc = Document((
        Table("t", ("metric", "verdict"), (("a", "improvement"), ("b", "regression"),
              ("c", "DIFFERS"), ("d", "variable under test"), ("e", "expected")),
              (False, False)),
        Lines(("WARNING: the flex backend is not in use",)),
        Lines(("median step time: improvement (-6 %)",)),
    ))  # fmt: skip
    out = format_document(doc, width=80, color=True)
    assert "\x1b[32mimprovement" in out and "\x1b[31mregression" in out
    assert "\x1b[1;31mDIFFERS" in out and "\x1b[36mvariable under test" in out
    assert "\x1b[2mexpected" in out and "\x1b[33mWARNING: the flex backend" in out
    assert "median step time: \x1b[32mimprovement\x1b[0m (-6 %)" in out
    plain = format_document(doc, width=80, color=False).splitlines()
    stripped = SGR.sub("", out).splitlines()
    assert [x for x in stripped if set(x) != {"─"}] == [x for x in plain if set(x) != {"-"}]


@pytest.mark.parametrize("width", [60, 100, 200])
def test_tables_fit_the_width_numbers_stay_whole(comparison, width: int) -> None:  # noqa: ANN001
    doc = document(comparison)
    out = format_document(doc, width=width, color=False)
    lines = out.splitlines()
    for line in lines:
        assert len(line) <= width or line.startswith("  - "), line  # lists: commands, unwrapped
    for t in (b for b in doc.blocks if isinstance(b, Table)):
        if len(t.title) <= width:
            assert t.title in lines  # the title on its own line, above the table
        for row in t.rows:
            for cell, right in zip(row, t.right, strict=True):
                first, *share = cell.split(" (")  # "74.666 (0.13 %)" may wrap before "("
                assert not right or all(x in out for x in [first, *("(" + s for s in share)])


def test_numeric_column_right_aligned() -> None:
    doc = Document((Table("t", ("name", "ms"), (("a", "1.000"), ("bb", "123.456")),
                          (False, True)),))  # fmt: skip
    assert format_document(doc, width=80, color=False) == (
        "t\n"
        "name       ms\n"
        "--------------\n"
        "a       1.000\n"
        "bb    123.456\n"
    )


def test_cells_wrap_rather_than_overflow() -> None:
    long = "word " * 40 + "x" * 70
    doc = Document((Table("t", ("name", "ms"), ((long, "1.000"),), (False, True)),))
    out = format_document(doc, width=50, color=False)
    assert max(map(len, out.splitlines())) <= 50
    assert "".join(out.split()).count("x") == 70 and out.count("word") == 40  # nothing cut
    assert "1.000" in out


def test_empty_table_and_heading_without_terminal_text() -> None:
    doc = Document((Heading("md only"), Table("t", ("a", "b"), (), (False, True))))
    assert format_document(doc, width=80, color=False) == "t\na       b\n----------\n(none)\n"


def test_prose_wraps_with_a_hanging_indent() -> None:
    doc = Document((Lines(("alpha " * 30, "second"), hanging=True),))
    lines = format_document(doc, width=40, color=False).splitlines()
    assert lines[0].startswith("alpha") and all(x.startswith("  ") for x in lines[1:])
    assert lines[-1] == "  second" and max(map(len, lines)) <= 40


def test_names_too_long_for_their_column_break_after_separators(comparison) -> None:  # noqa: ANN001
    """At 100 columns the contract table's variable no longer splits mid-word
    (``overlap_moe_expe`` / ``rt_parallel_comm``): it breaks after its underscores; a word
    without a separator in the first half of a line is still cut at the width; nothing is
    lost."""
    out = render(comparison, "terminal")  # piped: 100 columns
    contract = out.split("Measurement contract")[1].split("\n\n")[0]
    first = [line.split()[0] for line in contract.splitlines()[2:] if line.strip()]
    cut = ("overlap_moe_expe ", "rt_parallel_comm")
    assert not any(x.startswith(cut) for x in out.splitlines())
    assert first[-3:] == ["overlap_moe_", "expert_parallel_", "comm"]
    name = "alpha_beta-gamma.delta:epsilon/zeta," + "x" * 30
    doc = Document((Table("t", ("name", "ms", "more ms"), ((f"a {name}", "1.000", "12,345.678"),
                                                           ("b", "2.000", "1")),
                          (False, True, True)),))  # fmt: skip
    lines = format_document(doc, width=34, color=False).splitlines()[3:]
    assert [x.split("  ")[0].strip() for x in lines] == [  # a 20-column name column
        "a alpha_beta-gamma.", "delta:epsilon/zeta,", "x" * 20, "x" * 10, "b"]
