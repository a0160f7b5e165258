"""Round three of hostile inputs, phantom collective waits (issue 31, point 6): three copies of the
shipped overlap-on export as three ranks, one of them with communication kernels deleted. The
k-th-launch matching shifted every later launch of that kernel by one and called the shift a
wait (one dispatch kernel of iteration 4 deleted: 5.87 ms of ``ep.dispatch`` wait on r0 and r1,
exposed_wait_pct 2.33; five: 10.10 ms, 4.02). Identical copies cannot wait for one another: with
the right instances matched every wait is 0, whatever is deleted.

Every number is held to an independent reading of the copies' rows with sqlite3: an instance is
a (kernel name, start) all three copies hold (the copies are identical, so the same launch has
the same start on every rank), its transfer the union of those kernels, the exposed part that
union minus the file's other kernels. Whatever cannot be told apart (a rank lacks one of several
launches between the same neighbouring collectives, or there are no neighbours at all) is left
unmatched and named, never guessed. Every case edits a private copy of the shipped example."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.model import WHOLE
from nsysmoe.parallel import Executor
from tests.fuzz.harness import Case, hold

ON = api.example_paths("nsys")[1]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
#: the export's communication kernels and their channels (read here, not from the rules)
CHANNELS = {"hybrid_ep::dispatch_kernel": "ep.dispatch", "hybrid_ep::combine_kernel": "ep.combine",
            "ncclDevKernel_AllReduce": "nccl.allreduce"}  # fmt: skip
ITERATION_4 = (489_160_875, 585_065_829)  # the export's NVTX "iteration 4" (ns, its own clock)
WAITS = ("wait_ns", "exposed_wait_ns")
FIELDS = ("instances", "wait_ns", "transfer_ns", "exposed_wait_ns", "exposed_transfer_ns")


def copies(d: Path, nvtx: bool = True) -> list[Path]:
    """Three writable copies of the shipped export as ranks r0..r2 (NVTX rows emptied: no
    iterations, nothing for any matching to lean on but the kernels)."""
    d.mkdir()
    out = []
    for r in range(3):
        p = d / f"r{r}.sqlite"
        shutil.copyfile(ON, p)
        p.chmod(0o644)
        if not nvtx:
            with sqlite3.connect(p) as con:
                con.execute("DELETE FROM NVTX_EVENTS")
        out.append(p)
    return out


def comm_rows(path: Path) -> list[tuple[str, int, int]]:
    """(demangled name, start, end) of every communication kernel, by start."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute(f"SELECT s.value, k.start, k.end FROM {KERNEL} k JOIN StringIds s ON "
                           "s.id = k.demangledName ORDER BY k.start").fetchall()  # fmt: skip
    return [r for r in rows if channel_of(r[0])]


