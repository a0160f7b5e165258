"""The synthetic-export generator: valid exports per schema version, and truth that holds.

Truth comes from the slot construction (tests/fixtures/slots.py); here it is checked for
internal consistency, against a per-nanosecond brute force over the SQLite rows of small files,
against an nvtxsum-style SQL query, and (edge case) against numbers worked out by hand.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import oracle
from tests.fixtures.generate import (
    DDL_VERSIONS,
    EXAMPLES,
    EXAMPLES_TRUTH_DIR,
    KERNEL_CLASSES,
    K,
    build_examples,
    edge_case_scenario,
    load_schema,
    moe_step_scenario,
    write_export,
)
from tests.fixtures.kernels import KERNEL_CHANNELS
from tests.fixtures.spec import global_pid

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "nsysmoe" / "examples"
PID_MASK = "0xFFFFFFFFFF000000"  # an SQL literal (as in NVIDIA's reports): -16777216 as int64
ENUM_TABLES = {"2.9.1": 0, "3.0.0": 42, "3.13.2": 62, "3.28.1": 0}
CORE_TABLES = {
    "StringIds", "ThreadNames", "PROCESSES", "TARGET_INFO_GPU", "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
}  # fmt: skip


def small_moe(dispatcher: str, overlap: bool, **kw: Any) -> tuple[Any, dict[str, Any]]:
    """A MoE run small enough for per-ns brute force (durations scaled by 1/100)."""
    args = {"steps": 2, "layers": 1, "microbatches": 2, "warmup_steps": 1, "time_scale": 0.01}
    return moe_step_scenario(dispatcher=dispatcher, overlap=overlap, **(args | kw))


@pytest.fixture(scope="module")
def edge() -> tuple[Any, dict[str, Any]]:
    return edge_case_scenario()


@pytest.fixture(scope="module", params=DDL_VERSIONS)
def edge_db(request: pytest.FixtureRequest, tmp_path_factory, edge) -> tuple[Path, str]:
    ddl = request.param
    path = tmp_path_factory.mktemp("edge") / f"edge-{ddl}.sqlite"
    return write_export(path, edge[0], ddl, shuffle=True, seed=3), ddl


# --- file structure ----------------------------------------------------------------------------


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_tables_come_from_the_real_ddl(edge_db: tuple[Path, str]) -> None:
    path, ddl = edge_db
    schema = load_schema(ddl)
    con = sqlite3.connect(path)
    tables = _tables(con)
    assert CORE_TABLES <= tables
    assert sum(t.startswith("ENUM_") for t in tables) == ENUM_TABLES[ddl]
    for table in tables:  # the exact CREATE TABLE text of the real export
        sql = con.execute("SELECT sql FROM sqlite_master WHERE name=?", (table,)).fetchone()[0]
        assert sql + ";" == schema.statements[table]
    assert con.execute("SELECT value FROM StringIds WHERE id = 0").fetchone() == ("[Unknown]",)
    con.close()


def test_metadata_names_the_schema_version(edge_db: tuple[Path, str]) -> None:
    path, ddl = edge_db
    con = sqlite3.connect(path)
    table = "EXPORT_META_DATA" if ddl in ("2.9.1", "3.0.0") else "META_DATA_EXPORT"
    query = f"SELECT value FROM {table} WHERE name = 'EXPORT_SCHEMA_VERSION'"
    assert con.execute(query).fetchone() == (ddl,)
    assert ("META_DATA_CAPTURE" in _tables(con)) == (table == "META_DATA_EXPORT")
    con.close()


def test_version_specific_columns(edge_db: tuple[Path, str]) -> None:
    path, ddl = edge_db
    con = sqlite3.connect(path)
    kcols = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
    assert ("greenContextId" in kcols) == (ddl >= "3.1")
    if ddl == "3.28.1":
        assert con.execute("SELECT DISTINCT tensorSizeMinusOneElements FROM "
                           "CUPTI_ACTIVITY_KIND_KERNEL").fetchall() == [("[]",)]  # fmt: skip
        ids = [r[0] for r in con.execute("SELECT eventId FROM NVTX_EVENTS ORDER BY eventId")]
        assert ids == list(range(1, len(ids) + 1))
    if ddl == "2.9.1":  # the real 2022.2 file carries a user's extra "name" column
        rcols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
        assert rcols[-1] == "name"
    con.close()


def test_ids_and_correlation(edge_db: tuple[Path, str]) -> None:
    path, _ = edge_db
    con = sqlite3.connect(path)
    pids = {r[0] for r in con.execute("SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL")}
    assert pids == {global_pid(1001), global_pid(2002)} == {(1 << 48) | (1001 << 24),
                                                            (1 << 48) | (2002 << 24)}  # fmt: skip
    masked = f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON k.correlationId = r.correlationId
        AND k.globalPid = (r.globalTid & {PID_MASK}) AND r.eventClass IN (0, 1)"""
    naive = """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON k.correlationId = r.correlationId"""
    with_corr = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                            "WHERE correlationId IS NOT NULL").fetchone()[0]  # fmt: skip
    assert con.execute(masked).fetchone()[0] == with_corr
    assert con.execute(naive).fetchone()[0] > with_corr  # ids restart per process; backtraces
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67"
                       ).fetchone()[0] > 0  # fmt: skip
    con.close()


