"""The fuzz suite: hundreds of hostile inputs and command lines, each held to nsysmoe's promises
(tests/fuzz/harness.py): a known exit code, one stderr line per user error, no traceback, no
internal error, no hang, inputs unchanged, and right numbers where a result comes out."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsysmoe import api
from nsysmoe.errors import NsysmoeError
from nsysmoe.io import load_trace
from nsysmoe.model import STEADY
from tests.fixtures.generate import moe_step_scenario, write_export
from tests.fixtures.kineto_writer import write_kineto
from tests.fuzz import kineto_cases, option_cases, sqlite_cases
from tests.fuzz.harness import Case, hold

SQLITE_MUTATIONS = sqlite_cases.mutations()
KINETO_MUTATIONS = kineto_cases.mutations()
#: mutations also tried on the oldest and newest schema (the structural ones)
OTHER_SCHEMAS = ("2.9.1", "3.28.1")
STRUCTURAL = [k for k in SQLITE_MUTATIONS if k.startswith(("drop-", "empty-", "kernel-null",
                                                            "truncate-"))]  # fmt: skip
#: rows these mutations make invalid are dropped and counted: the result must equal the
#: analysis of a copy with those rows deleted
DROPPED_ROWS = {
    "kernel-null-start": "start IS NULL",
    "kernel-null-end": '"end" IS NULL',
    "kernel-inverted": '"end" < start',
    "kernel-negative": "start < 0",
}


@pytest.fixture(scope="session")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fuzz-bases")
    on, _ = moe_step_scenario(dispatcher="hybridep", overlap=True, steps=3, seed=7)
    off, _ = moe_step_scenario(dispatcher="hybridep", overlap=False, steps=3, seed=7)
    out = {"good": write_export(d / "good.sqlite", on, "3.13.2"),
           "other": write_export(d / "other.sqlite", off, "3.13.2"),
           "kineto": write_kineto(d / "good.pt.trace.json", on)}  # fmt: skip
    for ddl in OTHER_SCHEMAS:
        out[ddl] = write_export(d / f"good-{ddl}.sqlite", on, ddl)
    out["3.13.2"] = out["good"]
    for p in list(out.values()):
        p.chmod(0o444)  # read-only: a write would fail loudly, not only change a digest
    return out


def _sqlite_case(name: str, base: Path, tmp: Path) -> tuple[Path, Case]:
    path = sqlite_cases.copy_base(base, tmp / "case.sqlite")
    try:
        SQLITE_MUTATIONS[name](path)
    except sqlite3.OperationalError as exc:  # the column or table is not in this schema
        pytest.skip(f"{name} does not apply to {base.name}: {exc}")
    check = None
    if name in DROPPED_ROWS:
        clean = sqlite_cases.copy_base(path, tmp / "clean.sqlite")
        sqlite_cases._sql(f"DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE {DROPPED_ROWS[name]}")(
            clean)
        want = api.analyze(clean, scope=STEADY).gpus.select(  # the CLI default scope
            "comm_ns", "hidden_ns", "kernels").to_dicts()

        def check(out: str, want: list = want) -> None:  # noqa: B006 - bound per case
            got = json.loads(out)["traces"][0]["gpus"]
            assert [{k: g[k] for k in ("comm_ns", "hidden_ns", "kernels")} for g in got] == want
    args = ("analyze", str(path), "--format", "json")
    return path, Case(name, args, (path,), check=check)


@pytest.mark.parametrize("name", list(SQLITE_MUTATIONS))
def test_hostile_sqlite(name: str, bases: dict[str, Path], tmp_path: Path) -> None:
    _, case = _sqlite_case(name, bases["3.13.2"], tmp_path)
    hold(case)


@pytest.mark.parametrize("ddl", OTHER_SCHEMAS)
@pytest.mark.parametrize("name", STRUCTURAL)
def test_hostile_sqlite_other_schemas(name: str, ddl: str, bases, tmp_path: Path) -> None:  # noqa: ANN001
    _, case = _sqlite_case(name, bases[ddl], tmp_path)
    hold(case)


@pytest.mark.parametrize("name", list(KINETO_MUTATIONS))
def test_hostile_kineto(name: str, bases: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "case.pt.trace.json"
    path.write_bytes(KINETO_MUTATIONS[name](bases["kineto"].read_bytes()))
    hold(Case(name, ("analyze", str(path), "--format", "json"), (path,)))


@pytest.mark.parametrize("size", [8 << 20, 64 << 20])
def test_gzip_bomb_is_refused_with_the_limit(size: int, tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(kineto_cases.bomb(size))
    env = (("NSYSMOE_MAX_JSON_BYTES", str(4 << 20)),)
    hold(Case("bomb", ("analyze", str(path)), (path,), frozenset({2}), env,
              expect_error=r"NSYSMOE_MAX_JSON_BYTES"))  # fmt: skip


@pytest.fixture(scope="module")
def option_env(bases: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("fuzz-options")
    (tmp / "emptydir").mkdir()
    bracket = tmp / "x[1].sqlite"
    shutil.copyfile(bases["good"], bracket)
    dash = tmp / "-dash.sqlite"
    shutil.copyfile(bases["good"], dash)
    return {"good": str(bases["good"]), "other": str(bases["other"]), "tmp": str(tmp),
            "bracket": str(bracket), "dash": str(dash), **option_cases.rule_files(tmp)}  # fmt: skip


@pytest.mark.parametrize(("name", "args", "codes"), option_cases.OPTIONS,
                         ids=[o[0] for o in option_cases.OPTIONS])  # fmt: skip
def test_hostile_options(name: str, args: tuple[str, ...], codes: frozenset[int],
                         option_env: dict[str, str], bases: dict[str, Path]) -> None:  # fmt: skip
    filled = tuple(a.format(**option_env) for a in args)
    if name == "dash-name":
        filled = ("analyze", "--", option_env["dash"])
    inputs = (bases["good"], bases["other"], Path(option_env["bracket"]), Path(option_env["dash"]))
    # worker processes and clusters are not forked from inside the test process
    apart = any(a in ("--jobs", "--dask") for a in filled) or name.startswith("three")
    quick = (("NSYSMOE_DASK_TIMEOUT", "1"),)  # an unreachable scheduler: said after 1 s, not 10
    hold(Case(name, filled, inputs, codes, quick, subprocess=apart))


# --- hypothesis: random small inputs straight into the readers --------------------------------

EVENT = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "i", "M", "B", None, 3]),
    "cat": st.sampled_from(["kernel", "gpu_memcpy", "cuda_runtime", "user_annotation", "cpu_op",
                            "gpu_user_annotation", None, 1]),
    "name": st.one_of(st.text(max_size=30), st.integers(), st.none()),
    "pid": st.one_of(st.integers(-2**70, 2**70), st.text(max_size=3)),
    "tid": st.one_of(st.integers(-5, 2**40), st.none()),
    "ts": st.one_of(st.integers(-2**66, 2**66), st.floats(allow_nan=True), st.text(max_size=8)),
    "dur": st.one_of(st.integers(-10, 2**40), st.floats(), st.none()),
    "args": st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["device", "stream", "correlation", "bytes"]),
        st.one_of(st.integers(-2**70, 2**70), st.text(max_size=3), st.none()), max_size=4)),
})  # fmt: skip


FUZZ = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture]}


@settings(max_examples=60, **FUZZ)
@given(events=st.lists(EVENT, max_size=25), rank=st.one_of(st.none(), st.integers(-3, 2**70)),
       gz=st.booleans())  # fmt: skip
def test_kineto_reader_on_random_events(events: list, rank: object, gz: bool,
                                        tmp_path: Path) -> None:  # fmt: skip
    doc = {"schemaVersion": 1, "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank}
    data = json.dumps(doc).encode()
    path = tmp_path / "random.json"
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    _read_or_refuse(path)


@settings(max_examples=40, **FUZZ)
@given(flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), max_size=12),
       cut=st.one_of(st.none(), st.floats(0, 1)))  # fmt: skip
def test_sqlite_reader_on_random_damage(flips: list, cut: float | None, bases: dict[str, Path],
                                        tmp_path: Path) -> None:  # fmt: skip
    data = bytearray(bases["good"].read_bytes())
    for offset, value in flips:
        data[100 + offset % (len(data) - 100)] = value
    if cut is not None:
        data = data[: int(len(data) * cut)]
    path = tmp_path / "random.sqlite"
    path.write_bytes(bytes(data))
    _read_or_refuse(path)


def _read_or_refuse(path: Path) -> None:
    """A Trace whose GPU rows are valid intervals, or a one-line NsysmoeError; nothing else."""
    try:
        trace = load_trace(path)
    except NsysmoeError as exc:
        assert "\n" not in str(exc)
        return
    for table in (trace.kernels, trace.memops):
        assert table["start"].null_count() == 0 and table["end"].null_count() == 0
        assert bool((table["end"] >= table["start"]).all())
