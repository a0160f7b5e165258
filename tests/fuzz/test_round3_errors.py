"""Issue 31, point 7: user input and trace content that ended as an internal error (exit 3, no
report), each held to the harness' promises (tests/fuzz/harness.py) and to its right outcome:
refused with one clear line, or skipped and counted where the count reaches the report, or the
right numbers.

- NVTX iteration ranges whose number does not parse (beyond int64, digits of another script);
- ``--step-range`` patterns whose group 1 is not a number, or that have no group 1;
- a file name that is not UTF-8 (a surrogate-escaped ``str`` on Linux);
- a trace shifted to end at 2^63-1 ns, with relative and absolute windows at the timeline's end.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe.api import example_paths
from tests.fuzz.harness import Case, hold

INT64_MAX = 2**63 - 1
TIMED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")  # fmt: skip
#: per-GPU durations and counts (no absolute timestamps: those differ on a shifted trace)
GPU_KEYS = ("pid", "device", "kernels", "span_ns", "active_ns", "idle_ns", "comm_ns",
            "compute_ns", "hidden_ns", "exposed_ns", "comm_gemm_attn_ns", "idle_host_ns",
            "idle_dependency_ns", "idle_other_ns")  # fmt: skip


@pytest.fixture(scope="module")
def example() -> Path:
    """The shipped example export (never changed: each test edits a copy)."""
    return example_paths("nsys")[0]


def _copy(example: Path, to: Path) -> Path:
    shutil.copyfile(example, to)
    to.chmod(0o644)
    return to


def _sql(path: Path, *statements: str, params: tuple = ()) -> None:
    con = sqlite3.connect(path)
    try:
        for s in statements:
            con.execute(s, params)
        con.commit()
    finally:
        con.close()


def _json(out: str) -> dict:
    return json.loads(out)["traces"][0]


def _gpus(trace: dict) -> list[dict]:
    return [{k: g[k] for k in GPU_KEYS} for g in trace["gpus"]]


def _analysis(path: Path, *more: str) -> dict:
    """The JSON analysis of a trace that must analyze fine."""
    got = hold(Case(f"reference {path.name}", ("analyze", str(path), "--format", "json", *more),
                    (path,), codes=frozenset({0})))  # fmt: skip
    return _json(got.out)


# -- NVTX iteration numbers that do not parse: skipped, counted, the rest measured -------------


@pytest.mark.parametrize("numbers", [
    ("99999999999999999999",),  # beyond int64
    ("9223372036854775808",),  # 2^63: one past int64
    ("٣",),  # ARABIC-INDIC DIGIT THREE: \d matches it, int() would take it; not 0-9
    ("٣", "99999999999999999999"),
], ids=["beyond-int64", "2^63", "arabic-indic", "two"])  # fmt: skip
def test_unparsable_iteration_number_is_skipped_and_counted(
    numbers: tuple[str, ...], example: Path, tmp_path: Path
) -> None:
    bad = _copy(example, tmp_path / "bad.sqlite")
    clean = _copy(example, tmp_path / "clean.sqlite")
    for i, number in enumerate(numbers):  # iterations 4, 5, … renamed in one, deleted in other
        _sql(bad, "UPDATE NVTX_EVENTS SET text = ? WHERE text = ?",
             params=(f"iteration {number}", f"iteration {4 + i}"))  # fmt: skip
        _sql(clean, "DELETE FROM NVTX_EVENTS WHERE text = ?", params=(f"iteration {4 + i}",))
    want = _analysis(clean)
    n = len(numbers)
    line = (f"{n} NVTX range{'s' if n > 1 else ''} matching the iteration pattern skipped: "
            f"{'their' if n > 1 else 'its'} number is not digits 0-9 within int64 "
            f"(e.g. '{numbers[0]}')")  # fmt: skip

    def check(out: str) -> None:
        got = _json(out)
        assert [w for w in got["warnings"] if line in w], got["warnings"]
        # the same window (the steady iterations chosen without the skipped ranges) and the
        # same per-GPU numbers as the trace with those ranges deleted
        assert {k: got["window"][k] for k in ("start_ns", "end_ns")} == {
            k: want["window"][k] for k in ("start_ns", "end_ns")}
        assert [it["step"] for it in got["iterations"]] == [
            it["step"] for it in want["iterations"]]
        assert _gpus(got) == _gpus(want)

    hold(Case("unparsable-iteration", ("analyze", str(bad), "--format", "json"), (bad,),
              codes=frozenset({0}), check=check))  # fmt: skip
    # the count reaches the terminal report too, as one warning
    text = hold(Case("unparsable-iteration-terminal", ("analyze", str(bad)), (bad,),
                     codes=frozenset({0}))).out  # fmt: skip
    assert f"warning: {n} NVTX range" in text


def test_unparsable_number_with_a_user_pattern_is_skipped_not_refused(
    example: Path, tmp_path: Path
) -> None:
    """Digits of another script under the user's own ``\\d`` pattern: the trace's content, not
    the pattern's fault: counted, and the other iterations measured."""
    bad = _copy(example, tmp_path / "bad.sqlite")
    _sql(bad, "UPDATE NVTX_EVENTS SET text = 'iteration ٣' WHERE text = 'iteration 3'")

    def check(out: str) -> None:
        got = _json(out)
        assert any(w.startswith("1 NVTX range matching the iteration pattern skipped")
                   for w in got["warnings"]), got["warnings"]  # fmt: skip
        assert 3 not in [it["step"] for it in got["iterations"]]

    hold(Case("user-pattern-arabic", ("analyze", str(bad), "--format", "json", "--step-range",
                                      r"^iteration (\d+)$"), (bad,), codes=frozenset({0}),
              check=check))  # fmt: skip