# --- truth: self-consistency, hand numbers, brute force -----------------------------------------


def check_consistent(truth: dict[str, Any]) -> None:
    for g in truth["gpus"]:
        for m in [g, *g["steps"]]:
            assert (
                0 <= m["comm_gemm_attn_ns"] <= m["hidden_ns"] <= min(m["comm_ns"], m["compute_ns"])
            )
            assert m["exposed_ns"] == m["comm_ns"] - m["hidden_ns"]
            assert m["idle_ns"] == m["span_ns"] - m["active_ns"] >= 0
            assert m["active_ns"] >= m["comm_ns"] + m["compute_ns"] - m["hidden_ns"]
            classes = m["classes"]
            assert all(c["union_ns"] <= c["sum_ns"] for c in classes.values())
            assert sum(c["count"] for c in classes.values()) == m["kernels"]
            assert classes["comm"]["union_ns"] == m["comm_ns"]
            compute_union = sum(c["union_ns"] for k, c in classes.items() if k != "comm")
            assert compute_union >= m["compute_ns"]
            pct = m["hidden_pct"]
            assert pct is None if m["comm_ns"] == 0 else pct == 100 * m["hidden_ns"] / m["comm_ns"]
            check_channels(m)
        steps = g["steps"]
        if steps and sum(st["kernels"] for st in steps) == g["kernels"]:  # all work in steps
            for name, ch in g["channels"].items():
                for key in CHANNEL_SUMS:
                    assert sum(st["channels"].get(name, {}).get(key, 0) for st in steps) == ch[key]


CHANNEL_KEYS = {"count", "comm_ns", "hidden_ns", "exposed_ns", "hidden_pct", "comm_gemm_attn_ns",
                "exposed_only_ns"}  # fmt: skip
CHANNEL_SUMS = ("count", "comm_ns", "hidden_ns", "exposed_ns", "comm_gemm_attn_ns",
                "exposed_only_ns")  # fmt: skip


def check_channels(m: dict[str, Any]) -> None:
    """A channel block agrees with itself and with the comm totals of the same GPU or step."""
    chans = m["channels"]
    assert sum(c["count"] for c in chans.values()) == m["classes"]["comm"]["count"]
    assert sum(c["comm_ns"] for c in chans.values()) >= m["comm_ns"]  # channels may overlap
    assert sum(c["hidden_ns"] for c in chans.values()) >= m["hidden_ns"]
    for c in chans.values():
        assert set(c) == CHANNEL_KEYS and c["count"] > 0
        assert 0 <= c["comm_gemm_attn_ns"] <= c["hidden_ns"] <= c["comm_ns"] <= m["comm_ns"]
        assert c["exposed_ns"] == c["comm_ns"] - c["hidden_ns"]
        assert 0 <= c["exposed_only_ns"] <= c["exposed_ns"]
        pct = c["hidden_pct"]
        assert pct is None if c["comm_ns"] == 0 else pct == 100 * c["hidden_ns"] / c["comm_ns"]


