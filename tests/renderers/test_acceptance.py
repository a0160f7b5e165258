"""The acceptance report (issue 33): the unprofiled logs' verdict first, in every format; the A/B
with its logs as the seeds' evidence bundle (the sections in their order, the A/B's own report
unchanged at the end); JSON in its envelope, valid against nsysmoe/schemas/acceptance.schema.json;
hostile labels, paths, arguments and notes neutralised per medium.

Values are built by hand (small, known numbers); the A/B is the shipped examples' Comparison."""

from __future__ import annotations

import html as htmllib
import itertools
import json
import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from importlib import resources

import jsonschema
import polars as pl
import pytest

from nsysmoe import __version__, api
from nsysmoe.acceptance import (
    SAMPLE_SCHEMA,
    Acceptance,
    AcceptanceSide,
    AcceptedComparison,
    Change,
    LogWindow,
    ProfileLink,
)
from nsysmoe.renderers import document, render
from nsysmoe.renderers.document import Document, Heading, Lines, Section, nested
from nsysmoe.renderers.html import format_document as html_document
from nsysmoe.renderers.markdown import format_document as markdown_document
from nsysmoe.renderers.report.acceptance import SECTIONS
from nsysmoe.renderers.terminal import format_document as terminal_document
from tests.renderers.pages import assert_well_formed

PEAK = 61_234_567_890  # bytes: 57.029 GiB
HOSTILE = "x<script>alert(1)</script>|[a](http://e.vil) **b** \x1b[2J\x1b]0;pwned\x07\u202e"


def side(label: str, median: float, mean: float, ci: tuple[float, float], tflops: float,
         config: dict[str, str] | None = None, notes: tuple[str, ...] = (),
         path: str | None = None, loss_finite: bool | None = True) -> AcceptanceSide:  # fmt: skip
    """One log's window, iterations 3–60 (58 one-iteration samples, 2 skipped as warm-up)."""
    window = LogWindow(3, 60, 58, 58, 1, "warm-up detected", 2, 60, "acceptance",
                       "iterations 3–60: 58 steps in 58 samples, 2 skipped as warm-up")
    return AcceptanceSide(label, path or f"logs/{label}.json", "megatron-json", None, window,
                          "step time", median, mean, ci, tflops, None, loss_finite, 0, 1, PEAK,
                          tuple(sorted((config or {}).items())), notes,
                          pl.DataFrame(schema=SAMPLE_SCHEMA))  # fmt: skip


OFF = side("off", 1.234567, 1.2351, (1.2301, 1.2402), 244.039,
           {"--seq-length": "4096", "--overlap": "false"})  # fmt: skip
ON = side("on", 1.158, 1.159, (1.157, 1.161), 287.305,
          {"--seq-length": "4096", "--overlap": "true"}, notes=("1 truncated last line skipped",))
TUNED = side("+tuning", 1.1, 1.101, (1.099, 1.103), 299.352,
             {"--seq-length": "8192", "--overlap": "true"})  # fmt: skip
R1 = Change(0, 1, -6.2, (-6.9, -5.5), 17.7, "accepted improvement", 0.002, False)
R2 = Change(1, 2, -5.0, (-5.6, -4.4), 4.2, "accepted improvement", 0.05, True)
BASE2 = Change(0, 2, -10.9, (-11.5, -10.3), 22.7, "accepted improvement", 0.05, True)
ONE = Acceptance((OFF,), (), (), False, 0.01, 0, 2000)
AB = Acceptance((OFF, ON), (R1,), (R1,), False, 0.01, 0, 2000)
LADDER = Acceptance((OFF, ON, TUNED), (R1, R2), (R1, BASE2), True, 0.01, 0, 2000)
LINK = ProfileLink((5.0, 4.7), None, -6.4, 103.0,
                   "the profile explains 103 % of the accepted -6.2 %")
VERDICT = "Accepted (unprofiled, iterations 3–60, 58 steps): improvement -6.2 % step time"


@pytest.fixture(scope="module")
def accepted() -> AcceptedComparison:
    return AcceptedComparison(api.compare(*api.example_paths("nsys")), AB, LINK)


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    path = resources.files("nsysmoe") / "schemas" / "acceptance.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def first_line(text: str) -> str:
    return text.lstrip("\n").split("\n", 1)[0]



