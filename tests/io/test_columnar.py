"""Parquet and Arrow export folders read as the SQLite export of the same report (issue 37).

Held two ways: the real exports of one report by two nsys versions (``shared/traces``: SQLite by
nsys 2022.4, Parquet and Arrow by nsys 2023.4), compared over the whole analysis JSON; and every
shipped example and fixture export written again as nsys's columnar exports
(:mod:`tests.fixtures.columnar`, real 2023.4 column types), compared table by table.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from nsysmoe import api
from nsysmoe.io import load_trace, nsys_db
from nsysmoe.io.export_tables import parse_where
from nsysmoe.model import Trace
from tests.conftest import REPO, require_shared
from tests.fixtures.columnar import DIR_SUFFIX, to_columnar

EXAMPLES = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))
#: what says where a trace came from (path, format, the exporter's versions): the rest is equal
SOURCE_FIELDS = {"path", "format", "product_version", "schema_version"}
TRACE_SOURCE = {"path", "source_format", "product_version", "schema_version"}
NERSC = ("nersc-ddp-4gpu-baseline", "nersc-ddp-4gpu-bucketcap100mb")
#: nsys 2022.4 wrote three TARGET_INFO_SYSTEM_ENV values (GpuInfo, …) as protobuf bytes, one of
#: them not UTF-8; nsys 2023.4 writes them as JSON text. The exporter's, not the reader's.
SQLITE_ONLY_WARNING = "1 strings with invalid UTF-8 bytes shown with U+FFFD"


def analysis_json(*paths: Path | str) -> dict[str, Any]:
    args = [sys.executable, "-m", "nsysmoe", "analyze", *map(str, paths), "--format", "json"]
    out = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def flat(doc: Any, at: str = "") -> dict[str, Any]:
    if isinstance(doc, dict):
        return {k: v for key, val in doc.items() for k, v in flat(val, f"{at}.{key}").items()}
    if isinstance(doc, list):
        return {k: v for i, val in enumerate(doc) for k, v in flat(val, f"{at}[{i}]").items()}
    return {at: doc}


def differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    fa, fb = flat(a), flat(b)
    return {k: (fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if fa.get(k, "<absent>") != fb.get(k, "<absent>")}  # fmt: skip


def assert_same_trace(a: Trace, b: Trace, what: str, skip: set[str] = TRACE_SOURCE) -> None:
    for field in dataclasses.fields(Trace):
        if field.name in skip:
            continue
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pl.DataFrame):
            assert x.schema == y.schema and x.equals(y), f"{what}: {field.name}"
        else:
            assert x == y, f"{what}: {field.name}: {x!r} != {y!r}"


# -- real exports of one report by two nsys versions ------------------------------------------


#: the real columnar exports (shared/traces/nsys-2023/export): Arrow of the baseline only
REAL = [(NERSC[0], "pqtdir"), (NERSC[0], "arwdir"), (NERSC[1], "pqtdir")]


@pytest.mark.parametrize(("name", "kind"), REAL)
def test_real_columnar_export_analyses_as_the_sqlite(name: str, kind: str) -> None:
    folder = require_shared() / "nsys-2023" / "export" / f"{name}_{kind}"
    sqlite = require_shared() / "nsys" / f"{name}.sqlite"
    got, want = analysis_json(folder), analysis_json(sqlite)
    diff = differences(got, want)
    source = {k: v for k, v in diff.items() if k.rsplit(".", 1)[-1] in SOURCE_FIELDS}
    assert source[".traces[0].format"] == (
        "nsys-parquet" if kind == "pqtdir" else "nsys-arrow", "nsys-sqlite")
    assert source[".traces[0].product_version"] == ("2023.4.4.54", "2022.4.2.1")
    rest = {k: v for k, v in diff.items() if k not in source}
    assert rest == {".traces[0].warnings[0]": (None, SQLITE_ONLY_WARNING)}


def test_real_parquet_whole_capture_gives_the_published_figure() -> None:
    """The baseline's communication union over the whole capture (PROVENANCE.md): 156.900460
    ms, 86.4927 % hidden, from the Parquet export as from nsys 2022.4's SQLite."""
    folder = require_shared() / "nsys-2023" / "export" / "nersc-ddp-4gpu-baseline_pqtdir"
    out = subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", str(folder), "--window",
                          "0:+1000s", "--format", "json"], capture_output=True, text=True,
                         cwd=REPO, check=True)  # fmt: skip
    (gpu,) = json.loads(out.stdout)["traces"][0]["gpus"]
    assert gpu["comm_ns"] == 156_900_460
    assert round(gpu["hidden_pct"], 4) == 86.4927


@pytest.mark.parametrize("name", NERSC)
def test_real_parquet_trace_is_the_sqlite_trace(name: str) -> None:
    """Table by table: every measured table equal (the launch too: the environment split the
    way nsys 2022.4's NUL-separated export has it)."""
    folder = require_shared() / "nsys-2023" / "export" / f"{name}_pqtdir"
    a, b = load_trace(folder), load_trace(require_shared() / "nsys" / f"{name}.sqlite")
    assert a.source_format == "nsys-parquet"
    assert a.launch.environment == b.launch.environment
    assert_same_trace(a, b, name, TRACE_SOURCE | {"launch", "warnings"})