def test_edge_truth_by_hand(edge) -> None:
    a, b = edge[1]["gpus"]
    assert (a["pid"], a["device"], b["pid"], b["device"]) == (1001, 0, 2002, 0)
    # GPU A, from the slot list in tests/fixtures/edge.py
    assert (a["kernels"], a["span_ns"], a["active_ns"], a["idle_ns"]) == (13, 1200, 800, 400)
    assert (a["comm_ns"], a["compute_ns"], a["hidden_ns"], a["comm_gemm_attn_ns"]) == (
        370, 440, 110, 100)  # fmt: skip
    assert a["classes"]["gemm"] == {"count": 3, "sum_ns": 300, "union_ns": 250}
    assert a["classes"]["comm"] == {"count": 5, "sum_ns": 420, "union_ns": 370}
    assert a["classes"]["moe_glue"]["count"] == 0  # the only top-k row ends before it starts
    assert (b["kernels"], b["span_ns"], b["active_ns"], b["comm_ns"], b["hidden_ns"]) == (
        3, 700, 600, 300, 100)  # fmt: skip
    assert edge[1]["dropped_rows"] == 2 and edge[1]["excluded_rows"] == 2
    nvtx = {n["name"]: (n["count"], n["total_ns"]) for n in edge[1]["nvtx"]}
    assert nvtx["NCCL:ncclAllReduce"] == (2, 60) and nvtx["MyLib:setup"] == (1, 100)
    assert nvtx["crashed_range"] == (1, 2600 - 2400)  # unended: ends at the last NVTX timestamp
    assert nvtx["async_io"] == (1, 500) and nvtx["step 0"] == (2, 1400 + 1650)
    # channels (count, comm, hidden, exposed, pct, comm_gemm_attn, exposed_only), by hand:
    # dispatch = HybridEP [1350,1420) + DeepEP [1910,2000) (its last 50 ns under the SendRecv);
    # the SendRecv is launched on thread 1001, outside 1005's "moe_dispatch forward" range
    chans = {k: tuple(c[f] for f in ("count", "comm_ns", "hidden_ns", "exposed_ns", "hidden_pct",
                                     "comm_gemm_attn_ns", "exposed_only_ns"))
             for k, c in a["channels"].items()}  # fmt: skip
    assert chans == {
        "nccl.allreduce": (1, 150, 50, 100, 100 * 50 / 150, 50, 100),
        "ep.dispatch": (2, 160, 60, 100, 100 * 60 / 160, 50, 50),
        "ep.sync": (1, 10, 0, 10, 0.0, 0, 10),
        "nccl.sendrecv": (1, 100, 0, 100, 0.0, 0, 50),
    }
    assert b["channels"] == {"ep.combine": {
        "count": 1, "comm_ns": 300, "hidden_ns": 100, "exposed_ns": 200, "hidden_pct": 100 / 3,
        "comm_gemm_attn_ns": 100, "exposed_only_ns": 200}}  # fmt: skip
    check_consistent(edge[1])


def _compare(path: Path, truth: dict[str, Any], *, per_ns: bool = True) -> None:
    measured = oracle.brute_force(path, per_ns=per_ns)
    assert set(measured) == {(g["pid"], g["device"]) for g in truth["gpus"]}
    for g in truth["gpus"]:
        m = measured[(g["pid"], g["device"])]
        for key, value in m.items():
            assert g[key] == value, (g["pid"], key)
    assert oracle.nvtx_sum(path) == truth["nvtx"]


def test_edge_brute_force(edge_db: tuple[Path, str], edge) -> None:
    _compare(edge_db[0], edge[1])


@pytest.mark.parametrize("dispatcher", ["hybridep", "deepep", "alltoall"])
@pytest.mark.parametrize("overlap", [False, True])
def test_small_moe_brute_force(tmp_path: Path, dispatcher: str, overlap: bool) -> None:
    spec, truth = small_moe(dispatcher, overlap, n_processes=2, share_device0=overlap)
    check_consistent(truth)
    for ddl in ("2.9.1", "3.13.2"):
        path = write_export(tmp_path / f"{ddl}.sqlite", spec, ddl, shuffle=overlap)
        _compare(path, truth)