def test_one_log_opens_with_its_median_ci_and_grade() -> None:
    want = ("off: median step 1,234.567 ms (mean 1,235.100, 95 % CI 1,230.100 … 1,240.200 ms); "
            "acceptance")  # fmt: skip
    assert first_line(render(ONE, "terminal")) == want
    assert first_line(render(ONE, "markdown")) == "### " + want
    assert not document(ONE).blocks[1:] or "Training arguments" not in render(ONE, "terminal")


def test_ab_opens_with_the_verdict_then_table_changes_health_sources() -> None:
    for fmt in ("terminal", "markdown"):
        text = render(AB, fmt)
        assert first_line(text).removeprefix("### ") == VERDICT, fmt
        said = ["Unprofiled steady windows", "grade: acceptance = a run of at least 50",
                "off vs on: accepted improvement: -6.2 % step time (95 % CI -6.9 … -5.5 %); "
                "TFLOP/s/GPU +17.7 %",
                "off: loss finite over the window; 0 skipped iterations, 1 NaN iteration; peak "
                "memory 57.029 GiB",
                "on: logs/on.json (megatron-json); iterations 3–60: 58 steps in 58 samples",
                "on: 1 truncated last line skipped", "Training arguments that differ"]
        where = [text.find(s) for s in said]
        assert -1 not in where and where == sorted(where), (fmt, said, where)


def test_side_table_numbers_are_the_values() -> None:
    """The table's cells against the values (independent: ms = s × 1000, 3 decimals)."""
    (table,) = [b for b in document(AB).blocks if getattr(b, "title", "").startswith("Unprofiled")]
    assert table.rows[0] == ("off", "3–60", "58 (58)", "1,234.567", "1,235.100",
                             "1,230.100 … 1,240.200", "acceptance")  # fmt: skip
    assert table.rows[1][3:6] == ("1,158.000", "1,159.000", "1,157.000 … 1,161.000")


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "html"])
def test_peak_memory_is_the_bytes_in_gib(fmt: str) -> None:
    """The health line's peak: the side's bytes over 2**30, three decimals (57.029, not GB of
    1e9: 61.235), whatever the line calls it."""
    gib = f"{PEAK / 2**30:.3f}"
    assert gib != f"{PEAK / 1e9:.3f}"
    said = re.findall(r"; peak [a-z ]+ ([\d,.]+) GiB", render(AB, fmt))
    assert said == [gib, gib]  # off and on


def test_tflops_table_and_change_say_the_means_and_cis() -> None:
    """TFLOP/s per GPU: each side's median, mean and the mean's CI in their own table; each
    change's median TFLOP/s change with its CI."""
    off = replace(OFF, mean_tflops=243.5, ci95_mean_tflops=(242.25, 244.75))
    on = replace(ON, mean_tflops=None, ci95_mean_tflops=None)
    change = replace(R1, ci95_median_tflops_pct=(16.04, 19.46))
    acc = Acceptance((off, on), (change,), (change,), False, 0.01, 0, 2000)
    (table,) = [b for b in document(acc).blocks if getattr(b, "title", "").startswith("Model")]
    assert table.rows == (("off", "244.039", "243.500", "242.250 … 244.750"),
                          ("on", "287.305", "–", "–"))  # fmt: skip
    assert "; TFLOP/s/GPU +17.7 % (95 % CI +16.0 … +19.5 %)" in render(acc, "markdown")
    none = replace(OFF, median_tflops=None)
    assert "Model TFLOP/s" not in render(Acceptance((none,), (), (), False, 0.01, 0, 2000),
                                         "terminal")  # fmt: skip


def test_terminal_lines_fit_100_columns() -> None:
    for result in (ONE, AB, LADDER):
        text = render(result, "terminal")
        assert max(map(len, text.splitlines())) <= 100, text
        assert len(first_line(render(result, "markdown"))) < 100