def compute_rows(path: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute(f"SELECT s.value, k.start, k.end FROM {KERNEL} k JOIN StringIds s ON "
                           "s.id = k.demangledName").fetchall()  # fmt: skip
    return [(s, e) for n, s, e in rows if not channel_of(n)]


def channel_of(name: str) -> str | None:
    return next((ch for part, ch in CHANNELS.items() if part in name), None)


def label(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        ((pid, device),) = set(con.execute(f"SELECT globalPid >> 24 & 16777215, deviceId FROM "
                                           f"{KERNEL}").fetchall())  # fmt: skip
    return f"{path.name}:{pid}:{device}"


def delete(path: Path, starts: list[int]) -> None:
    """Delete the communication kernels starting at ``starts`` (one each) from a copy."""
    with sqlite3.connect(path) as con:
        for s in starts:
            assert con.execute(f"DELETE FROM {KERNEL} WHERE start = ? AND rowid IN (SELECT k.rowid "
                               f"FROM {KERNEL} k JOIN StringIds n ON n.id = k.demangledName WHERE "
                               "n.value LIKE '%hybrid_ep::%' OR n.value LIKE '%ncclDevKernel%')",
                               (s,)).rowcount == 1  # fmt: skip


def covered(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open spans as sorted disjoint spans."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        elif s < e:
            out.append((s, e))
    return out


def outside(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> int:
    """|⋃ spans \\ ⋃ cut|, by walking both sorted unions."""
    total, holes = 0, covered(cut)
    for s, e in covered(spans):
        total += e - s
        for a, b in holes:
            if a < e and b > s:
                total -= min(b, e) - max(a, s)
    return total


def oracle(paths: list[Path], unresolved: set[tuple[str, int]] = frozenset()) -> dict:
    """Per (rank, channel), what matching every instance all copies hold (but ``unresolved``)
    gives: no wait, the transfer the union of those kernels."""
    held = [{(n, s): e for n, s, e in comm_rows(p)} for p in paths]
    every = set(held[0]).intersection(*held[1:]) - set(unresolved)
    out = {}
    for p, rows in zip(paths, held, strict=True):
        compute = compute_rows(p)
        for ch in set(CHANNELS.values()):
            spans = [(s, rows[(n, s)]) for n, s in every if channel_of(n) == ch]
            if spans:
                out[(label(p), ch)] = {"instances": len(spans), "wait_ns": 0,
                                       "transfer_ns": outside(spans, []), "exposed_wait_ns": 0,
                                       "exposed_transfer_ns": outside(spans, compute)}  # fmt: skip
    return out


def waits_of(c) -> dict:
    return {(r["rank"], r["channel"]): {f: r[f] for f in FIELDS} for r in c.waits.iter_rows(
        named=True)}  # fmt: skip


def starts_of(run, incomplete) -> dict[tuple[str, int], tuple[list[str], list[str]]]:
    """Each unmatched instance as (name, its start on r0: r0's launch k of that name in that
    iteration, read from r0's own arrivals) -> (present_on, ambiguous_on)."""
    arr = {(r["step"], r["name"], r["k"]): r["start"]
           for r in run.analyses[0].arrivals.iter_rows(named=True)}  # fmt: skip
    return {(r["name"], arr[(r["step"], r["name"], r["k"])]): (r["present_on"], r["ambiguous_on"])
            for r in incomplete.iter_rows(named=True)}  # fmt: skip


def analyze(paths: list[Path]):
    return api.analyze_many([str(p) for p in paths], executor=Executor(1), scope=WHOLE)


def dispatches_of_iteration_4(path: Path) -> list[int]:
    lo, hi = ITERATION_4
    return [s for n, s, _ in comm_rows(path) if "dispatch_kernel" in n and lo <= s < hi]


@pytest.fixture(scope="module")
def same(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three identical copies: what the copies with kernels deleted must equal (no wait)."""
    run = analyze(copies(tmp_path_factory.mktemp("waits") / "same"))
    assert run.collectives.matched == 392 and run.collectives.incomplete.is_empty()
    return waits_of(run.collectives)


@pytest.mark.parametrize("deleted", [1, 5])
def test_deleted_dispatch_kernels_make_no_phantom_wait(tmp_path: Path, same: dict,
                                                       deleted: int) -> None:  # fmt: skip
    """The first 1 or 5 dispatch kernels of iteration 4 gone from r2: every wait as with three
    identical copies (0), the instances r2 lacks named with the ranks that have them."""
    paths = copies(tmp_path / "run")
    gone = dispatches_of_iteration_4(paths[2])[:deleted]
    delete(paths[2], gone)
    run = analyze(paths)
    c = run.collectives
    got = waits_of(c)
    assert got == oracle(paths)
    assert {k: {f: v[f] for f in WAITS} for k, v in got.items()} == \
        {k: {f: v[f] for f in WAITS} for k, v in same.items()}  # fmt: skip
    assert c.exposed_wait_pct == 0.0 and c.stragglers.is_empty()
    assert c.matched == 392 - deleted
    names = {s: n for n, s, _ in comm_rows(paths[0])}
    ranks = [label(p) for p in paths]
    assert starts_of(run, c.incomplete) == {(names[s], s): (ranks[:2], []) for s in gone}


def test_without_nvtx_a_missing_kernel_is_placed_by_its_neighbours(tmp_path: Path) -> None:
    """No iteration ranges: the whole trace is one iteration, 192 launches of each dispatch
    kernel; one gone from r2 still shifts nothing (its neighbours place it)."""
    paths = copies(tmp_path / "run", nvtx=False)
    gone = dispatches_of_iteration_4(paths[2])[:1]
    delete(paths[2], gone)
    run = analyze(paths)
    c = run.collectives
    assert waits_of(c) == oracle(paths)
    assert c.matched == 391 and c.exposed_wait_pct == 0.0
    names = {s: n for n, s, _ in comm_rows(paths[0])}
    ranks = [label(p) for p in paths]
    assert starts_of(run, c.incomplete) == {(names[gone[0]], gone[0]): (ranks[:2], [])}


def test_without_nvtx_a_launch_that_cannot_be_told_apart_is_left_unmatched(
        tmp_path: Path) -> None:  # fmt: skip
    """Two combine kernels back to back (no other collective between them) and r2 lacks the
    second: which of its neighbours' pair r2 has is not in the data. Both instances are left
    unmatched and named (present on r0, r1; r2 ambiguous), the rest matched right."""
    paths = copies(tmp_path / "run", nvtx=False)
    rows = comm_rows(paths[2])
    pairs = [i for i in range(1, len(rows)) if "combine" in rows[i][0] and "combine" in
             rows[i - 1][0]]  # fmt: skip
    first, second = rows[pairs[3] - 1], rows[pairs[3]]
    delete(paths[2], [second[1]])
    run = analyze(paths)
    c = run.collectives
    both = {(first[0], first[1]), (second[0], second[1])}
    assert waits_of(c) == oracle(paths, unresolved=both)
    assert c.matched == 390 and c.exposed_wait_pct == 0.0
    ranks = [label(p) for p in paths]
    assert starts_of(run, c.incomplete) == {key: (ranks[:2], ranks[2:]) for key in both}
    text = api.render(run, "terminal")
    assert "2 collective instances are not matched" in text
    assert f"2 of them where {ranks[2]} had some but not all" in " ".join(text.split())


def test_without_neighbours_nothing_is_matched_and_all_is_counted(tmp_path: Path) -> None:
    """r2 lacks one launch of every communication kernel and there are no iterations: no kernel
    has neighbours every rank shares, so nothing is matched (no wait, no straggler), and every
    instance is named: r0 and r1 hold all, r2 some."""
    paths = copies(tmp_path / "run", nvtx=False)
    firsts: dict[str, int] = {}
    for n, s, _ in comm_rows(paths[2]):
        firsts.setdefault(n, s)
    assert len(firsts) == 4
    delete(paths[2], list(firsts.values()))
    run = analyze(paths)
    c = run.collectives
    assert c.matched == 0 and c.waits.is_empty() and c.exposed_wait_pct is None
    ranks = [label(p) for p in paths]
    every = {(n, s) for n, s, _ in comm_rows(paths[0])}
    assert starts_of(run, c.incomplete) == {key: (ranks[:2], ranks[2:]) for key in every}
    text = " ".join(api.render(run, "terminal").split())
    assert "392 collective instances are not matched" in text


def test_iterations_on_some_copies_only_match_nothing_across_them(tmp_path: Path) -> None:
    """NVTX emptied on r2 alone: its launches lie in no iteration, those of r0 and r1 in theirs;
    no launch is matched across that difference, and all are named."""
    paths = copies(tmp_path / "run")
    with sqlite3.connect(paths[2]) as con:
        con.execute("DELETE FROM NVTX_EVENTS")
    delete(paths[2], dispatches_of_iteration_4(paths[2])[:1])
    c = analyze(paths).collectives
    assert c.matched == 0 and c.waits.is_empty()
    ranks = [label(p) for p in paths]
    on = c.incomplete.group_by("present_on").len().sort("len")
    assert on.rows() == [(ranks[2:], 391), (ranks[:2], 392)]
    assert c.incomplete["ambiguous_on"].list.len().max() == 0


def test_the_command_line_reports_no_phantom_wait(tmp_path: Path) -> None:
    """The issue's command: ``nsysmoe analyze 'DIR/*.sqlite' --format json`` (the steady
    iterations) with one dispatch kernel of iteration 4 gone from r2 gives the waits of three
    identical copies and names the instance."""
    same, run = copies(tmp_path / "same"), copies(tmp_path / "run")
    delete(run[2], dispatches_of_iteration_4(run[2])[:1])
    out = {}
    for name, paths in (("same", same), ("run", run)):
        args = ("analyze", f"{paths[0].parent}/*.sqlite", "--format", "json", "--jobs", "1")
        got = hold(Case(name, args, inputs=tuple(paths), codes=frozenset({0})))
        out[name] = json.loads(got.out)["collectives"]
    assert out["same"]["incomplete"] == [] and out["same"]["exposed_wait_pct"] == 0.0
    waits = {name: {(r["rank"], r["channel"]): [r[f] for f in WAITS] for r in c["waits"]}
             for name, c in out.items()}  # fmt: skip
    assert waits["run"] == waits["same"] and out["run"]["exposed_wait_pct"] == 0.0
    assert out["run"]["matched_instances"] == out["same"]["matched_instances"] - 1
    ((row),) = out["run"]["incomplete"]
    assert (row["step"], row["k"], row["ambiguous_on"]) == (4, 0, [])
    assert row["present_on"] == [label(p) for p in run[:2]]
    assert "hybrid_ep::dispatch_kernel" in row["name"]