# -- --step-range whose group 1 is not a number: a usage error, one line --------------------------


@pytest.mark.parametrize(("pattern", "error"), [
    ("(mlp)", r"^nsysmoe: error: --step-range '\(mlp\)': group 1 captured 'mlp', which is not a "
              r"number; group 1 must capture the iteration number, digits 0-9"),
    ("(.*)", r"group 1 captured 'iteration 0', which is not a number, and non-numbers in "
             r"1,263 more NVTX ranges; group 1 must capture the iteration number"),
    ("()", r"group 1 captured '', which is not a number, and non-numbers in 1,263 more"),
    (r"iteration (\d+|x)", r"group 1 captured 'x', which is not a number; group 1 must"),
    ("(-?[0-9]+)$", r"group 1 captured '-1', which is not a number"),
    ("iteration", r"--step-range 'iteration' has no capture group; group 1 must capture the "
                  r"iteration number, digits 0-9, e.g. 'iteration \(\[0-9\]\+\)'"),
    (r"(?:iteration) \d+", r"has no capture group"),
], ids=["mlp", "dot-star", "empty", "x", "negative", "no-group", "non-capturing"])  # fmt: skip
def test_step_range_group_1_not_a_number_is_a_usage_error(
    pattern: str, error: str, example: Path, tmp_path: Path
) -> None:
    path = _copy(example, tmp_path / "named.sqlite")
    # ranges the patterns above capture: one named 'mlp', one 'iteration x', one 'iteration -1'
    _sql(path, "UPDATE NVTX_EVENTS SET text = 'mlp' WHERE rowid = (SELECT min(rowid) FROM "
               "NVTX_EVENTS WHERE text LIKE 'combine_core%')",
         "UPDATE NVTX_EVENTS SET text = 'iteration x' WHERE rowid = (SELECT min(rowid) FROM "
         "NVTX_EVENTS WHERE text LIKE 'dispatch_core%')",
         "UPDATE NVTX_EVENTS SET text = 'iteration -1' WHERE rowid = (SELECT min(rowid) FROM "
         "NVTX_EVENTS WHERE text LIKE 'dispatch_preprocess%')")  # fmt: skip
    if pattern in ("(.*)", "()"):
        path = example  # the shipped trace as it is: 1,264 named ranges, none cross-thread
    hold(Case(f"step-range {pattern}", ("analyze", str(path), "--step-range", pattern), (path,),
              codes=frozenset({2}), expect_error=error))  # fmt: skip


# -- a file name that is not UTF-8 -----------------------------------------------------------------


def test_file_name_not_utf8_analyzes(example: Path, tmp_path: Path) -> None:
    name = os.fsdecode(b"bad\xff\xfe.sqlite")  # 'bad\udcff\udcfe.sqlite', as argv gives it
    path = _copy(example, tmp_path / name)
    want = _analysis(example)

    def check(out: str) -> None:
        got = _json(out)
        assert got["path"] == str(path)
        assert _gpus(got) == _gpus(want)

    hold(Case("not-utf8-name", ("analyze", str(path), "--format", "json"), (path,),
              codes=frozenset({0}), check=check))  # fmt: skip
    # the real command line: the name's bytes through argv, the report on a real stdout (a
    # strict UTF-8 one too), in a file, with figures and from the cache: the name is shown as
    # its bytes' escapes, every output is UTF-8
    for fmt, extra, env in (
        ("terminal", (), {}),
        ("terminal", (), {"PYTHONIOENCODING": "utf-8:strict"}),
        ("markdown", ("-o", tmp_path / "r.md", "--plot", tmp_path / "figs"), {}),
        ("html", ("-o", tmp_path / "r.html"), {}),
        ("json", ("--cache",), {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}),
        ("json", ("--cache",), {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}),  # served
    ):  # fmt: skip
        got = subprocess.run([sys.executable, "-c", "from nsysmoe.cli import main; main()",
                              "analyze", os.fsencode(path), "--format", fmt, *extra],
                             capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                             check=False, env={**os.environ, **env})  # fmt: skip
        assert got.returncode == 0, got.stderr
        out = got.stdout + b"".join(p.read_bytes() for p in tmp_path.glob("r.*"))
        out.decode("utf-8")  # strict: no byte of the name leaks raw
        if fmt != "json":
            assert b"bad\\xff\\xfe.sqlite" in out