def test_a_long_label_is_cut_only_in_the_terminal_line() -> None:
    """The terminal's first line fits 100 columns (the label cut); Markdown, HTML headings and
    the page's <title> wrap, so they keep the whole label."""
    label = "moe-hybridep-overlap-" + "x" * 60 + "-end"
    one = Acceptance((side(label, 1.2, 1.2, (1.1, 1.3), 1.0),), (), (), False, 0.01, 0, 2000)
    term = first_line(render(one, "terminal"))
    assert len(term) <= 99 and label not in term and "-end" not in term
    whole = f"{label}: median step 1,200.000 ms"
    assert first_line(render(one, "markdown")).startswith("### " + whole)
    page = render(one, "html", page=True)
    assert f"<title>{whole}" in page and f"<h3>{whole}" in page
    flat = Change(0, 1, 0.3, (-0.5, 1.1), 0.0, "no measurable change")
    long = side("on-" + "y" * 40, 1.2, 1.2, (1.1, 1.3), 1.0)
    acc = Acceptance((OFF, long, long), (flat, flat), (flat, flat), False, 0.01, 0, 2000)
    assert "(±1.1 %)" not in first_line(render(acc, "terminal"))  # the short form, to fit
    assert "no measurable change (±1.1 %), " in first_line(render(acc, "markdown"))


def test_ladder_names_its_rung_says_the_total_and_each_config_difference() -> None:
    text = render(LADDER, "terminal")
    assert first_line(text) == ("Accepted (unprofiled, iterations 3–60, 58 steps): improvement "
                                "-5.0 % step time, on → +tuning")  # fmt: skip
    assert text.splitlines()[2].startswith("off vs +tuning (against the base): accepted "
                                           "improvement: -10.9 % step time")  # fmt: skip
    for line in ("off vs on: accepted improvement: -6.2 %", "on vs +tuning: accepted "
                 "improvement: -5.0 %"):  # fmt: skip
        assert line in text
    (config,) = [b for b in document(LADDER).blocks if getattr(b, "title", "").startswith("Train")]
    # independent: the keys whose values are not all equal
    sides = [dict(s.config) for s in LADDER.sides]
    differ = sorted(k for k in sides[0] if len({s[k] for s in sides}) > 1)
    assert [r[0] for r in config.rows] == differ == ["--overlap", "--seq-length"]
    assert config.rows[1] == ("--seq-length", "4096", "4096", "8192")


def test_equivalent_changes_say_the_loss_difference_and_flag_it() -> None:
    text = render(LADDER, "terminal")
    assert ("off vs on: largest loss difference per iteration 0.002 (tolerance 1 % of the base's "
            "loss)") in text  # fmt: skip
    assert "WARNING: on vs +tuning: largest loss difference per iteration 0.05" in text
    assert "loss difference" not in render(AB, "terminal")  # not declared equivalent


def test_no_change_and_too_few_are_not_accepted() -> None:
    flat = Change(0, 1, 0.3, (-0.5, 1.1), 0.0, "no measurable change")
    acc = Acceptance((OFF, ON), (flat,), (flat,), False, 0.01, 0, 2000)
    assert first_line(render(acc, "terminal")) == (
        "Not accepted (unprofiled, iterations 3–60, 58 steps): no measurable change (±1.1 %)")
    few = Change(0, 1, None, None, None, "too few steps")
    acc = Acceptance((OFF, ON), (few,), (few,), False, 0.01, 0, 2000)
    assert first_line(render(acc, "terminal")).startswith("Not accepted (unprofiled, iterations "
                                                          "3–60, 58 steps): too few steps")


def with_losses(s: AcceptanceSide, losses: dict[int, float]) -> AcceptanceSide:
    rows = [{"iteration": i, "iterations": 1, "step_s": 1.0, "tflops": None,
             "tokens_per_s": None, "loss": v} for i, v in losses.items()]  # fmt: skip
    return replace(s, samples=pl.DataFrame(rows, schema=SAMPLE_SCHEMA))


def test_loss_difference_said_absolute_and_relative_to_the_tolerance() -> None:
    off = {3: 10.0, 4: 8.0, 5: 4.0, 6: float("nan"), 7: 2.0}
    on = {3: 10.01, 4: 8.0, 5: 4.004, 6: 1.0, 8: 9.0}  # 7 and 8: one side only
    common = [i for i in off if i in on and math.isfinite(off[i]) and math.isfinite(on[i])]
    largest = max(abs(on[i] - off[i]) for i in common)
    relative = 100 * max(abs(on[i] - off[i]) / abs(off[i]) for i in common)  # 0.1 % at 3 and 5
    assert (round(largest, 6), round(relative, 6)) == (0.01, 0.1)
    change = replace(R1, max_loss_diff=largest, max_loss_diff_pct=relative)  # as measured
    acc = Acceptance((with_losses(OFF, off), with_losses(ON, on)), (change,), (change,), True,
                     0.01, 0, 2000)  # fmt: skip
    assert ("off vs on: largest loss difference per iteration 0.01 (at most 0.10 % of the "
            "base's loss; tolerance 1 %)") in render(acc, "markdown")  # fmt: skip


