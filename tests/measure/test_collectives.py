"""Collectives across ranks (nsysmoe.measure.collectives) against a brute force: instances
matched by plain dictionaries (groups with unequal launch counts cut between their neighbours by
loops over every pair of launches), wait and transfer painted per nanosecond; lockstep runs with
launches deleted, against which launch is which instance by construction; and the real 6-rank
all-reduce export against an independent reading of its rows."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.api import analyze_many
from nsysmoe.measure.collectives import (
    ARRIVAL_SCHEMA,
    clock_offset,
    match,
    summarize,
)
from nsysmoe.model import WHOLE
from nsysmoe.parallel import Executor

CHANNELS = ("ep.dispatch", "nccl.allreduce")


def tables(ranks):
    """ranks: per rank, (comm rows (channel, name, step, start, end), compute (start, end))."""
    arr, busy = [], []
    for r, (comm, compute) in enumerate(ranks):
        seen: dict[tuple, int] = defaultdict(int)
        for ch, name, step, s, e in sorted(comm, key=lambda x: (x[3], x[4], x[1])):
            k = seen[(ch, name, step)]
            seen[(ch, name, step)] += 1
            arr.append((f"r{r}", 1, r, ch, name, step, k, s, e))
        busy += [(f"r{r}", 1, r, s, e) for s, e in compute]
    schema = {"rank": pl.String} | ARRIVAL_SCHEMA
    a = pl.DataFrame(arr, schema=schema, orient="row")
    b = pl.DataFrame(busy, schema={"rank": pl.String, "pid": pl.Int64, "device": pl.Int64,
                                   "start": pl.Int64, "end": pl.Int64}, orient="row")
    return a, b


def instances(ranks) -> tuple[dict, dict]:
    """The matching rule by loops: {(step, channel, name, k): {rank: (start, end)}} for the
    instances matched, and [(step, channel, name, k, present_on, ambiguous_on)] for the others,
    sorted (a list: two instances that different ranks lack can share a launch number k)."""
    n = len(ranks)
    launches: dict[tuple, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for r, (comm, _) in enumerate(ranks):
        for ch, name, step, s, e in sorted(comm, key=lambda x: (x[3], x[4], x[1])):
            launches[(step, ch, name)][r].append((s, e))  # in k order
    even = {g for g, by in launches.items()
            if len(by) == n and len({len(v) for v in by.values()}) == 1}  # fmt: skip
    matched: dict[tuple, dict[int, tuple[int, int]]] = defaultdict(dict)
    for g in even:
        for r, v in launches[g].items():
            for k, se in enumerate(v):
                matched[(*g, k)][r] = se
    unmatched = []
    for g in set(launches) - even:
        anchors = {r: [se for h in even if h[0] == g[0] for se in launches[h].get(r, [])]
                   for r in range(n)}  # fmt: skip
        placed = []  # (lo, hi, rank, k, (start, end)): the anchors it lies between
        for r, v in launches[g].items():
            for k, (s, e) in enumerate(v):
                before = sum(1 for _, ae in anchors[r] if ae <= s)
                notafter = sum(1 for a_s, _ in anchors[r] if a_s <= e)  # started by its end
                placed.append((min(before, notafter), max(before, notafter), r, k, (s, e)))
        blocks: list[list] = []
        reach = None
        for item in sorted(placed, key=lambda x: (x[0], x[1])):
            if reach is None or item[0] > reach:
                blocks.append([])
            blocks[-1].append(item)
            reach = item[1] if reach is None else max(reach, item[1])
        for block in blocks:
            by_rank: dict[int, list] = defaultdict(list)
            for _, _, r, k, se in block:
                by_rank[r].append((k, se))
            counts = {r: len(v) for r, v in by_rank.items()}
            runs = all(max(k for k, _ in v) - min(k for k, _ in v) + 1 == len(v)
                       for v in by_rank.values())  # fmt: skip
            if len(by_rank) == n and len(set(counts.values())) == 1 and runs:
                ordered = {r: sorted(v) for r, v in by_rank.items()}
                for j in range(counts[0]):
                    k = max(ordered[r][j][0] for r in ordered)
                    matched[(*g, k)] = {r: ordered[r][j][1] for r in ordered}
                continue
            most = max(counts.values())
            present = sorted(f"r{r}" for r, c in counts.items() if c == most)
            some = sorted(f"r{r}" for r, c in counts.items() if c < most)
            k0 = max(min(k for k, _ in by_rank[r]) for r, c in counts.items() if c == most)
            for j in range(most):
                unmatched.append((*g, k0 + j, present, some))
    return dict(matched), sorted(unmatched)


def brute(ranks):
    n = len(ranks)
    by_key, _ = instances(ranks)
    wait: dict[tuple[int, str], set[int]] = defaultdict(set)
    transfer: dict[tuple[int, str], set[int]] = defaultdict(set)
    inst: dict[tuple[int, str], int] = defaultdict(int)
    last_of: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    caused: dict[tuple[str, int], int] = defaultdict(int)
    for key, per in by_key.items():
        if len(per) < n:
            continue
        ch = key[1]
        latest = max(s for s, _ in per.values())
        lasts = [r for r, (s, _) in per.items() if s == latest]
        for r, (s, e) in per.items():
            m = min(latest, e)
            wait[(r, ch)] |= set(range(s, m))
            transfer[(r, ch)] |= set(range(m, e))
            inst[(r, ch)] += 1
        if len(lasts) == 1:
            last_of[ch][lasts[0]] += 1
            caused[(ch, lasts[0])] += sum(min(latest, e) - s for r, (s, e) in per.items()
                                          if r != lasts[0])  # fmt: skip
    busy = {r: {t for s, e in compute for t in range(s, e)} for r, (_, compute) in
            enumerate(ranks)}  # fmt: skip
    out = {}
    for (r, ch), n_inst in inst.items():
        w, t = wait[(r, ch)], transfer[(r, ch)]
        out[(f"r{r}", ch)] = {"instances": n_inst, "wait_ns": len(w), "transfer_ns": len(t),
                              "exposed_wait_ns": len(w - busy[r]),
                              "exposed_transfer_ns": len(t - busy[r])}  # fmt: skip
    # per rank, all channels: the union of the channels' sets of ns (a shared ns counts once)
    for r in {r for r, _ in inst}:
        chans = [ch for q, ch in inst if q == r]
        w = set().union(*(wait[(r, ch)] for ch in chans))
        t = set().union(*(transfer[(r, ch)] for ch in chans))
        out[(f"r{r}", None)] = {"channels": len(chans),
                                "instances": sum(inst[(r, ch)] for ch in chans),
                                "wait_ns": len(w), "transfer_ns": len(t),
                                "exposed_wait_ns": len(w - busy[r]),
                                "exposed_transfer_ns": len(t - busy[r])}  # fmt: skip
    strag = {}
    for ch, counts in last_of.items():
        best = sorted(counts.items(), key=lambda kv: (-kv[1], f"r{kv[0]}"))[0]
        strag[ch] = (f"r{best[0]}", best[1], caused[(ch, best[0])])
    return out, strag


comm_row = st.tuples(st.sampled_from(CHANNELS), st.sampled_from(["a", "b"]), st.integers(0, 1),
                     st.integers(0, 40), st.integers(0, 15)).map(
    lambda c: (c[0], c[1], c[2], c[3], c[3] + c[4]))  # fmt: skip
span = st.tuples(st.integers(0, 50), st.integers(0, 15)).map(lambda x: (x[0], x[0] + x[1]))
rank = st.tuples(st.lists(comm_row, max_size=6), st.lists(span, max_size=4))


@settings(max_examples=200, deadline=None)
@given(st.lists(rank, min_size=2, max_size=4))
def test_wait_transfer_and_straggler_equal_brute_force(ranks) -> None:
    a, b = tables(ranks)
    c = summarize(a, b, pl.DataFrame(), n_ranks=len(ranks))
    want, strag = brute(ranks)
    _, unmatched = instances(ranks)
    assert sorted((r["step"], r["channel"], r["name"], r["k"], r["present_on"], r["ambiguous_on"])
                  for r in c.incomplete.iter_rows(named=True)) == unmatched  # fmt: skip
    got = {(r["rank"], r["channel"]): r for r in c.waits.iter_rows(named=True)}
    got |= {(r["rank"], None): r for r in c.rank_totals.iter_rows(named=True)}
    assert set(got) == set(want)
    for key, w in want.items():
        assert {f: got[key][f] for f in w} == w, key
    got_s = {r["channel"]: (r["rank"], r["last_count"], r["caused_wait_ns"])
             for r in c.stragglers.iter_rows(named=True)}  # fmt: skip
    assert got_s == strag


@settings(max_examples=60, deadline=None)
@given(st.lists(rank, min_size=2, max_size=4))
def test_a_match_passed_in_gives_the_same_collectives(ranks) -> None:
    """The pipeline matches once and hands the instances to ``summarize`` (the critical path
    reuses them): the figures are those ``summarize`` finds matching by itself."""
    a, b = tables(ranks)
    if a.is_empty():
        return
    own = summarize(a, b, pl.DataFrame(), n_ranks=len(ranks))
    given = summarize(a, b, pl.DataFrame(), n_ranks=len(ranks), matched=match(a, len(ranks)))
    for field in ("waits", "rank_totals", "stragglers", "incomplete"):
        assert getattr(given, field).equals(getattr(own, field)), field
    assert given.matched == own.matched


def test_rank_total_counts_time_two_channels_share_once() -> None:
    """r0 waits in both channels over [0, 8) at once: 8 ns in all, not the channels' 16."""
    ranks = [([("ep.dispatch", "a", 0, 0, 10), ("nccl.allreduce", "n", 0, 0, 12)], [(9, 20)]),
             ([("ep.dispatch", "a", 0, 8, 10), ("nccl.allreduce", "n", 0, 8, 12)], [])]
    a, busy = tables(ranks)
    c = summarize(a, busy, pl.DataFrame(), n_ranks=2)
    assert c.waits.filter(pl.col("rank") == "r0")["wait_ns"].to_list() == [8, 8]
    total = c.rank_totals.row(0, named=True)
    assert total == {"rank": "r0", "channels": 2, "instances": 2, "wait_ns": 8,
                     "transfer_ns": 4, "exposed_wait_ns": 8, "exposed_transfer_ns": 1,
                     "imbalance_pct": pytest.approx(100 * 8 / 12)}  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.lists(rank, min_size=2, max_size=4), st.lists(st.integers(-20, 20), min_size=4,
                                                         max_size=4))  # fmt: skip