def test_small_moe_with_aten_ranges(tmp_path: Path) -> None:
    spec, truth = small_moe("hybridep", True, aten_ranges=2)
    path = write_export(tmp_path / "aten.sqlite", spec, "3.28.1")
    _compare(path, truth)
    assert any(n["name"].startswith("aten::mm, seq = ") for n in truth["nvtx"])
    assert any(n["name"].startswith("aten::linear, seq = ") for n in truth["nvtx"])


# --- the generated timelines are faithful ------------------------------------------------------


@pytest.fixture(scope="module")
def moe_db(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    spec, truth = moe_step_scenario(dispatcher="alltoall", overlap=True, steps=3, n_processes=2)
    path = tmp_path_factory.mktemp("moe") / "moe.sqlite"
    return write_export(path, spec, "3.0.0"), truth


def test_kernels_start_after_their_launch_and_streams_are_serial(moe_db) -> None:
    con = sqlite3.connect(moe_db[0])
    late = f"""SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
        ON k.correlationId = r.correlationId AND k.globalPid = (r.globalTid & {PID_MASK})
        WHERE r.eventClass IN (0, 1) AND k.start < r."end" """
    assert con.execute(late).fetchone()[0] == 0
    rows = con.execute('SELECT globalPid, deviceId, streamId, start, "end" FROM '
                       "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1, 2, 3, 4").fetchall()  # fmt: skip
    for prev, cur in zip(rows, rows[1:], strict=False):
        if prev[:3] == cur[:3]:
            assert cur[3] >= prev[4]
    con.close()


def test_nvtx_ranges_nest_per_thread(moe_db) -> None:
    con = sqlite3.connect(moe_db[0])
    rows = con.execute('SELECT globalTid, start, "end" FROM NVTX_EVENTS WHERE eventType = 59 '
                       "ORDER BY globalTid, start, \"end\" DESC").fetchall()  # fmt: skip
    stacks: dict[int, list[int]] = {}
    for tid, start, end in rows:
        stack = stacks.setdefault(tid, [])
        while stack and stack[-1] <= start:
            stack.pop()
        assert not stack or end <= stack[-1], "push/pop ranges must nest"
        stack.append(end)
    con.close()


PROJECTION = f"""SELECT s.value, count(*) FROM NVTX_EVENTS n
    JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = n.globalTid AND r.start >= n.start
        AND r."end" <= n."end" AND r.eventClass IN (0, 1)
    JOIN CUPTI_ACTIVITY_KIND_KERNEL k
        ON k.correlationId = r.correlationId AND k.globalPid = (r.globalTid & {PID_MASK})
    JOIN StringIds s ON s.id = k.shortName
    WHERE n.eventType = 59 AND n.text = ? GROUP BY 1"""


def test_hybridep_ranges_project_onto_their_kernels() -> None:
    """What nvtx_gpu_proj does: the launch call of each HybridEP kernel is inside its range."""
    path = SHIPPED / "moe-hybridep-overlap-on.sqlite"
    con = sqlite3.connect(path)
    kernels = Counter(
        r[0]
        for r in con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN StringIds s ON s.id = k.demangledName"
        )  # fmt: skip
    )
    n_dispatch = sum(n for name, n in kernels.items() if "hybrid_ep::dispatch_kernel" in name)
    n_combine = sum(n for name, n in kernels.items() if "hybrid_ep::combine_kernel" in name)
    got = dict(con.execute(PROJECTION, ("dispatch_core in hybrid-ep",)).fetchall())
    assert got == {"dispatch_kernel": n_dispatch}
    got = dict(con.execute(PROJECTION, ("combine_core in hybrid-ep",)).fetchall())
    assert got == {"combine_kernel": n_combine}
    # Megatron's backward node ranges sit on the main thread; the launches on pt_autograd_0
    assert con.execute(PROJECTION, ("moe_dispatch backward",)).fetchall() == []
    assert dict(con.execute(PROJECTION, ("moe_dispatch forward",)).fetchall()) == {
        "dispatch_kernel": n_dispatch // 2
    }
    con.close()