def test_plurals_of_the_health_line() -> None:
    one_each = replace(OFF, skipped_iterations=1, nan_iterations=2)
    unknown = replace(ON, skipped_iterations=None, nan_iterations=None)
    text = render(Acceptance((one_each, unknown), (R1,), (R1,), False, 0.01, 0, 2000), "terminal")
    assert "1 skipped iteration, 2 NaN iterations;" in text
    assert "skipped iterations not logged, NaN iterations not logged;" in text


@pytest.mark.parametrize("result", ["AB", "LADDER", "bundle"])
def test_the_terminal_never_parts_a_number_from_its_unit(result: str, accepted) -> None:  # noqa: ANN001
    """At every width, no sentence's line ends in a number whose unit opens the next line (a
    table's narrow cells are laid out by rich's tables, not checked here)."""
    value = {"AB": AB, "LADDER": LADDER, "bundle": accepted}[result]
    prose = tuple(b for b in document(value).blocks if isinstance(b, Lines | Heading))
    doc, parted = Document(prose), re.compile(r"\d\n\s*(?:%|ms|GiB)(?!\w)")
    for width in range(40, 121):
        text = terminal_document(doc, width=width, color=False)
        assert not parted.search(text), (width, parted.search(text))


def test_markdown_marks_in_labels_and_arguments_show_as_written() -> None:
    """A label's ** and backticks are escaped where they land (the verdict's change line, the
    table, the health and source lines, the arguments), and a label opening a quoted line
    cannot start a heading there."""
    mark = "**b** `x`"
    bad = replace(side("# " + mark, 1.2, 1.2, (1.1, 1.3), 1.0, {"--overlap": mark}))
    md = render(Acceptance((OFF, bad), (R1,), (R1,), False, 0.01, 0, 2000), "markdown")
    assert "**b**" not in md and "`x`" not in md
    assert md.count("\\*\\*b\\*\\* \\`x\\`") >= 5  # change, table, health, source, argument
    assert "> \\# " + "\\*\\*b" in md  # its health line: a quote, not a heading inside one
    assert not any(line.startswith(("> # ", "- # ")) for line in md.splitlines())


# --- the A/B with its logs: the evidence bundle --------------------------------------------------


def test_accepted_ab_opens_with_the_verdict_overhead_and_explanation(accepted) -> None:  # noqa: ANN001
    text = render(accepted, "terminal")
    lines = text.splitlines()
    assert lines[0] == VERDICT
    assert lines[2].startswith("off vs on: accepted improvement: -6.2 % step time (95 % CI")
    assert lines[3] == LINK.sentence
    assert lines[4] == ("profiling overhead (profiled steady step over the unprofiled median): "
                        "off +5.0 %, on +4.7 %")  # fmt: skip
    assert text.index(VERDICT) < text.index("overlap off vs on, all GPUs")  # the profile headline
    md = render(accepted, "markdown")
    assert first_line(md) == "### " + VERDICT
    assert md.index(VERDICT) < md.index("### nsysmoe A/B")
    warned = AcceptedComparison(accepted.comparison, AB, ProfileLink(
        (5.0, 12.0), "profiling slowed on 7.0 points more than off", None, None, "no explanation"))
    assert "WARNING: profiling slowed on 7.0 points more than off" in render(warned, "terminal")


def test_bundle_ends_with_the_ab_report_unchanged(accepted) -> None:  # noqa: ANN001
    profile = document(accepted.comparison).blocks
    blocks = document(accepted).blocks
    assert blocks[-len(profile):] == nested(Document(profile)).blocks
    demoted = render(accepted.comparison, "markdown").strip().replace("### nsysmoe A/B",
                                                                      "##### nsysmoe A/B", 1)
    assert demoted in render(accepted, "markdown")  # only its title demoted, under section 5