def test_recipe_cache_gives_the_same_gpu_figures_and_names_what_it_lacks() -> None:
    """The partial Parquet export ``nsys recipe`` left beside a report (6 tables): every figure
    of the SQLite export of the same report but the GPU's name, and each missing table named
    with what it costs."""
    cache = require_shared() / "nsys-2023" / "recipe-cache" / "nersc-ddp-4gpu-bucketcap100mb_pqtdir"
    got = analysis_json(cache)
    want = analysis_json(require_shared() / "nsys" / "nersc-ddp-4gpu-bucketcap100mb.sqlite")
    diff = differences(got, want)
    assert diff.pop(".traces[0].gpus[0].gpu_name") == (None, "A100-SXM4-40GB")
    for key in (".traces[0].totals", ".traces[0].channels", ".traces[0].iterations",
                ".traces[0].idle", ".traces[0].wall"):  # fmt: skip
        assert not [k for k in diff if k.startswith(key)], key
    lacks = got["traces"][0]["not_captured"]
    assert "TARGET_INFO_GPU" in lacks["gpu_info"]
    for table in ("META_DATA_EXPORT", "META_DATA_CAPTURE", "TARGET_INFO_SYSTEM_ENV",
                  "TARGET_INFO_SESSION_START_TIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        assert lacks[f"table:{table}"].startswith("not in this partial export: "), table
    # what they cost, and nothing else: no clock, no launch, no versions, sync edges inferred
    allowed = (".traces[0].clock.", ".traces[0].critical_path.edges.sync",
               ".traces[0].launch.", ".traces[0].not_captured.", ".traces[0].warnings[0]")
    # and no SM count: the SM budget's SM figures are unknown (its blocks are not)
    sms = {"sm_count", "sms_held", "sms_min", "comm_sms", "sms_left", "comm_sms_avg",
           "comm_sm_pct"}  # fmt: skip
    unknown = {k for k in diff if k.rsplit(".", 1)[-1] in sms}
    assert unknown and all(diff[k][0] is None for k in unknown)
    rest = {k for k in diff if not k.startswith(allowed) and k not in unknown
            and k.rsplit(".", 1)[-1] not in SOURCE_FIELDS}  # fmt: skip
    assert rest == set(), rest


# -- every example and fixture written again as nsys's columnar exports -----------------------


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_as_columnar_exports_read_as_the_sqlite(
    path: Path, kind: str, tmp_path: Path
) -> None:
    folder = to_columnar(path, tmp_path / (path.stem + DIR_SUFFIX[kind]), kind)
    a, b = load_trace(folder), load_trace(path)
    assert a.source_format == f"nsys-{kind}"
    assert_same_trace(a, b, f"{path.name} as {kind}")


def test_example_ab_from_parquet_equals_the_sqlite_ab(tmp_path: Path) -> None:
    off, on = EXAMPLES[0], EXAMPLES[1]
    folders = [to_columnar(p, tmp_path / (p.stem + "_pqtdir")) for p in (off, on)]
    got, want = analysis_json(*folders), analysis_json(off, on)
    diff = differences(got, want)
    assert diff and all(k.rsplit(".", 1)[-1] in SOURCE_FIELDS or "path" in k or "label" in k
                        for k in diff), diff  # fmt: skip


def test_unsigned_ids_past_two_to_the_63_read_as_sqlite_holds_them(tmp_path: Path) -> None:
    """A UInt64 id with its top bit set (nsys's "none" ids, 2^64-1) reads as the signed value
    SQLite stores, exactly: not a failed cast, not a float."""
    folder = to_columnar(EXAMPLES[0], tmp_path / "x_pqtdir")
    kernels = pl.read_parquet(folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")
    kernels = kernels.with_columns(pl.lit(2**64 - 1, pl.UInt64).alias("graphNodeId"))
    kernels.write_parquet(folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")
    trace = load_trace(folder)
    assert trace.kernels["graph"].unique().to_list() == ["node"]  # a node id, as -1 in SQLite
    db_value = pl.read_parquet(folder / "CUPTI_ACTIVITY_KIND_KERNEL.parquet")["graphNodeId"]
    assert db_value.reinterpret(signed=True).unique().to_list() == [-1]


def test_api_reads_a_parquet_folder(tmp_path: Path) -> None:
    folder = to_columnar(EXAMPLES[0], tmp_path / "x_pqtdir")
    got = api.analyze(folder).gpus
    want = api.analyze(EXAMPLES[0]).gpus
    assert got.equals(want)


# -- what a folder is ----------------------------------------------------------------------------


def test_a_folder_of_parquet_ranks_is_many_ranks(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for i, p in enumerate(EXAMPLES[:2]):
        to_columnar(p, ranks / f"rank{i}_pqtdir")
    (ranks / "notes.txt").write_text("not a trace")
    from nsysmoe.parallel import expand

    assert expand(str(ranks)) == [str(ranks / "rank0_pqtdir"), str(ranks / "rank1_pqtdir")]
    assert expand(str(ranks / "rank0_pqtdir")) == [str(ranks / "rank0_pqtdir")]


def test_a_report_and_its_exports_side_by_side_are_one_rank(tmp_path: Path) -> None:
    from nsysmoe.parallel import _one_per_run

    names = ["a.qdrep", "a_pqtdir", "b.nsys-rep", "b.sqlite", "b_pqtdir", "c_arwdir", "c_pqtdir",
             "d.sqlite"]  # fmt: skip
    got = _one_per_run(tmp_path / n for n in names)
    assert [Path(p).name for p in got] == ["a.qdrep", "b.sqlite", "c_pqtdir", "d.sqlite"]


@pytest.mark.parametrize(
    ("where", "parsed"),
    [
        ("", []),
        ("eventClass IN (0, 1)", [("eventClass", (0, 1))]),
        ("(eventType IN (59, 60)) AND (correlationId IS NOT NULL)",
         [("eventType", (59, 60)), ("correlationId", None)]),
        ('"id" = -3', [("id", (-3,))]),
        ("id IN (1,2,3)", [("id", (1, 2, 3))]),
        ("id IN ( )", [("id", ())]),  # SQLite's empty list: no row
    ],
)
def test_where_language(where: str, parsed: list[tuple[str, tuple[int, ...] | None]]) -> None:
    assert parse_where(where) == parsed


@pytest.mark.parametrize("where", ["rowid > 3", "a = 1 OR b = 2", "name = 'x'", "a IN (,)"])
def test_where_outside_the_language_is_a_programming_error(where: str) -> None:
    with pytest.raises(ValueError):
        parse_where(where)


def test_cache_serves_a_folder_and_sees_a_table_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--cache keys an export folder by its table files: a repeat is served, a changed table is
    not (fingerprint.folder_key)."""
    from nsysmoe.result_cache import key

    folder = to_columnar(EXAMPLES[0], tmp_path / "x_pqtdir")
    first = key("analyze", [folder])
    assert first is not None and key("analyze", [folder]) == first
    table = folder / "TARGET_INFO_GPU.parquet"
    pl.read_parquet(table).with_columns(pl.lit("another GPU").alias("name")).write_parquet(table)
    assert key("analyze", [folder]) not in (None, first)
    (folder / "EXTRA.parquet").write_bytes(table.read_bytes())
    assert key("analyze", [folder]) not in (None, first)
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    assert key("analyze", [ranks]) is None  # a folder of ranks is not one input


def test_select_of_literals_only_counts_the_rows_the_condition_keeps(tmp_path: Path) -> None:
    """Every column a missing one's stand-in: as many rows as SQL's SELECT NULL, 0 would give."""
    from nsysmoe.io.nsys_columnar import Columnar

    folder = to_columnar(EXAMPLES[0], tmp_path / "x_pqtdir")
    nvtx = pl.read_parquet(folder / "NVTX_EVENTS.parquet")
    got = Columnar(folder, "parquet").select(
        "NVTX_EVENTS", ["NULL", "0", "''"], {"a": pl.Int64, "b": pl.Int64, "c": pl.String},
        "eventType IN (59, 60)")
    assert got.height == nvtx.filter(pl.col("eventType").is_in([59, 60])).height > 0
    assert got.row(0) == (None, 0, "")


def test_ab_of_two_folders_of_parquet_ranks_equals_the_sqlite_folders(tmp_path: Path) -> None:
    """``off_dir/ on_dir/`` with Parquet ranks: the per-rank A/B of the same ranks as SQLite."""
    import shutil

    sides = {}
    for kind in ("sqlite", "parquet"):
        for side, example in (("off", EXAMPLES[0]), ("on", EXAMPLES[1])):
            folder = tmp_path / kind / side
            folder.mkdir(parents=True)
            for rank in ("rank0", "rank1"):
                if kind == "sqlite":
                    shutil.copy(example, folder / f"{rank}.sqlite")
                else:
                    to_columnar(example, folder / f"{rank}_pqtdir")
            sides[kind, side] = folder
    got = analysis_json(sides["parquet", "off"], sides["parquet", "on"], "--jobs", "1")
    want = analysis_json(sides["sqlite", "off"], sides["sqlite", "on"], "--jobs", "1")
    diff = differences(got, want)
    assert diff, "the paths differ at least"
    rest = {k: v for k, v in diff.items() if not (
        k.rsplit(".", 1)[-1] in SOURCE_FIELDS or "rank" in k.rsplit(".", 1)[-1] or any(
            isinstance(x, str) and ("_pqtdir" in x or ".sqlite" in x) for x in v))}
    assert rest == {}, rest