def test_file_name_not_utf8_missing_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"missing\xff\xfe.sqlite")
    hold(Case("not-utf8-missing", ("analyze", str(path)), codes=frozenset({2}),
              expect_error=r"missing.*\.sqlite: no such file; check the path$"))  # fmt: skip


# -- a trace that ends at 2^63-1 ns --------------------------------------------------------------


def _end_at_int64_max(path: Path, shift: bool) -> Path:
    """Every timestamp moved so the last kernel ends at 2^63-1; rows ending after it (an NVTX
    range, a copy) end with it. ``shift=False``: the same trace unmoved, those rows cut the same
    way, for reference."""
    con = sqlite3.connect(path)
    try:
        last = con.execute("SELECT max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        by = INT64_MAX - last if shift else 0
        for table in TIMED:
            for col in ("start", "end"):
                con.execute(f'UPDATE {table} SET "{col}" = CASE WHEN "{col}" > ? THEN ? '
                            f'ELSE "{col}" + ? END WHERE "{col}" IS NOT NULL',
                            (last, last + by, by))  # fmt: skip
        con.commit()
        if shift:
            assert con.execute("SELECT max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (
                INT64_MAX,)
    finally:
        con.close()
    return path


@pytest.fixture(scope="module")
def at_end(example: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the trace ending at 2^63-1, the same trace unmoved), both read-only."""
    d = tmp_path_factory.mktemp("int64-end")
    moved = _end_at_int64_max(_copy(example, d / "end.sqlite"), shift=True)
    same = _end_at_int64_max(_copy(example, d / "same.sqlite"), shift=False)
    for p in (moved, same):
        p.chmod(0o444)
    return moved, same


@pytest.mark.parametrize("window", ["+1s:+3s", "+9223372036854775806:", "+1s:"])
def test_relative_window_past_int64_is_refused(window: str, at_end: tuple[Path, Path]) -> None:
    path = at_end[0]
    error = (r"^nsysmoe: error: --window starts [0-9,]+ ns after the first GPU activity \(at "
             r"9,223,372,03[0-9,]+ ns\), at or past the end of the trace timeline \(2\^63-1 "
             r"ns\); use a start within the trace$")
    hold(Case(f"end-at-max {window}", ("analyze", str(path), f"--window={window}"), (path,),
              codes=frozenset({2}), expect_error=error))  # fmt: skip


@pytest.mark.parametrize("window", ["+100ms:+300ms", "+0:+9223372036854775807", "+900ms:",
                                    ":+9223372036854775807"])  # fmt: skip
def test_relative_window_to_int64_end_saturates(window: str, at_end: tuple[Path, Path]) -> None:
    """A bound past 2^63-1 is held there: the numbers are those of the unmoved trace over the
    same relative window."""
    moved, same = at_end
    want = _analysis(same, f"--window={window}")

    def check(out: str) -> None:
        assert _gpus(_json(out)) == _gpus(want)

    hold(Case(f"end-at-max {window}", ("analyze", str(moved), "--format", "json",
                                       f"--window={window}"), (moved,), codes=frozenset({0}),
              check=check))  # fmt: skip


def test_absolute_window_at_int64_end(at_end: tuple[Path, Path]) -> None:
    """[2^63-2, 2^63-1): the last ns of the last kernel, which ends at 2^63-1."""
    path = at_end[0]

    def check(out: str) -> None:
        (gpu,) = _json(out)["gpus"]
        assert (gpu["kernels"], gpu["span_ns"], gpu["active_ns"], gpu["idle_ns"]) == (1, 1, 1, 0)

    hold(Case("end-at-max last ns", ("analyze", str(path), "--format", "json",
                                     "--window=9223372036854775806:9223372036854775807"),
              (path,), codes=frozenset({0}), check=check))  # fmt: skip


@pytest.mark.parametrize("window", ["9223372036854775806:9223372036854775807", "5s:6s", "+5s:+6s",
                                    "+9223372036854775806:"])  # fmt: skip
def test_window_past_the_trace_end_is_one_line(window: str, example: Path) -> None:
    hold(Case(f"past the end {window}", ("analyze", str(example), f"--window={window}"),
              (example,), codes=frozenset({2}),
              expect_error=r"no GPU work in the window|at or past the end of the trace timeline"))