def outline_html(page: str) -> list[tuple[int, str]]:
    """(level, text) of every h1–h6, in document order."""
    out: list[tuple[int, str]] = []

    class Collect(HTMLParser):
        level = 0

        def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
            if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
                self.level = int(tag[1])
                out.append((self.level, ""))

        def handle_endtag(self, tag: str) -> None:
            self.level = 0 if tag == f"h{self.level}" else self.level

        def handle_data(self, data: str) -> None:
            if self.level:
                out[-1] = (out[-1][0], out[-1][1] + data)

    Collect().feed(page)
    return out


def test_bundle_outline_nests_the_profile_under_section_5(accepted) -> None:  # noqa: ANN001
    """In the page's outline (and the Markdown's), section 5 holds the A/B's report and its
    figures: every heading after it is deeper, no heading skips a level below its parent."""
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>'
    page = render(accepted, "html", page=True, svgs={"timeline": svg})
    md = render(accepted, "markdown", figures=("timeline.svg",))
    md_outline = [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^(#{1,6}) (.*)$", md,
                                                                     re.MULTILINE)]  # fmt: skip
    for outline in (outline_html(page), md_outline):
        texts = [t for _, t in outline]
        assert texts[0] == VERDICT and texts[-1] == "Figures", texts
        five = texts.index(SECTIONS[4])
        levels = [lvl for lvl, _ in outline]
        assert [levels[texts.index(s)] for s in SECTIONS] == [levels[0] + 1] * len(SECTIONS)
        assert texts[five + 1].startswith("nsysmoe A/B")
        assert all(lvl > levels[five] for lvl in levels[five + 1:]), outline
        assert all(b - a <= 1 for a, b in itertools.pairwise(levels)), outline
    plain = render(accepted.comparison, "html", page=True, svgs={"timeline": svg})
    assert [lvl for lvl, t in outline_html(plain) if t == "Figures"] == [4]  # alone: unchanged


def test_page_sections_in_the_bundle_order(accepted) -> None:  # noqa: ANN001
    c = accepted.comparison
    page = render(accepted, "html", page=True)
    assert_well_formed(page)
    headings = ["<h3>" + VERDICT, *(f"<h4>{s}</h4>" for s in SECTIONS), "<h5>nsysmoe A/B"]
    where = [page.find(h) for h in headings]
    assert -1 not in where and where == sorted(where), dict(zip(headings, where, strict=True))
    assert f"<title>{VERDICT}</title>" in page
    change, proof, table, health, profile = (
        page[a:b] for a, b in zip(where[1:6], [*where[2:6], len(page)], strict=True))
    assert "overlap_moe_expert_parallel_comm" in change and "--overlap" in change
    assert "--seq-length" not in change  # the same in both logs
    for s in (c.off, c.on):  # proof it ran: from each side's profile
        hidden = f"{s.analysis.totals.hidden_pct:.2f} %"
        assert f"<td>{s.name}</td><td>{s.dispatcher}</td><td>none traced</td>" in proof
        assert hidden in proof
    assert "1,234.567" in table and "Unprofiled steady windows" in table
    assert "peak memory 57.029 GiB" in health and "1 truncated last line skipped" in health
    assert "exposed communication" in profile


# --- JSON and its schema -------------------------------------------------------------------------


def test_json_envelopes_validate_and_round_trip(accepted, validator) -> None:  # noqa: ANN001
    for acc in (ONE, AB, LADDER):
        doc = json.loads(render(acc, "json"))
        validator.validate(doc)
        assert (doc["schema"], doc["version"], doc["nsysmoe_version"]) == (
            "nsysmoe.acceptance", 1, __version__)
        assert {k: v for k, v in doc.items() if k != "nsysmoe_version"} == json.loads(
            json.dumps(acc.to_dict()))
    doc = json.loads(render(accepted, "json"))
    assert (doc["schema"], doc["version"]) == ("nsysmoe.comparison", 1)
    block = doc.pop("acceptance")
    validator.validate(block)
    assert doc == json.loads(render(accepted.comparison, "json"))  # the A/B's JSON, plus the block
    off = block["sides"][0]
    assert off["median_step_s"] == 1.234567 and off["ci95_mean_step_s"] == [1.2301, 1.2402]
    assert off["peak_memory_bytes"] == PEAK and isinstance(off["peak_memory_bytes"], int)
    assert off["window"] | {"description": ""} == {
        "first": 3, "last": 60, "steps": 58, "samples": 58, "log_interval": 1,
        "why": "warm-up detected", "warmup_samples": 2, "run_iterations": 60,
        "grade": "acceptance", "description": ""}  # fmt: skip
    assert block["changes"][0]["ci95_median_step_pct"] == [-6.9, -5.5]
    assert block["changes"][0]["vs_base"]["verdict"] == "accepted improvement"
    assert block["profile"] == {"overhead_pct": [5.0, 4.7], "overhead_gap_pp": None,
                                "overhead_warning": None, "predicted_pct": -6.4,
                                "profiled_step_pct": None, "explains_pct": 103.0,
                                "sentence": LINK.sentence}  # fmt: skip


