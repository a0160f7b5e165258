"""Issue 31, points 4, 5, 7 (first bullet) and 8: text that reaches a person, each case held to
the harness' promises (tests/fuzz/harness.py) and to its right outcome.

- 4: a hostile file name, a bad file in a rank folder, a hostile ``--vary``, ``--fail-if``,
  ``--window`` or ``-o``, a warning a module prints, an internal error, a progress label: every
  stderr line goes through one neutraliser (:mod:`nsysmoe.text`); figures get no control
  character (no "Glyph 27 missing" warning printing one);
- 5: NVTX and kernel names with OSC, BEL, CSI (C1), CR, bidi overrides, URLs, ``www.`` and
  e-mail addresses: no raw control in the terminal report, Markdown, HTML, JSON or CSV, on
  stdout, stderr or in ``-o`` files, and no Markdown autolink;
- 7: ``$…$`` in a label or a file name is literal figure text, not mathtext (was: exit 3);
- 8: labels of 2×60,000 characters: cut in tables and figures, said in full once (was: 58 s).

The checker is :func:`raw_controls`: no C0/C1 control, DEL, bidi mark or override, line
separator or lone surrogate, except ``\\n`` and ``\\t`` (layout) and, where colour is forced,
rich's SGR colour escapes.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import warnings
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.api import example_paths
from tests.fuzz.harness import Case, Outcome, hold, run_inprocess

#: what a terminal acts on: OSC (retitle) ended by BEL, clear screen, CSI as a C1 control,
#: a carriage return, a right-to-left override, a left-to-right isolate
HOSTILE = "\x1b]0;T\x07\x1b[2J\x9b6n\r\u202e\u2066"
#: what GitHub would link
LINKS = " https://evil.example/x www.evil.example a@evil.example"
#: mathtext to matplotlib
MATH = " $x^$"

_RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                  r"\ud800-\udfff]")  # fmt: skip
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def raw_controls(text: str, *, color: bool = False) -> list[str]:
    """The raw controls in ``text`` that no output line may carry (see the module's doc)."""
    return _RAW.findall(_SGR.sub("", text) if color else text)


def assert_clean(got: Outcome, *files: Path, color: bool = False) -> None:
    for where, text in (("stdout", got.out), ("stderr", got.err),
                        *((f.name, f.read_text(encoding="utf-8", errors="surrogateescape"))
                          for f in files)):  # fmt: skip
        found = raw_controls(text, color=color)
        assert not found, f"{where}: raw {sorted(set(found))!r}"
    assert "Glyph" not in got.err, got.err


@pytest.fixture(scope="module")
def examples() -> tuple[Path, Path]:
    off, on = example_paths("nsys")
    return off, on


def _copy(src: Path, to: Path) -> Path:
    shutil.copyfile(src, to)
    to.chmod(0o644)
    return to


def hostile_names(src: Path, to: Path) -> Path:
    """A copy whose kernel names and MoE NVTX ranges end in controls, links and mathtext."""
    _copy(src, to)
    con = sqlite3.connect(to)
    try:
        tail = HOSTILE + LINKS + MATH
        con.execute("UPDATE StringIds SET value = value || ? WHERE id >= 16", (tail,))
        con.execute("UPDATE NVTX_EVENTS SET text = text || ? WHERE text LIKE '%hybrid-ep%'",
                    (tail,))  # fmt: skip
        con.commit()
    finally:
        con.close()
    return to


# -- 4: stderr ------------------------------------------------------------------------------------


def one_error(case: Case, *needles: str) -> str:
    got = hold(case)
    assert got.code == 2
    assert_clean(got)
    line = got.err.strip()
    for n in needles:
        assert n in line, line
    return line


def test_bad_file_with_a_hostile_name_is_one_visible_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad\x1b]0;T\x07\x1b[2J\u202e.sqlite"
    bad.write_bytes(b"junk")
    one_error(Case("hostile-name", ("analyze", str(bad)), (bad,)),
              "bad\\x1b]0;T\\x07\\x1b[2J\\u202e.sqlite")  # fmt: skip


def test_missing_file_with_a_hostile_name_is_one_visible_line(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x9b6n\u202e.sqlite"
    one_error(Case("hostile-missing", ("analyze", str(missing))), "gone\\x9b6n\\u202e.sqlite")


def test_bad_file_in_a_rank_folder_is_a_visible_warning(examples, tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        _copy(examples[0], ranks / f"r{r}.sqlite")
    (ranks / "r2\x1b]0;T\x07.sqlite").write_bytes(b"SQLite format 3\x00junk")
    for fmt in ("terminal", "markdown", "html", "json"):
        out = tmp_path / f"report.{fmt}"
        args = ("analyze", str(ranks), "--jobs", "1", "--format", fmt, "-o", str(out))
        got = hold(Case(f"rank-folder-{fmt}", args, (ranks,), codes=frozenset({0})))
        assert_clean(got, out)
        assert "r2\\x1b]0;T\\x07.sqlite" in got.err, got.err


@pytest.mark.parametrize("option", ["--vary", "--fail-if", "--window", "--step-range"])
def test_hostile_option_values_are_one_visible_line(option: str, examples) -> None:
    value = {"--fail-if": f"bogus{HOSTILE}<3", "--window": f"1{HOSTILE}-x",
             "--step-range": f"({HOSTILE}"}.get(option, f"x{HOSTILE}")  # fmt: skip
    one_error(Case(f"hostile{option}", ("analyze", *map(str, examples), option, value),
                   examples))  # fmt: skip


def test_hostile_output_path_is_a_visible_wrote_line(examples, tmp_path: Path) -> None:
    out = tmp_path / f"r{HOSTILE}.md"
    got = hold(Case("hostile-o", ("analyze", str(examples[0]), "--format", "markdown", "-o",
                                  str(out)), examples, codes=frozenset({0})))  # fmt: skip
    assert_clean(got, out)
    assert got.err.startswith("wrote ") and "r\\x1b]0;T\\x07" in got.err


def test_a_warning_another_module_prints_is_one_visible_line(examples, monkeypatch) -> None:
    analyze = api.analyze

    def warned(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        warnings.warn(f"a note about k{HOSTILE}\nsecond line", UserWarning, stacklevel=2)
        return analyze(*args, **kwargs)

    monkeypatch.setattr(api, "analyze", warned)
    got = hold(Case("warning", ("analyze", str(examples[0]), "--format", "json"), examples,
                    codes=frozenset({0})))  # fmt: skip
    assert_clean(got)
    lines = got.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nsysmoe: warning: a note about k\\x1b]0;T")
    assert "second line (UserWarning at" in lines[0]


def test_internal_error_is_one_visible_line(examples, monkeypatch) -> None:
    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError(f"boom {HOSTILE}")

    monkeypatch.setattr(api, "analyze", broken)
    got = run_inprocess(("analyze", str(examples[0])))
    assert got.code == 3
    assert_clean(got)
    assert got.err.count("\n") == 1 and "internal error: RuntimeError: boom \\x1b]0;T" in got.err


def test_progress_labels_are_visible() -> None:
    from nsysmoe.cli_types import progress as _progress

    bar = _progress(3, f"dask tcp://h{HOSTILE}:8786")
    assert not raw_controls(bar.label) and "\\x1b]0;T\\x07" in bar.label


# -- 5: reports of hostile names, files and labels ---------------------------------------------


def _no_autolinks(md: str) -> None:
    """Outside code spans (never linked) and our figure links' targets, no URL, ``www.`` or
    e-mail address GitHub would link."""
    prose = re.sub(r"(`+).*?\1|\]\([^)]*\)", "", md)
    assert not re.search(r"(?<!\\)://", prose), re.search(r".{40}(?<!\\)://.{20}", prose)
    assert not re.search(r"(?i)www\.", prose)
    assert not re.search(r"[A-Za-z0-9]@[A-Za-z0-9]", prose)


FORMATS = ("terminal", "markdown", "html", "json")


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_names_reach_no_output_raw(fmt: str, examples, tmp_path: Path) -> None:
    one = hostile_names(examples[0], tmp_path / "h.sqlite")
    for name, args in (("one", (str(one),)), ("ab", (str(one), str(examples[1])))):
        out = tmp_path / f"{name}.{fmt}"
        got = hold(Case(f"names-{name}-{fmt}", ("analyze", *args, "--format", fmt, "-o", str(out)),
                        (one, *examples), codes=frozenset({0})))  # fmt: skip
        assert_clean(got, out)
        report = out.read_text()
        if fmt != "json":
            assert "\\x1b]0;T\\x07\\x1b[2J\\x9b6n \\u202e\\u2066" in report  # CR: a break
        if fmt == "markdown":
            _no_autolinks(report)
        stdout = hold(Case(f"names-{name}-{fmt}-stdout", ("analyze", *args, "--format", fmt),
                           (one, *examples), codes=frozenset({0})))  # fmt: skip
        assert_clean(stdout)


def test_hostile_names_in_colour_carry_only_colour_escapes(examples, tmp_path: Path) -> None:
    one = hostile_names(examples[0], tmp_path / "h.sqlite")
    got = hold(Case("names-colour", ("analyze", str(one), str(examples[1])), (one, *examples),
                    env=(("FORCE_COLOR", "1"), ("NO_COLOR", "")), codes=frozenset({0})))
    assert _SGR.search(got.out), "colour was forced"
    assert_clean(got, color=True)


@pytest.mark.parametrize("fmt", ("terminal", "markdown", "json", "csv"))
def test_hostile_kernel_names_in_the_kernel_table(fmt: str, examples, tmp_path: Path) -> None:
    one = hostile_names(examples[0], tmp_path / "h.sqlite")
    got = hold(Case(f"kernels-{fmt}", ("kernels", str(one), "--format", fmt), (one,),
                    codes=frozenset({0})))  # fmt: skip
    assert_clean(got)
    if fmt == "markdown":
        _no_autolinks(got.out)


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_file_names_and_labels_reach_no_output_raw(fmt: str, examples,
                                                           tmp_path: Path) -> None:  # fmt: skip
    off = _copy(examples[0], tmp_path / f"off{HOSTILE} www.evil.example a@evil.example.sqlite")
    on = _copy(examples[1], tmp_path / f"on{HOSTILE}.sqlite")
    plots = tmp_path / "plots"
    runs = {
        "file-names": ("analyze", str(off), str(on)),
        "labels": ("analyze", *map(str, examples), "--labels", f"a{HOSTILE}{LINKS},b{HOSTILE}"),
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.{fmt}"
        plot = ("--plot", str(plots / name)) if fmt == "markdown" else ()
        got = hold(Case(f"{name}-{fmt}", (*args, "--format", fmt, "-o", str(out), *plot),
                        (off, on, *examples), codes=frozenset({0})))  # fmt: skip
        assert_clean(got, out)
        if fmt == "markdown":
            _no_autolinks(out.read_text())
            for svg in (plots / name).glob("*.svg"):  # the figures' text, as SVG comments
                assert not raw_controls(svg.read_text()), svg.name


# -- 7: mathtext in labels and file names ----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["html", "plot"])
def test_dollars_in_labels_are_literal_figure_text(fmt: str, examples, tmp_path: Path) -> None:
    how = ("--format", "html", "-o", str(tmp_path / "r.html")) if fmt == "html" else (
        "--format", "json", "--plot", str(tmp_path / "plots"))  # fmt: skip
    got = hold(Case(f"dollar-labels-{fmt}", ("analyze", *map(str, examples), "--labels",
                                             "a$x^$,b", *how), examples, codes=frozenset({0})))
    assert_clean(got)
    if fmt == "plot":  # matplotlib notes each text drawn in the SVG: the label as written
        assert "a$x^$ vs b" in (tmp_path / "plots" / "breakdown.svg").read_text()


@pytest.mark.parametrize("fmt", ["html", "plot"])
def test_dollars_in_rank_file_names_are_literal(fmt: str, examples, tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for name in ("${HOST}_$RANK.sqlite", "${HOST}_$RANK2.sqlite"):
        _copy(examples[0], ranks / name)
    how = ("--format", "html", "-o", str(tmp_path / "r.html")) if fmt == "html" else (
        "--format", "json", "--plot", str(tmp_path / "plots"))  # fmt: skip
    got = hold(Case(f"dollar-ranks-{fmt}", ("analyze", str(ranks), "--jobs", "1", *how), (ranks,),
                    codes=frozenset({0})))  # fmt: skip
    assert_clean(got)
    if fmt == "plot":
        assert "${HOST}_$RANK:" in (tmp_path / "plots" / "ranks.svg").read_text()


def test_every_text_of_a_figure_is_literal_whoever_sets_it() -> None:
    from matplotlib.cbook import is_math_text

    from nsysmoe.renderers.plot.common import figure

    fig = figure(4, 3)
    ax = fig.add_subplot()
    ax.set_yticks([0, 1], ["$a$", f"k{HOSTILE}"])
    ax.set_title("$x^$")
    ax.bar([0], [1], label="$\\alpha$")
    ax.legend()
    fig.suptitle(f"title{HOSTILE}\nsecond line")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is a warning: none
        fig.canvas.draw()
        fig.canvas.draw()  # twice: nothing escaped twice
    texts = [ax.get_title(), fig.get_suptitle(), *(t.get_text() for t in ax.get_yticklabels()),
             *(t.get_text() for t in ax.get_legend().get_texts())]  # fmt: skip
    assert texts[0] == "\\$x^\\$" and texts[1].endswith("\\u2066\nsecond line")
    assert not any(is_math_text(t) or raw_controls(t.replace("\n", "")) for t in texts), texts


# -- 8: long labels -------------------------------------------------------------------------------

LONG = 60_000


@pytest.mark.parametrize("fmt", ["html", "terminal", "markdown"])
def test_long_labels_are_cut_and_said_in_full_once(fmt: str, examples, tmp_path: Path) -> None:
    a, b = "a" * LONG, "b" * LONG
    out = tmp_path / f"r.{fmt}"
    got = hold(Case(f"long-labels-{fmt}", ("analyze", *map(str, examples), "--labels", f"{a},{b}",
                                           "--format", fmt, "-o", str(out)), examples,
                    codes=frozenset({0})))  # fmt: skip
    assert_clean(got, out)
    report = out.read_text()
    if fmt == "terminal":  # a long word is folded over lines, each after the first indented
        report = re.sub(r"\n +", "", report)
    for full in (a, b):
        assert report.count(full) == 1  # in full once
        rest = report.replace(full, "")
        assert full[:49] not in rest and full[:47] + "…" in rest  # cut to 48 elsewhere
    if fmt == "html":  # figures and all: about the size of a page with short labels
        assert len(report) < 1.5e6


def test_long_labels_are_whole_in_the_json(examples) -> None:
    import json

    a, b = "a" * LONG, "b" * LONG
    got = hold(Case("long-labels-json", ("analyze", *map(str, examples), "--labels", f"{a},{b}",
                                         "--format", "json"), examples, codes=frozenset({0})))
    assert json.loads(got.out)["labels"] == {"off": a, "on": b}


def test_labels_that_differ_late_stay_distinct_when_cut(examples) -> None:
    from nsysmoe.renderers.plot.common import side_names

    stem = "run-" + "x" * 80
    c = api.compare(*examples, labels=(stem + "-lr1e-4", stem + "-lr3e-4"))
    names = side_names((c.off, c.on))
    assert len(set(names)) == 2 and all(len(n) <= 48 for n in names), names
    assert names[0].endswith("1e-4") and names[1].endswith("3e-4")