def test_align_by_ends_undoes_a_clock_offset(ranks, shifts) -> None:
    """Rank clocks shifted by constants: aligning by collective ends gives the same waits as
    ranks whose collectives end together from the start (instances ending together)."""
    together = []
    for comm, compute in ranks:
        seen: dict[tuple, int] = defaultdict(int)
        rows = []
        for ch, n, st_, s, _ in sorted(comm, key=lambda x: (x[3], x[1])):
            k = seen[(ch, n, st_)]
            seen[(ch, n, st_)] += 1
            # an instance's end is the same on every rank, and grows with k
            rows.append((ch, n, st_, s, 1000 + 100 * st_ + 20 * k + CHANNELS.index(ch)
                         + 5 * (n == "b")))  # fmt: skip
        together.append((rows, compute))
    a, b = tables(together)
    base = summarize(a, b, pl.DataFrame(), n_ranks=len(ranks))
    moved = [([(ch, n, st_, s + d, e + d) for ch, n, st_, s, e in comm],
              [(s + d, e + d) for s, e in compute]) for (comm, compute), d in
             zip(together, shifts, strict=False)]  # fmt: skip
    a2, b2 = tables(moved)
    aligned = summarize(a2, b2, pl.DataFrame(), align=True, n_ranks=len(ranks))
    if base.matched == 0:
        return
    cols = ["rank", "channel", "wait_ns", "transfer_ns"]
    want = base.waits.select(cols).sort("rank", "channel")
    assert aligned.waits.select(cols).sort("rank", "channel").equals(want)


