"""Damaged and hostile PyTorch profiler (Kineto) traces: every defect is one line on stderr, or is
counted in ``Trace.dropped`` and said in a warning, and the numbers of what is left stay exact.

Each trace starts as the Kineto twin of a generated export with known truth
(``tests/fixtures/hostile.py``); damaged events are added to it, so the truth still holds."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.api import analyze, load
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.kineto import read_kineto
from nsysmoe.model import WHOLE
from tests.fixtures.hostile import (
    gpu_numbers,
    gzip_bomb,
    gzip_text,
    kernel_events,
    kineto,
    lock,
    one_line_error,
    run_cli,
    truth_numbers,
)

MALFORMED = "events with a malformed ts/dur/args"


def with_kernels(tmp_path: Path, edit, n: int = 5, top: str = "") -> tuple[Path, dict]:
    """The trace plus ``n`` copies of its first kernels, each changed by ``edit`` (a function
    of the event as a dict, returning its JSON text)."""
    base, _ = kineto(tmp_path / "base.json")
    extra = [edit(json.loads(ev)) for ev in kernel_events(base)[:n]]
    return kineto(tmp_path / "trace.json", extra, top)


def assert_clean_run(proc) -> None:
    """Exit 0 and nothing at all on stderr (no traceback, no 'Exception ignored')."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


# --- 1. text that is not UTF-8, numbers that are not numbers -------------------------------------


def test_invalid_utf8_inside_strings_is_replaced_and_counted(tmp_path: Path) -> None:
    path, truth = kineto(tmp_path / "utf8.json")
    data = path.read_bytes()
    name = b'"name": "ProfilerStep#'
    assert data.count(name) == 2
    path.write_bytes(data.replace(name, b'"name": "\xffProfilerStep#'))  # one bad byte each
    trace = load(path)
    assert "2 invalid UTF-8 byte sequences in strings shown with U+FFFD" in trace.warnings
    assert trace.nvtx.filter(pl.col("name").str.starts_with("\ufffdProfilerStep#")).height == 2
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, 0)


def test_invalid_utf8_outside_strings_is_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [\xff]}')
    assert one_line_error(run_cli("analyze", str(path))).startswith(f"{path}: not valid JSON (")


@pytest.mark.parametrize("ts", ["1.5e99999", "1e400", "-1e400", "1e999999999999", "NaN",
                                '"soon"', "true", "null", "9" * 30])  # fmt: skip
def test_absurd_ts_is_a_malformed_event(tmp_path: Path, ts: str) -> None:
    def edit(ev: dict) -> str:
        return re.sub(r'"ts": [^,]+', f'"ts": {ts}', json.dumps(ev), count=1)

    path, truth = with_kernels(tmp_path, edit)
    trace = load(path)
    assert trace.dropped[MALFORMED] == 5
    assert f"5 {MALFORMED} left out" in trace.warnings
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, 0)
    assert_clean_run(run_cli("analyze", str(path), "--format", "json"))


def test_integer_beyond_the_parser_limit_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": 1' + "0" * 5000 + "}]}")
    assert one_line_error(run_cli("analyze", str(path))).startswith(f"{path}: not valid JSON (")


# --- 2. one cleaning policy ----------------------------------------------------------------------


def test_complete_event_without_dur_is_malformed_not_zero_length(tmp_path: Path) -> None:
    def edit(ev: dict) -> str:
        del ev["dur"]
        return json.dumps(ev)

    path, truth = with_kernels(tmp_path, edit, n=7)
    trace = load(path)
    assert trace.dropped[MALFORMED] == 7
    assert len(trace.kernels) == 836
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, 0)


def test_negative_ts_is_left_out_and_counted(tmp_path: Path) -> None:
    def edit(ev: dict) -> str:
        ev["ts"] = -1_700_000_000_000_000
        return json.dumps(ev)

    path, truth = with_kernels(tmp_path, edit, n=3)
    trace = load(path)
    assert trace.dropped["GPU rows starting before the capture (start < 0)"] == 3
    assert "3 GPU rows starting before the capture (start < 0) left out" in trace.warnings
    # span 0.29 s, not 1.7e18 ns
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, 0)


def test_malformed_device_is_counted_and_dropped(tmp_path: Path) -> None:
    def edit(ev: dict) -> str:
        ev["args"]["device"] = "cuda:0"
        return json.dumps(ev)

    path, truth = with_kernels(tmp_path, edit, n=4)
    trace = load(path)
    assert trace.dropped["GPU rows without a device or process"] == 4
    assert "4 GPU rows without a device or process left out" in trace.warnings
    assert trace.kernels["device"].null_count() == 0
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, 0)