def test_moe_scenario_shape() -> None:
    off = moe_step_scenario(dispatcher="hybridep", overlap=False, steps=5)
    on = moe_step_scenario(dispatcher="hybridep", overlap=True, steps=5)
    names = [Counter(k.name for k in s.kernels) for s, _ in (off, on)]
    assert names[0] == names[1]  # matched contract: the same kernels in both
    g_off, g_on = off[1]["gpus"][0], on[1]["gpus"][0]
    assert g_off["hidden_pct"] < 1 and 30 < g_on["hidden_pct"] < 60
    assert g_on["active_ns"] < g_off["active_ns"]
    for _, truth in (off, on):
        durations = [s["end"] - s["start"] for s in truth["steps"]]
        assert durations[0] > durations[1] > max(durations[2:])  # warm-up steps are slower
        check_consistent(truth)
    on_names = {n["name"] for n in on[1]["nvtx"]}
    assert {"moe_dispatch forward", "moe_combine forward"} <= on_names
    assert "moe_dispatch forward" not in {n["name"] for n in off[1]["nvtx"]}


def test_scale_and_determinism() -> None:
    a = moe_step_scenario(dispatcher="deepep", overlap=True, steps=2, seed=5)
    b = moe_step_scenario(dispatcher="deepep", overlap=True, steps=2, seed=5)
    assert a[1] == b[1]
    big = moe_step_scenario(dispatcher="deepep", overlap=True, steps=2, seed=5, scale=3)
    ratio = len(big[0].kernels) / len(a[0].kernels)
    assert 2.5 < ratio < 3.2


TAXONOMY = [  # kernel-taxonomy.md starter rules (first match wins) -> truth class
    ("comm", r"deep_ep::(?:legacy::)?(?:intranode|internode|internode_ll)::"
             r"(?:notify_dispatch|cached_notify_dispatch|cached_notify_combine|cached_notify|"
             r"dispatch|combine)\b|hybrid_ep::(?:dispatch_kernel|combine_kernel)\b|"
             r"\bncclDevKernel_|\bncclKernel_"),
    ("moe_glue", r"deep_ep::(?:legacy::)?layout::get_dispatch_layout"),  # moe.layout.deepep
    ("attention", r"flash_fwd|flash_bwd|flash::FlashAttn|cudnn_generated_fort_native_sdpa"),
    ("gemm", r"GroupProblemShape|\bnvjet_|cutlass::(?:device_kernel|Kernel2?)<.*[Gg]emm"),
    ("moe_glue", r"moe_permute|moe_unpermute|fused_topk_"),
    ("elementwise", r"elementwise_kernel|reduce_kernel|_norm_|Norm|silu"),
    # beyond the starter list: optimizer updates are memory-bound elementwise work (nsysmoe rules)
    ("elementwise", r"multi_tensor_apply_kernel<.*AdamFunctor"),
    ("other", r".*"),
]  # fmt: skip


def test_kernel_classes_follow_the_taxonomy() -> None:
    for name, klass in KERNEL_CLASSES.items():
        first = next(c for c, rx in TAXONOMY if re.search(rx, name))
        assert first == klass, name


def test_kernel_channels_follow_the_channel_table() -> None:
    """Every comm kernel has its channel as data, the one the oracle's name rules give; only
    NCCL Send/Recv takes the channel of an enclosing EP phase instead."""
    for tpl in K.values():
        assert (tpl.channel is not None) == (tpl.klass == "comm"), tpl.name
        if tpl.channel:
            assert oracle.name_channel(tpl.name) == tpl.channel == KERNEL_CHANNELS[tpl.name]
            assert tpl.phase_channel == (tpl.channel == "nccl.sendrecv")
    assert set(KERNEL_CHANNELS.values()) == {"ep.dispatch", "ep.combine", "ep.sync",
                                             "nccl.allreduce", "nccl.sendrecv"}  # fmt: skip
    names = {  # the rest of the table, on real kernel names
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)"
        "4096>)": "nccl.reducescatter",
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)": "nccl.allgather",
        "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)":
            "nccl.broadcast",
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)": "nccl.sendrecv",
        "ncclDevKernel_Recv(ncclDevKernelArgsStorage<(unsigned long)4096>)": "nccl.sendrecv",
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE": "nccl.reducescatter",
        "ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)":
            "nccl.other",
        "void hybrid_ep::scan<(int)128>(hybrid_ep::scan_param_t)": "ep.sync",
        "void deep_ep::internode_ll::dispatch<(bool)1, (int)3, (int)7168>(void *)": "ep.dispatch",
        "void deep_ep::internode::combine<__nv_bfloat16, (int)4>(int4 *)": "ep.combine",
        "void deep_ep::internode::cached_notify<(int)8>(int, int)": "ep.sync",
        "void transformer_engine::userbuffers::kuserbuffers_pushrecv(int, int)": "tp.userbuffers",
        "void my_lib::all2all_kernel(float *)": "other",
    }  # fmt: skip
    for name, channel in names.items():
        assert oracle.name_channel(name) == channel, name