def test_clock_offset() -> None:
    assert clock_offset(None, 5) == (0, "no session start in the file: its own clock")
    assert clock_offset(1_700_000_000 * 10**9, 12_345)[0] == 1_700_000_000 * 10**9
    assert clock_offset(1_700_000_000 * 10**9, 1_700_000_002 * 10**9)[0] == 0


def _independent(paths: list[Path]) -> dict[str, tuple[int, int]]:
    """Each file's single all-reduce kernel (start, end), read with sqlite3."""
    out = {}
    for p in paths:
        with sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True) as conn:
            (s, e, pid), = conn.execute(
                "SELECT start, end, globalPid >> 24 & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL"
            ).fetchall()  # fmt: skip
            dev = conn.execute("SELECT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        out[f"{p.name}:{pid}:{dev}"] = (s, e)
    return out


@pytest.mark.parametrize("align", [False, True])
def test_six_rank_allreduce_against_its_rows(traces: Path, align: bool) -> None:
    paths = sorted((traces / "nsys/nccl-allreduce-6ranks").glob("*.sqlite"))
    rows = _independent(paths)
    if align:  # all ranks leave the collective together: every end on the first rank's
        ref = rows[min(rows)][1]
        rows = {r: (s + ref - e, ref) for r, (s, e) in rows.items()}
    latest = max(s for s, _ in rows.values())
    run = analyze_many([str(p) for p in paths], executor=Executor(1), align=align, scope=WHOLE)
    c = run.collectives
    assert c.matched == 1 and set(c.offsets["offset_ns"]) == {0}  # epoch timestamps already
    got = {r["rank"]: r for r in c.waits.iter_rows(named=True)}
    assert set(got) == set(rows)
    for r, (s, e) in rows.items():
        assert got[r]["wait_ns"] == min(latest, e) - s
        assert got[r]["transfer_ns"] == e - min(latest, e)
    last = max(rows, key=lambda r: rows[r][0])
    assert c.stragglers["rank"].to_list() == [last]
    if align:
        assert set(got[r]["transfer_ns"] for r in got) == {e - latest for _, e in rows.values()}
        # the rank everyone waits for is the one with the least communication time
        assert last == min(rows, key=lambda r: got[r]["wait_ns"] + got[r]["transfer_ns"])


def _merged_length(spans: list[tuple[int, int]]) -> int:
    """|⋃ spans| by a sort-and-sweep merge written here, apart from IntervalSet."""
    total, end = 0, None
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def test_six_rank_json_has_one_total_row_per_rank_equal_to_the_union(traces: Path) -> None:
    """``nsysmoe analyze DIR --format json``: one ``rank_totals`` row per rank, each figure the
    union of the rank's own waits and transfers rebuilt from its kernel rows (sqlite3, an own
    merge; no compute runs, so the exposed parts are the whole)."""
    from click.testing import CliRunner

    from nsysmoe.cli import cli

    folder = traces / "nsys/nccl-allreduce-6ranks"
    out = CliRunner().invoke(cli, ["analyze", str(folder), "--jobs", "1", "--format", "json"],
                             catch_exceptions=False)  # fmt: skip
    assert out.exit_code == 0, out.output
    c = json.loads(out.output)["collectives"]
    rows = _independent(sorted(folder.glob("*.sqlite")))
    latest = max(s for s, _ in rows.values())
    totals = {r["rank"]: r for r in c["rank_totals"]}
    assert len(c["rank_totals"]) == len(totals) == 6 and set(totals) == set(rows)
    for rank, (s, e) in rows.items():
        m = min(latest, e)
        wait, transfer = _merged_length([(s, m)]), _merged_length([(m, e)])
        want = {"wait_ns": wait, "transfer_ns": transfer, "exposed_wait_ns": wait,
                "exposed_transfer_ns": transfer, "channels": 1, "instances": 1}
        assert {k: totals[rank][k] for k in want} == want, rank
    assert sum(t["wait_ns"] for t in totals.values()) == 59_481_575


def test_mostly_waiting_is_an_imbalance_verdict() -> None:
    from nsysmoe.measure.collectives import wait_verdict

    waits = pl.DataFrame({"channel": ["ep.dispatch", "ep.dispatch"], "exposed_wait_ns": [90, 0],
                          "exposed_transfer_ns": [10, 10]})  # fmt: skip
    named = pl.DataFrame({"rank": ["r1"]})
    v = wait_verdict(waits, named)
    assert v["exposed_wait_pct"] == pytest.approx(900 / 11)
    assert any("load-balancing-type" in k for k in v["knobs"])
    assert any("r1" in k for k in v["knobs"])
    dp = wait_verdict(waits.with_columns(pl.lit("nccl.allreduce").alias("channel")), named)
    assert not any("moe" in k for k in dp["knobs"]) and dp["knobs"]
    transfer = wait_verdict(waits.with_columns(pl.lit(1).alias("exposed_wait_ns")), named)
    assert transfer["knobs"] == ()


def test_instances_some_ranks_lack_are_named_not_matched() -> None:
    """r1 lacks one of r0's two ``a`` launches: with a ``b`` between them (every rank has it), r1's
    ``a`` is the first instance and the second is named; without one, which instance r1's ``a``
    is cannot be told, and neither is matched (r1 ambiguous)."""
    b = [("ep.dispatch", "b", 0, 12, 15)]
    ranks = [([("ep.dispatch", "a", 0, 0, 10), ("ep.dispatch", "a", 0, 20, 30), *b], []),
             ([("ep.dispatch", "a", 0, 5, 10), *b], [])]  # fmt: skip
    a, busy = tables(ranks)
    c = summarize(a, busy, pl.DataFrame(), n_ranks=2)
    assert c.matched == 2
    (row,) = c.incomplete.iter_rows(named=True)
    assert (row["name"], row["k"], row["present_on"], row["ambiguous_on"]) == ("a", 1, ["r0"], [])
    assert c.waits.filter(pl.col("rank") == "r0")["wait_ns"].sum() == 5  # [0, 5) for r1's a
    a, busy = tables([([x for x in comm if x[1] == "a"], []) for comm, _ in ranks])
    c = summarize(a, busy, pl.DataFrame(), n_ranks=2)
    assert c.matched == 0 and c.waits.is_empty()
    assert [(r["k"], r["present_on"], r["ambiguous_on"]) for r in c.incomplete.iter_rows(
        named=True)] == [(0, ["r0"], ["r1"]), (1, ["r0"], ["r1"])]  # fmt: skip



def test_two_instances_different_ranks_lack_may_share_a_launch_number() -> None:
    """Around the ``b`` every rank has: r0's only ``a`` runs after it, r1's and r2's two before
    it. The block before ``b`` is r2's launches 0-1 (r1 ambiguous), the one after is r0's
    launch 0: two instances numbered 0, two rows (the brute force's oracle is a list for this;
    as a dict it kept one of them, and the comparison failed as hypothesis found such cases)."""
    b = [("ep.dispatch", "b", 0, 10, 15)]
    ranks = [([("ep.dispatch", "a", 0, 20, 25), *b], []),
             ([("ep.dispatch", "a", 0, 0, 5), *b], []),
             ([("ep.dispatch", "a", 0, 0, 3), ("ep.dispatch", "a", 0, 4, 8), *b], [])]  # fmt: skip
    a, busy = tables(ranks)
    c = summarize(a, busy, pl.DataFrame(), n_ranks=3)
    assert sorted((r["k"], r["present_on"], r["ambiguous_on"]) for r in c.incomplete.iter_rows(
        named=True)) == [(0, ["r0"], []), (0, ["r2"], ["r1"]), (1, ["r2"], ["r1"])]  # fmt: skip
    assert c.matched == 1  # b
    # in a fixed order, ties in k by place in the iteration (group_by's order is not fixed)
    for _ in range(20):
        again = summarize(a, busy, pl.DataFrame(), n_ranks=3).incomplete
        assert [(r["k"], r["present_on"]) for r in again.iter_rows(named=True)] == [
            (0, ["r2"]), (0, ["r0"]), (1, ["r2"])]  # fmt: skip
    assert sorted(instances(ranks)[1]) == sorted(
        (0, "ep.dispatch", "a", r["k"], r["present_on"], r["ambiguous_on"])
        for r in c.incomplete.iter_rows(named=True))  # fmt: skip

NAMES = (("ep.dispatch", "d"), ("ep.combine", "c"), ("ep.dispatch", "e"))


@st.composite
def lockstep(draw):
    """A run whose collectives are blocking: each instance's kernels on every rank cover
    [max start, min end), a nonempty span (no rank leaves before the last arrives); launches of
    one name run one after another on each rank, different names overlap freely. Then some
    launches are deleted on ranks 1.. (rank 0 keeps all). Returns (ranks rows as
    :func:`tables` takes them, {(rank, name, start): instance id}, deleted (rank, id) pairs,
    per instance (step, channel, name, k))."""
    n = draw(st.integers(2, 4))
    program = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(1, 20)),
                            min_size=1, max_size=24))  # fmt: skip
    free = {name: 0 for _, name in NAMES}  # when each name's last instance ended on every rank
    t, seen = 0, defaultdict(int)
    rows: list[list] = [[] for _ in range(n)]
    truth, key = {}, []
    for i, (which, advance, transfer) in enumerate(program):
        ch, name = NAMES[which]
        step = 0 if i < len(program) // 2 else 1
        t += advance
        last = max(t, free[name] + 11)
        waits = draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))
        extra = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
        for r in range(n):
            s, e = last - waits[r], last + transfer + extra[r]
            rows[r].append((ch, name, step, s, e))
            truth[(r, name, s)] = i
        free[name] = last + transfer + max(extra)
        key.append((step, ch, name, seen[(step, name)]))
        seen[(step, name)] += 1
    gone = draw(st.sets(st.tuples(st.integers(1, n - 1), st.integers(0, len(program) - 1))))
    kept = [[x for x in rows[r] if (r, truth[(r, x[1], x[3])]) not in gone] for r in range(n)]
    return [(k, []) for k in kept], truth, gone, key