@pytest.mark.parametrize("rank", [2**70, 2**40, -3, '"zero"'])
def test_unusable_rank_falls_back_to_the_os_pid(tmp_path: Path, rank: object) -> None:
    top = f'"distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": 1}}'
    path, truth = kineto(tmp_path / "rank.json", top=top)
    trace = load(path)
    (pid,) = set(trace.kernels["pid"])
    assert pid == 48211  # the scenario's OS pid
    assert ("distributedInfo.rank is not a rank (a whole number from 0 to 549755813887); the "
            "process is named by its OS pid") in trace.warnings  # fmt: skip
    assert gpu_numbers(analyze(trace, scope=WHOLE)) == truth_numbers(truth, pid)
    proc = run_cli("analyze", str(path))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_all_invalid_kernel_events_say_so(tmp_path: Path) -> None:
    base, _ = kineto(tmp_path / "base.json")
    text = base.read_text()
    kernels = kernel_events(base)
    for i, ev in enumerate(kernels):
        if i % 2:
            fixed = re.sub(r', "dur": [^,]+', "", ev, count=1)  # no dur: malformed
        else:
            fixed = re.sub(r'"dur": [^,]+', '"dur": -1', ev, count=1)
        text = text.replace(ev, fixed, 1)
    path = tmp_path / "allbad.json"
    path.write_text(text)
    assert one_line_error(run_cli("analyze", str(path))) == (
        f"{path}: all 836 kernel events were invalid (418 with a malformed ts/dur/args, 418 with "
        "dur < 0); the trace is damaged; pass a trace written by torch.profiler "
        "(export_chrome_trace or tensorboard_trace_handler)"
    )


# --- 3. unreadable files -------------------------------------------------------------------------


def test_unreadable_file_says_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests run as root, where chmod 000 does not stop reads: the refusal is simulated."""
    path, _ = kineto(tmp_path / "locked.json")
    lock(monkeypatch, path)
    with pytest.raises(NsysmoeError) as err:
        read_kineto(path)
    assert str(err.value) == f"{path}: cannot read (Permission denied); check the file"


# --- 4. gzip bombs -------------------------------------------------------------------------------

#: runs the reader on argv[1], then prints its peak RSS (KiB) whether or not it failed
PEAK = (
    "import resource, sys\n"
    "from nsysmoe.errors import NsysmoeError\n"
    "from nsysmoe.io.kineto import read_kineto\n"
    "try:\n    read_kineto(sys.argv[1])\nexcept NsysmoeError as e:\n    print(e)\n"
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
)


def _peak(path: Path, env: dict[str, str]) -> tuple[str, int]:
    import subprocess

    out = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **env}, check=True)  # fmt: skip
    *message, rss = out.stdout.strip().splitlines()
    return "\n".join(message), int(rss) * 1024


def test_gzip_bomb_stops_at_the_cap_with_bounded_memory(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 64 << 20)
    small = gzip_text(tmp_path / "small.json.gz", '{"traceEvents": []}')
    cap = {"NSYSMOE_MAX_JSON_BYTES": str(1 << 20)}
    message, rss = _peak(bomb, cap)
    assert message == (
        f"{bomb}: gzip data expands beyond 1,048,576 bytes (the limit set by "
        "NSYSMOE_MAX_JSON_BYTES), which looks like a gzip bomb; if the trace is genuine, set "
        "NSYSMOE_MAX_JSON_BYTES to a larger number of bytes"
    )
    _, baseline = _peak(small, cap)
    assert rss - baseline < 40 << 20  # the whole 64 MiB (and its text) never existed


def test_gzip_bomb_default_cap_and_raising_it(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 80 << 20)  # ~80 KB: the 64 MiB floor applies
    proc = run_cli("analyze", str(bomb), env={**os.environ, "NSYSMOE_MAX_JSON_BYTES": ""})
    assert one_line_error(proc) == (
        f"{bomb}: gzip data expands beyond 67,108,864 bytes (the default limit: 50x the "
        "compressed size, at least 64 MiB), which looks like a gzip bomb; if the trace is "
        "genuine, set NSYSMOE_MAX_JSON_BYTES to a larger number of bytes"
    )
    raised = run_cli("analyze", str(bomb), env={**os.environ, "NSYSMOE_MAX_JSON_BYTES": "1e9"})
    assert one_line_error(raised) == (
        "NSYSMOE_MAX_JSON_BYTES='1e9' is not a number of bytes; set it to a whole number such "
        "as 4294967296 (4 GiB), or unset it"
    )
    raised = run_cli("analyze", str(bomb),
                     env={**os.environ, "NSYSMOE_MAX_JSON_BYTES": str(100 << 20)})  # fmt: skip
    assert one_line_error(raised).startswith(f"{bomb}: not valid JSON (")  # read, but no JSON


def test_genuine_gzip_trace_reads_under_the_default_cap(tmp_path: Path) -> None:
    path, truth = kineto(tmp_path / "t.json")
    gz = gzip_text(tmp_path / "t.json.gz", path.read_text())
    assert gpu_numbers(analyze(gz, scope=WHOLE)) == truth_numbers(truth, 0)