@pytest.mark.parametrize("overlap", [False, True])
def test_alltoall_sendrecv_runs_in_ep_phases(overlap: bool) -> None:
    """Megatron's alltoall dispatcher: every SendRecv is launched inside a moe_dispatch /
    moe_combine range on its own thread, so it is EP traffic (with overlap on or off); the
    edge case's SendRecv, outside any EP phase on its thread, stays nccl.sendrecv."""
    spec, truth = small_moe("alltoall", overlap)
    sendrecv = [k for k in spec.kernels if k.short_name == "ncclDevKernel_SendRecv"]
    assert Counter(k.channel for k in sendrecv) == {"ep.dispatch": 8, "ep.combine": 8}
    threads = {k.tid for k in sendrecv}
    assert len(threads) == 2  # forward on the main thread, backward on pt_autograd_0
    other = small_moe("alltoall", not overlap)[1]
    for t in (truth, other):
        check_consistent(t)
    counts = [{n: c["count"] for n, c in t["gpus"][0]["channels"].items()} for t in (truth, other)]
    assert counts[0] == counts[1] == {"ep.dispatch": 8, "ep.combine": 8, "nccl.allreduce": 2}
    edge_spec, edge_truth = edge_case_scenario()
    assert [k.channel for k in edge_spec.kernels if "SendRecv" in k.name] == ["nccl.sendrecv"]
    assert "nccl.sendrecv" in edge_truth["gpus"][0]["channels"]


# --- shipped examples ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> tuple[Path, Path]:
    out, truth = tmp_path_factory.mktemp("examples"), tmp_path_factory.mktemp("truth")
    build_examples(out, truth)
    return out, truth


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_regenerate_identically(regenerated, name: str) -> None:
    out, truth_dir = regenerated
    shipped, fresh = SHIPPED / f"{name}.sqlite", out / f"{name}.sqlite"
    assert shipped.stat().st_size < 1.5e6
    assert oracle.table_dump(fresh) == oracle.table_dump(shipped)
    if _sqlite_version(shipped) == sqlite3.sqlite_version_info:
        assert fresh.read_bytes() == shipped.read_bytes()
    expected = json.loads((EXAMPLES_TRUTH_DIR / f"{name}.truth.json").read_text())
    assert json.loads((truth_dir / f"{name}.truth.json").read_text()) == expected
    check_consistent(expected)
    _compare(shipped, expected, per_ns=False)  # too long for per-ns masks: elementary segments


def _sqlite_version(path: Path) -> tuple[int, int, int]:
    """The SQLite library version stored in the file header (bytes 96-99)."""
    n = int.from_bytes(path.read_bytes()[96:100], "big")
    return n // 1_000_000, n // 1000 % 1000, n % 1000


def test_examples_truth_numbers() -> None:
    truth = {n: json.loads((EXAMPLES_TRUTH_DIR / f"{n}.truth.json").read_text()) for n in EXAMPLES}
    off = truth["moe-hybridep-overlap-off"]
    on = truth["moe-hybridep-overlap-on"]
    assert off["gpus"][0]["kernels"] == on["gpus"][0]["kernels"] > 2000
    assert off["gpus"][0]["hidden_pct"] < 1 < 30 < on["gpus"][0]["hidden_pct"] < 60
    assert len(off["steps"]) == len(on["steps"]) == 8
    for t in (off, on):
        assert set(t["hybridep_nvtx_ns"]) >= {
            "metadata_preprocess_core in hybrid-ep", "dispatch_core in hybrid-ep",
            "combine_core in hybrid-ep"}  # fmt: skip