@settings(max_examples=300, deadline=None)
@given(lockstep())
def test_launches_deleted_from_a_lockstep_run_are_never_matched_wrongly(case) -> None:
    """Every matched instance is one true instance on every rank; every instance of a group no
    launch was deleted from is matched; each instance is either matched or named (by its true
    launch number), and where the rank that lacks it is known, the ranks that have it are
    named."""
    ranks, truth, gone, key = case
    n = len(ranks)
    a, busy = tables(ranks)
    rows, missing = match(a, n)
    ids = {}
    for r in rows.iter_rows(named=True):
        ids.setdefault((r["step"], r["channel"], r["name"], r["k"]), set()).add(
            truth[(int(r["rank"][1:]), r["name"], r["start"])])
    assert all(len(v) == 1 for v in ids.values())  # one true instance per match
    matched = {next(iter(v)) for v in ids.values()}
    assert rows.group_by("step", "channel", "name", "k").len()["len"].to_list() == [n] * len(ids)
    hit = {key[i][:3] for _, i in gone}
    assert {i for i, k in enumerate(key) if k[:3] not in hit} <= matched
    assert not matched & {i for _, i in gone}
    named = {(r["step"], r["channel"], r["name"], r["k"]): r for r in missing.iter_rows(
        named=True)}  # fmt: skip
    assert set(named) == {k for i, k in enumerate(key) if i not in matched}
    for i, k in enumerate(key):
        if k in named and not named[k]["ambiguous_on"]:
            assert named[k]["present_on"] == [f"r{r}" for r in range(n) if (r, i) not in gone]
