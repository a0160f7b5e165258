"""One plan per request (issue 32, point 4): the arguments mean one mode, a value of its own,
which checks the options it refuses once; the CLI is wiring, and stays short."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysmoe import cli, request
from nsysmoe.errors import UsageError
from nsysmoe.model import Iterations, Whole, Window
from nsysmoe.options import Options
from nsysmoe.request import Compat, Pair, Ranks, RanksPair, Single, make_window, mode_of


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Empty stand-ins: the mode is decided by paths, before anything is read."""
    for side in ("off", "on"):
        (tmp_path / side).mkdir()
        for r in range(2):
            (tmp_path / side / f"rank{r}.sqlite").write_bytes(b"")
    (tmp_path / "one.sqlite").write_bytes(b"")
    (tmp_path / "two.sqlite").write_bytes(b"")
    return {k: str(tmp_path / k) for k in ("off", "on", "one.sqlite", "two.sqlite")}


def test_the_arguments_mean_one_mode(files: dict[str, str]) -> None:
    one, two, off, on = files["one.sqlite"], files["two.sqlite"], files["off"], files["on"]
    ranks = (f"{off}/rank0.sqlite", f"{off}/rank1.sqlite")
    assert mode_of(Options((one,)), []) == Single(one)
    assert mode_of(Options((one, two)), []) == Pair(one, two)
    assert mode_of(Options((off,)), []) == Ranks(ranks)
    assert mode_of(Options((off, on)), []) == RanksPair(ranks, (f"{on}/rank0.sqlite",
                                                                f"{on}/rank1.sqlite"))
    assert mode_of(Options((one, two, *ranks)), []) == Ranks((one, two, *ranks))
    assert mode_of(Options((one, off), compat="hta"), []) == Compat((one, *ranks), "hta")


def test_each_mode_checks_its_own_options() -> None:
    Single("a").check(Options(("a",), rank=1, align="collectives"))
    Pair("a", "b").check(Options(("a", "b"), rank=1, strict=True))
    for many in (Ranks(("a", "b")), RanksPair(("a", "b"), ("c", "d"))):
        with pytest.raises(UsageError, match="--rank 1 selects a process of one export"):
            many.check(Options(("a",), rank=1))
    with pytest.raises(UsageError, match="drop --fail-if, --strict, --window/--skip/--step-range"):
        Compat(("a",), "hta").check(Options(("a",), fail_if=("x<1",), strict=True, skip=2))
    with pytest.raises(UsageError, match="unknown tool"):
        Compat(("a",), "nsight").check(Options(("a",)))


def test_the_cli_is_wiring() -> None:
    """The options pass once, into one value; the policy is not the CLI's."""
    source = Path(cli.__file__).read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 200
    assert "def analyze(**options" in source and "Options(**options)" in source
    assert hasattr(request, "execute")


@pytest.mark.parametrize(("args", "given"), [
    (dict(skip=2), "--skip"), (dict(window=Iterations(3, 5, skip=0, required=True)), "--window"),
    (dict(window=Window(0, 10**9)), "--window"),
])  # fmt: skip
def test_whole_trace_refuses_a_part_of_it(args: dict, given: str) -> None:
    """--whole-trace with --skip or --window asked for two windows (it measured the iterations,
    silently); --step-range only names the iterations of the whole trace."""
    with pytest.raises(UsageError, match=f"--whole-trace measures the whole trace; {given}"):
        make_window(args.get("window"), args.get("skip"), None, whole=True)
    assert make_window(None, None, r"step (\d+)", whole=True) == Whole()
    assert make_window(None, None, None, whole=True) == Whole()