@pytest.mark.parametrize("breaks", [
    lambda d: d["sides"][0].pop("median_tflops"),
    lambda d: d["sides"][0]["window"].update(grade="winner"),
    lambda d: d["changes"][0]["vs_base"].update(extra=1),
    lambda d: d["changes"][0].pop("vs_base"),
    lambda d: d["sides"][0].update(peak_memory_bytes=1.5),
    lambda d: d.update(version=2),
])  # fmt: skip
def test_schema_refuses_what_to_dict_never_writes(validator, breaks) -> None:  # noqa: ANN001
    doc = json.loads(render(LADDER, "json"))
    breaks(doc)
    assert not validator.is_valid(doc)


# --- hostile text --------------------------------------------------------------------------------


def test_hostile_label_path_argument_and_note_are_neutralised(accepted) -> None:  # noqa: ANN001
    bad = side(HOSTILE, 1.2, 1.2, (1.1, 1.3), 1.0, {"--overlap": HOSTILE, HOSTILE: "1"},
               notes=(HOSTILE,), path=f"/tmp/{HOSTILE}.log")  # fmt: skip
    acc = Acceptance((OFF, bad), (R1,), (R1,), False, 0.01, 0, 2000)
    for result in (acc, AcceptedComparison(accepted.comparison, acc, LINK)):
        term, md = render(result, "terminal"), render(result, "markdown")
        page = render(result, "html", page=True)
        for out in (term, md, page):
            assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b[2J\\x1b]0;pwned\\x07\\u202e" in term
        assert "<script>" not in md and "x&lt;script&gt;" in md
        assert "&lt;/script&gt;\\|[a]\\(http\\://e.vil)" in md  # no cell end, link, autolink
        assert "<script" not in page and "x&lt;script&gt;alert(1)&lt;/script&gt;|" in page
        assert_well_formed(page)


def test_section_block_in_every_writer() -> None:
    doc = Document((Section("2 Proof <b>it</b> ran"),))
    h4 = "<h4>2 Proof &lt;b&gt;it&lt;/b&gt; ran</h4>"
    assert html_document(doc) == f'<div class="nsysmoe">\n{h4}\n</div>'
    assert markdown_document(doc) == "#### 2 Proof &lt;b&gt;it&lt;/b&gt; ran\n"
    assert terminal_document(doc, width=100, color=False) == "2 Proof <b>it</b> ran\n"


@pytest.mark.parametrize(("equivalent", "forced", "label"), [
    (False, False, "label: not declared training-equivalent (--equivalent compares the losses)"),
    (True, False, "label: training-equivalent, declared (--equivalent): per-iteration losses "
                  "compared, tolerance 1 % of the base's loss"),
    (True, True, "label: benchmark-only (forced load balancing on on): a throughput "
                 "comparison, not a training one"),
])  # fmt: skip
def test_the_change_is_labelled(equivalent: bool, forced: bool, label: str) -> None:
    """The seeds' label: benchmark-only where a side forced balancing, else training-equivalent
    where declared, else said to be undeclared — in every format, before the health lines."""
    acc = replace(AB, equivalent=equivalent,
                  sides=(OFF, replace(ON, benchmark_only=forced)))  # fmt: skip
    for fmt in ("terminal", "markdown", "html"):
        text = " ".join(htmllib.unescape(render(acc, fmt)).split())
        assert " ".join(label.split()) in text, fmt
