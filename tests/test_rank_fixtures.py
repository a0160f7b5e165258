"""The multi-rank straggler fixtures (tests/fixtures/ranks.py): the truth, built by
construction, re-measured from the written SQLite rows.

The check shares nothing with the construction but the name -> channel rules of the oracle: it
reads every file's kernels, launch calls, ``iteration N`` ranges and session start, puts the
rows on one clock (session-relative or epoch timestamps, told apart from the data), re-matches
the collective instances (k-th launch of a kernel name per iteration and rank), and measures
wait, transfer and their exposed parts on per-nanosecond masks.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fixtures import oracle
from tests.fixtures.ranks import ORIGIN_NS, straggler_scenario
from tests.fixtures.writer import write_export

DAY_NS = 86_400 * 10**9
ITERATION = re.compile(r"^iteration \d+$")
TID_MASK = ~0xFFFFFF


def _write(tmp: Path, specs: list, ddl: str) -> list[Path]:
    return [write_export(tmp / f"{s.label}.sqlite", s, ddl) for s in specs]


def _read(path: Path) -> dict[str, Any]:
    con = sqlite3.connect(path)
    try:
        (utc,) = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        strings = dict(con.execute("SELECT id, value FROM StringIds"))
        kernels = [(s, e, gpid, strings[n], corr) for s, e, gpid, n, corr in con.execute(
            'SELECT start, "end", globalPid, demangledName, correlationId '
            "FROM CUPTI_ACTIVITY_KIND_KERNEL")]  # fmt: skip
        calls = {(tid & TID_MASK, corr): (tid, start) for corr, tid, start in con.execute(
            "SELECT correlationId, globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME")}  # fmt: skip
        ranges = [(s, e, tid, text if text is not None else strings[tid_text])
                  for s, e, tid, text, tid_text in con.execute(
                      'SELECT start, "end", globalTid, text, textId FROM NVTX_EVENTS '
                      "WHERE eventType = 59")]  # fmt: skip
    finally:
        con.close()
    first = min(k[0] for k in kernels)
    epoch = first >= utc - DAY_NS  # absolute timestamps (the real 6-rank export) or relative
    return {"utc": utc, "epoch": epoch, "kernels": kernels, "calls": calls, "ranges": ranges}


def _measure(paths: list[Path]) -> dict[str, Any]:
    """Everything the truth claims, from the rows of ``paths`` alone."""
    files = [_read(p) for p in paths]
    origin = min(f["utc"] for f in files)
    ranks: dict[int, list[tuple[int, int, str, str | None, str | None, int]]] = defaultdict(list)
    for f in files:
        shift = -origin if f["epoch"] else f["utc"] - origin
        iters = [(s + shift, e + shift, tid, t) for s, e, tid, t in f["ranges"]
                 if ITERATION.match(t)]  # fmt: skip
        for start, end, gpid, name, corr in f["kernels"]:
            tid, api = f["calls"][(gpid, corr)]
            api += shift
            around = [t for s, e, t_tid, t in iters if t_tid == tid and s <= api <= e]
            assert len(around) == 1, "every launch lies in one iteration range"
            channel = oracle.name_channel(name)
            channel = None if channel == "other" else channel
            pid = (gpid >> 24) & 0xFFFFFF
            ranks[pid].append((start + shift, end + shift, name, channel, around[0], api))
    # re-match: the k-th launch (API order) of a name per iteration and rank
    inst: dict[tuple[str, str, int], dict[int, tuple[int, int]]] = defaultdict(dict)
    for pid, rows in ranks.items():
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for start, end, name, channel, it, _ in sorted(rows, key=lambda r: r[5]):
            if channel is not None:
                k = seen[(it, name)]
                seen[(it, name)] += 1
                inst[(it, name, k)][pid] = (start, end)
    pids = sorted(ranks)
    assert all(sorted(v) == pids for v in inst.values()), "an instance runs on every rank"
    waits: dict[int, dict[str, list[tuple[int, int, int]]]] = {p: defaultdict(list) for p in pids}
    instances = {}
    for (it, name, k), by_pid in inst.items():
        last = max(s for s, _ in by_pid.values())
        at_last = [p for p, (s, _) in by_pid.items() if s == last]
        channel = oracle.name_channel(name)
        instances[(it, name, k)] = {
            "channel": channel, "last_ns": last,
            "last_pid": at_last[0] if len(at_last) == 1 else None,
            "arrivals": {p: (s, e, min(last, e) - s, e - min(last, e))
                         for p, (s, e) in by_pid.items()},
        }  # fmt: skip
        for p, (s, e) in by_pid.items():
            waits[p][channel].append((s, min(last, e), e))
    per_rank = {}
    for pid, rows in ranks.items():
        lo, hi = min(r[0] for r in rows), max(r[1] for r in rows)
        compute = np.zeros(hi - lo, dtype=bool)
        for s, e, _, ch, _, _ in rows:
            if ch is None:
                compute[s - lo : e - lo] = True
        chans = {}
        for ch, pieces in waits[pid].items():
            w, t, c = (np.zeros(hi - lo, dtype=bool) for _ in range(3))
            for s, mid, e in pieces:
                w[s - lo : mid - lo] = True
                t[mid - lo : e - lo] = True
            for s, e, _, rch, _, _ in rows:
                if rch == ch:
                    c[s - lo : e - lo] = True
            chans[ch] = {
                "count": len(pieces), "comm_ns": int(c.sum()), "wait_ns": int(w.sum()),
                "transfer_ns": int(t.sum()), "exposed_wait_ns": int((w & ~compute).sum()),
                "exposed_transfer_ns": int((t & ~compute).sum()),
            }  # fmt: skip
        per_rank[pid] = chans
    return {"origin": origin, "instances": instances, "ranks": per_rank, "pids": pids,
            "epoch": [f["epoch"] for f in files]}  # fmt: skip


def _stragglers(instances: dict, pids: list[int]) -> dict[str, tuple]:
    """The documented rule, re-applied: single last arrival; most often last; ties: min pid."""
    out = {}
    for ch in sorted({i["channel"] for i in instances.values()}):
        mine = [i for i in instances.values() if i["channel"] == ch]
        counts = {p: sum(1 for i in mine if i["last_pid"] == p) for p in pids}
        best = max(counts.values())
        pid = min(p for p in pids if counts[p] == best) if best else None
        caused = sum(a[2] for i in mine if pid is not None and i["last_pid"] == pid
                     for p, a in i["arrivals"].items() if p != pid)  # fmt: skip
        out[ch] = (pid, best, len(mine), caused, [counts[p] for p in pids])
    return out


def _check(truth: dict[str, Any], m: dict[str, Any]) -> None:
    assert m["origin"] == truth["clock"]["origin_ns"] == ORIGIN_NS
    assert m["pids"] == [r["pid"] for r in truth["ranks"]]
    for r in truth["ranks"]:
        assert r["channels"] == m["ranks"][r["pid"]], r["pid"]
    got = {(i["iteration"], i["name"], i["k"]): i for i in truth["instances"]}
    assert set(got) == set(m["instances"])
    for key, i in got.items():
        mi = m["instances"][key]
        assert (i["channel"], i["last_ns"], i["last_pid"]) == (
            mi["channel"], mi["last_ns"], mi["last_pid"])  # fmt: skip
        assert {a["pid"]: (a["start"], a["end"], a["wait_ns"], a["transfer_ns"])
                for a in i["arrivals"]} == mi["arrivals"]  # fmt: skip
    want = {ch: (s["pid"], s["last_count"], s["instances"], s["caused_wait_ns"], s["last_counts"])
            for ch, s in truth["stragglers"].items()}  # fmt: skip
    assert want == _stragglers(m["instances"], m["pids"])


CASES = [("multi", "3.13.2", False), ("multi", "3.28.1", True), ("multi", "2.9.1", False),
         ("files", "3.13.2", False), ("files", "3.28.1", False), ("files", "3.13.2", True),
         ("files", "3.28.1", True)]  # fmt: skip


@pytest.mark.parametrize(("layout", "ddl", "epoch"), CASES)
def test_truth_matches_the_rows(tmp_path: Path, layout: str, ddl: str, epoch: bool) -> None:
    specs, truth = straggler_scenario(layout=layout, epoch_timestamps=epoch)
    paths = _write(tmp_path, specs, ddl)
    assert len(paths) == (1 if layout == "multi" else 4)
    m = _measure(paths)
    assert m["epoch"] == [epoch] * len(paths)
    _check(truth, m)


def test_straggler_is_the_late_rank_and_waits_split() -> None:
    specs, truth = straggler_scenario(n_ranks=4, straggler=2, delay_ns=400_000)
    slow = truth["ranks"][2]
    for ch in ("ep.dispatch", "ep.combine"):
        s = truth["stragglers"][ch]
        assert (s["rank"], s["pid"]) == (2, slow["pid"]) and s["last_count"] >= 6
        assert s["caused_wait_ns"] >= 3 * 6 * 400_000  # 3 others x >= 6 late instances
        for r in truth["ranks"]:
            c = r["channels"][ch]
            assert c["wait_ns"] + c["transfer_ns"] == c["comm_ns"]  # one comm stream, serial
            assert c["exposed_wait_ns"] < c["wait_ns"] and c["exposed_transfer_ns"] < c[
                "transfer_ns"]  # fmt: skip
            if r["rank"] != 2:
                assert c["wait_ns"] > 10 * slow["channels"][ch]["wait_ns"]
    late = [i for i in truth["instances"] if i["tag"].endswith(".L1")]
    assert len(late) == 3 * 4 and all(i["last_pid"] == slow["pid"] for i in late)
    for i in truth["instances"]:  # everyone leaves together
        assert {a["end"] for a in i["arrivals"]} == {i["end_ns"]} == {i["last_ns"] + i[
            "transfer_ns"]}  # fmt: skip
    assert {i["channel"] for i in truth["instances"]} == {
        "ep.dispatch", "ep.combine", "nccl.allreduce"}  # fmt: skip


def test_layouts_and_clocks_give_one_truth(tmp_path: Path) -> None:
    def core(t: dict) -> dict:
        return {k: v for k, v in t.items() if k not in ("clock", "scenario")}

    variants = [straggler_scenario(layout=lay, epoch_timestamps=ep)
                for lay in ("multi", "files") for ep in (False, True)]  # fmt: skip
    assert all(core(t) == core(variants[0][1]) for _, t in variants)
    specs, truth = variants[2]  # files, session-relative
    offsets = truth["clock"]["session_offsets_ns"]
    assert min(offsets) == 0 and len(set(offsets)) == 4 and offsets.index(0) == 1
    paths = _write(tmp_path, specs, "3.13.2")
    for path, f, off in zip(paths, truth["clock"]["files"], offsets, strict=True):
        con = sqlite3.connect(path)
        q = "SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME"
        utc, utc_text = con.execute(q).fetchone()
        lo, hi = con.execute('SELECT min(start), max("end") FROM CUPTI_ACTIVITY_KIND_KERNEL'
                             ).fetchone()  # fmt: skip
        meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
        con.close()
        assert utc == ORIGIN_NS + off == f["utc_epoch_ns"] and utc_text == "2026-01-15T12:00:00"
        assert 0 < lo < hi < 10**11  # small session-relative times
        assert f["to_global_ns"] == off and meta["EXPORT_CONFIG_TIME_SHIFT"] == "0"
    specs, truth = variants[3]  # files, epoch timestamps
    path = _write(tmp_path, specs[:1], "3.28.1")[0]
    con = sqlite3.connect(path)
    lo = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    (start,) = con.execute("SELECT startTime FROM ANALYSIS_DETAILS").fetchone()
    con.close()
    utc = truth["clock"]["files"][0]["utc_epoch_ns"]
    assert lo > utc and start > utc and meta["EXPORT_CONFIG_TIME_SHIFT"] == str(utc)
    assert meta["EXPORT_PARAM_TIME_NORMALIZE"] == "true"


def test_multi_export_channel_truth_matches_the_oracle(tmp_path: Path) -> None:
    specs, truth = straggler_scenario()
    (path,) = _write(tmp_path, specs, "3.13.2")
    measured = oracle.brute_force(path, per_ns=False)
    for g in truth["gpus"]:
        for key, value in measured[(g["pid"], g["device"])].items():
            assert g[key] == value, (g["pid"], key)
    assert oracle.nvtx_sum(path) == truth["nvtx"]
    for r, g in zip(truth["ranks"], truth["gpus"], strict=True):
        assert {c: v["comm_ns"] for c, v in r["channels"].items()} == {
            c: v["comm_ns"] for c, v in g["channels"].items()}  # fmt: skip


def test_ties_have_no_last_rank(tmp_path: Path) -> None:
    specs, truth = straggler_scenario(jitter_ns=0, late_on=((1, "allreduce"),))
    tied = [i for i in truth["instances"] if i["last_pid"] is None]
    assert len(tied) == len(truth["instances"]) - 1  # only step 1's all-reduce has a last rank
    assert all(len({a["start"] for a in i["arrivals"]}) == 1 for i in tied)
    s = truth["stragglers"]
    assert s["ep.dispatch"]["pid"] is None and s["ep.dispatch"]["caused_wait_ns"] == 0
    assert s["nccl.allreduce"]["rank"] == 2 and s["nccl.allreduce"]["last_count"] == 1
    assert s["nccl.allreduce"]["caused_wait_ns"] == 3 * 400_000
    _check(truth, _measure(_write(tmp_path, specs, "3.13.2")))


def test_scenario_is_deterministic_and_validates() -> None:
    assert straggler_scenario(seed=3)[1] == straggler_scenario(seed=3)[1]
    assert straggler_scenario(seed=3)[1] != straggler_scenario(seed=4)[1]
    with pytest.raises(ValueError):
        straggler_scenario(layout="nodes")
    with pytest.raises(ValueError):
        straggler_scenario(n_ranks=2, straggler=2)
    with pytest.raises(ValueError):
        straggler_scenario(n_ranks=2, layout="files", session_offsets_ns=(5, 9))
