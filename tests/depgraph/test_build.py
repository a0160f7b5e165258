"""The dependency graph built from hand-made tables (nsysmoe.depgraph.build): each edge kind
appears exactly where the rows say it should and nowhere else. Every test spells out the whole
set of edges it expects (duration edges apart), so an edge added in the wrong place fails too."""

from __future__ import annotations

import polars as pl
import pytest

from nsysmoe.depgraph.build import HOST_WAKE_NS, INFER_GAP_NS, build_graph
from nsysmoe.model import (
    EVENT_RECORD_SCHEMA,
    KERNEL_SCHEMA,
    MEMOP_SCHEMA,
    RUNTIME_SCHEMA,
    SYNC_SCHEMA,
)

CLASSIFIED = {**KERNEL_SCHEMA, "class": pl.String, "subclass": pl.String, "channel": pl.String}
MATCHED = {"pid": pl.Int64, "device": pl.Int64, "start": pl.Int64, "end": pl.Int64,
           "name": pl.String, "step": pl.Int64, "channel": pl.String, "k": pl.Int64,
           "last": pl.Int64}  # fmt: skip


def kernel(start, end, corr=None, *, pid=1, device=0, stream=7, name="gemm_k", klass="gemm",
           channel=None):  # fmt: skip
    return {"pid": pid, "device": device, "stream": stream, "start": start, "end": end,
            "corr_id": corr, "name": name, "short_name": name, "graph": None, "graph_id": None,
            "class": klass, "subclass": klass, "channel": channel}  # fmt: skip


def comm(start, end, corr=None, *, pid=1, device=0, stream=24, channel="ep.combine"):
    return kernel(start, end, corr, pid=pid, device=device, stream=stream, name="combine_kernel",
                  klass="comm", channel=channel)  # fmt: skip


def memop(start, end, corr=None, *, pid=1, device=0, stream=7, kind="memcpy"):
    return {"pid": pid, "device": device, "stream": stream, "start": start, "end": end,
            "corr_id": corr, "kind": kind, "bytes": 64, "name": f"[CUDA {kind}]"}  # fmt: skip


def call(start, end, corr=None, api=None, *, pid=1, tid=10):
    return {"pid": pid, "tid": tid, "start": start, "end": end, "corr_id": corr, "api": api}


def sync(corr, stream=None, event=None, sync_id=None, *, pid=1, device=0):
    return {"pid": pid, "corr_id": corr, "device": device, "stream": stream, "event_id": event,
            "event_sync_id": sync_id}  # fmt: skip


def record(corr, stream, event, sync_id=None, *, pid=1, device=0):
    return {"pid": pid, "corr_id": corr, "device": device, "stream": stream, "event_id": event,
            "event_sync_id": sync_id}  # fmt: skip


def graph(kernels=(), memops=(), runtime=(), syncs=(), records=(), matched=None):
    frames = [pl.DataFrame(list(rows), schema=schema, orient="row") for rows, schema in (
        (kernels, CLASSIFIED), (memops, MEMOP_SCHEMA), (runtime, RUNTIME_SCHEMA),
        (syncs, SYNC_SCHEMA), (records, EVENT_RECORD_SCHEMA))]  # fmt: skip
    m = None if matched is None else pl.DataFrame(matched, schema=MATCHED, orient="row")
    return build_graph(*frames, matched=m)


def names(g) -> list[str]:
    """Each node's name: K<row> (kernel), M<row> (memop), A<row> (API call), B<time> (a
    barrier, at its instance's last arrival)."""
    rows = g.nodes().select("kind", "row", "start").iter_rows()
    return [f"B{start}" if kind == "barrier" else {"kernel": "K", "api": "A"}.get(kind, "M")
            + str(row) for kind, row, start in rows]  # fmt: skip


def event_name(g, e: int) -> str:
    return names(g)[e // 2] + (".e" if e % 2 else ".s")


def edges(g, *, duration: bool = False) -> set[tuple[str, str, str]]:
    """(kind, src event, dst event) of every kept edge; duration edges only when asked."""
    df = g.edges()
    return {(k, event_name(g, s), event_name(g, d)) for s, d, k in
            df.select("src", "dst", "kind").iter_rows() if duration or k != "duration"}


def weight(g, kind: str, src: str, dst: str) -> int:
    df = g.edges()
    for s, d, k, w in df.iter_rows():
        if k == kind and event_name(g, s) == src and event_name(g, d) == dst:
            return w
    raise AssertionError(f"no {kind} edge {src} -> {dst}")


def test_stream_order_per_pid_device_stream_by_start():
    g = graph(kernels=[
        kernel(300, 400),  # K0: third on stream 7 (rows out of time order)
        kernel(0, 100),  # K1: first
        kernel(150, 200, stream=8),  # K2: alone on stream 8
        kernel(500, 600, pid=2),  # K3: same stream number, another process
        kernel(700, 800, device=1),  # K4: same stream number, another GPU
    ], memops=[memop(120, 250)])  # M0: between K1 and K0 on stream 7  # fmt: skip
    assert edges(g) == {("stream", "K1.e", "M0.s"), ("stream", "M0.e", "K0.s")}
    assert g.edge_counts["stream"] == 2 and not g.dropped


def test_duration_edges_weigh_each_op_and_call():
    g = graph(kernels=[kernel(0, 100)], memops=[memop(200, 230, kind="memset")],
              runtime=[call(50, 57)])  # fmt: skip
    assert edges(g, duration=True) == {("duration", "K0.s", "K0.e"),
                                       ("duration", "M0.s", "M0.e"),
                                       ("duration", "A0.s", "A0.e"),
                                       ("stream", "K0.e", "M0.s")}  # fmt: skip
    assert [weight(g, "duration", f"{n}.s", f"{n}.e") for n in ("K0", "M0", "A0")] == [100, 30, 7]
    assert g.nodes()["category"].to_list() == ["gemm", "memset", "host"]


def test_launch_by_pid_and_corr_id_never_across_processes():
    g = graph(kernels=[kernel(100, 200, 5, pid=1), kernel(150, 250, 5, pid=2),
                       kernel(300, 400, 6, pid=1, stream=9)],
              memops=[memop(500, 600, 7, pid=2)],
              runtime=[call(10, 20, 5, pid=1, tid=10), call(30, 40, 5, pid=2, tid=20),
                       call(50, 60, 6, pid=1, tid=10), call(70, 80, 7, pid=2, tid=20),
                       call(90, 95, 8, pid=1, tid=10)])  # corr 8 launched nothing  # fmt: skip
    launch = {e for e in edges(g) if e[0] == "launch"}
    assert launch == {("launch", "A0.s", "K0.s"), ("launch", "A1.s", "K1.s"),
                      ("launch", "A2.s", "K2.s"), ("launch", "A3.s", "M0.s")}  # fmt: skip


def test_graph_launch_reaches_every_node_kernel():
    nodes = [kernel(100 + 50 * i, 140 + 50 * i, 9) for i in range(3)]
    g = graph(kernels=nodes, runtime=[call(10, 30, 9, "graph_launch")])
    assert {e for e in edges(g) if e[0] == "launch"} == {
        ("launch", "A0.s", f"K{i}.s") for i in range(3)}


def test_host_order_per_thread_with_a_nested_driver_call():
    g = graph(runtime=[
        call(0, 10),  # A0
        call(20, 30),  # A1 (a runtime call)
        call(22, 25),  # A2: the driver call inside A1
        call(40, 50),  # A3: after A1, not after its nested call
        call(5, 15, tid=11),  # A4: another thread
        call(60, 70, tid=11),  # A5
        call(45, 48, pid=2, tid=12),  # A6: another process, alone on its thread
    ])  # fmt: skip
    assert edges(g) == {("host", "A0.e", "A1.s"), ("host", "A1.s", "A2.s"),
                        ("host", "A2.e", "A1.e"), ("host", "A1.e", "A3.s"),
                        ("host", "A4.e", "A5.s")}  # fmt: skip


def test_stream_sync_released_by_its_own_streams_last_op():
    g = graph(kernels=[kernel(100, 300, 1, stream=7),  # K0: the synchronised stream's op
                       kernel(100, 380, 2, stream=8),  # K1: later, on another stream
                       kernel(400, 450, 3, stream=7)],  # K2: after the call returned
              runtime=[call(10, 20, 1), call(30, 40, 2), call(50, 390, 4, "stream_sync"),
                       call(395, 398, 3)],
              syncs=[sync(4, stream=7)])  # fmt: skip
    assert {e for e in edges(g) if e[0] == "sync"} == {("sync", "K0.e", "A2.e")}
    # the held call's own time is what the GPU made it wait: not a weight of its own
    assert weight(g, "duration", "A2.s", "A2.e") == 0
    assert g.nodes()["category"][3 + 2] == "sync"


def test_device_sync_released_by_the_processes_last_op():
    g = graph(kernels=[kernel(100, 300, 1, stream=7), kernel(100, 380, 2, stream=8),
                       kernel(100, 385, 3, pid=2)],  # another process: not waited for
              runtime=[call(10, 20, 1), call(30, 40, 2), call(50, 390, 5, "device_sync"),
                       call(30, 40, 3, pid=2, tid=20)],
              syncs=[sync(5)])  # fmt: skip
    assert {e for e in edges(g) if e[0] == "sync"} == {("sync", "K1.e", "A2.e")}


def test_sync_before_the_call_started_is_no_release():
    # the stream was idle when the call began: nothing held it
    g = graph(kernels=[kernel(100, 150, 1)],
              runtime=[call(10, 20, 1), call(200, 205, 2, "stream_sync")],
              syncs=[sync(2, stream=7)])  # fmt: skip
    assert not {e for e in edges(g) if e[0] == "sync"}
    assert weight(g, "duration", "A1.s", "A1.e") == 5


def test_blocking_memcpy_holds_its_call():
    # M0: a synchronous copy (cudaMemcpy: blocking_copy) that ends before its call returns;
    # M1: async, ends after its call; M2: async (cudaMemsetAsync) but done before its call
    # returns — not a sync: its call's time stays the host's
    g = graph(memops=[memop(50, 90, 1), memop(300, 400, 2), memop(503, 505, 3)],
              runtime=[call(10, 100, 1, "blocking_copy"), call(110, 120, 2),
                       call(500, 510, 3)])  # fmt: skip
    assert {e for e in edges(g) if e[0] == "sync"} == {("sync", "M0.e", "A0.e")}
    assert weight(g, "duration", "A0.s", "A0.e") == 0
    assert weight(g, "duration", "A1.s", "A1.e") == 10
    assert weight(g, "duration", "A2.s", "A2.e") == 10


def _wait_trace(sync_id_on_wait, sync_ids_on_records):
    """Two records of event 3 on stream 7 (after K0, then after K1), a wait for it on stream 8,
    then K2 launched on stream 8; K3 on stream 7 launched after the second record."""
    first, second = sync_ids_on_records
    return graph(
        kernels=[kernel(1000, 1100, 1, stream=7),  # K0
                 kernel(1100, 1500, 3, stream=7),  # K1
                 kernel(1500, 1600, 7, stream=8),  # K2: after the wait
                 kernel(1600, 1700, 8, stream=7)],  # K3
        runtime=[call(10, 20, 1), call(30, 40, 2, "event_record"),  # A0 A1
                 call(50, 60, 3), call(70, 80, 4, "event_record"),  # A2 A3
                 call(90, 100, 6, "stream_wait"), call(110, 120, 7),  # A4 A5
                 call(130, 140, 8)],  # A6
        syncs=[sync(6, stream=8, event=3, sync_id=sync_id_on_wait)],
        records=[record(2, 7, 3, first), record(4, 7, 3, second)])  # fmt: skip


def test_stream_wait_tied_by_event_sync_id():
    # the wait names the FIRST record by its sync id: K0 (launched before it), not K1
    g = _wait_trace(sync_id_on_wait=41, sync_ids_on_records=(41, 42))
    assert {e for e in edges(g) if e[0] == "event"} == {("event", "K0.e", "K2.s")}
    assert g.unmatched_waits == 0 and "inferred" not in {e[0] for e in edges(g)}


def test_stream_wait_tied_by_the_last_record_before_it():
    g = _wait_trace(sync_id_on_wait=None, sync_ids_on_records=(None, None))
    assert {e for e in edges(g) if e[0] == "event"} == {("event", "K1.e", "K2.s")}
    assert g.unmatched_waits == 0


def test_stream_wait_record_after_the_wait_is_not_its_record():
    g = graph(kernels=[kernel(1000, 1100, 1, stream=7), kernel(1100, 1200, 7, stream=8)],
              runtime=[call(10, 20, 1), call(90, 100, 6, "stream_wait"), call(110, 120, 7),
                       call(130, 140, 2, "event_record")],
              syncs=[sync(6, stream=8, event=3)], records=[record(2, 7, 3)])  # fmt: skip
    assert "event" not in {e[0] for e in edges(g)}
    assert g.unmatched_waits == 1


def _untied(gap: int, *, with_wait: bool = True, pid: int = 1):
    """K0 on stream 7 ends at 1000; K1 on stream 8 starts ``gap`` later, launched long before,
    its stream idle: only K0 explains its start. With a cudaStreamWaitEvent no record ties."""
    runtime = [call(10, 20, 1, pid=pid), call(30, 40, 2, pid=pid)]
    if with_wait:
        runtime.append(call(25, 28, 9, "stream_wait", pid=pid))
    return graph(kernels=[kernel(500, 1000, 1, stream=7, pid=pid),
                          kernel(1000 + gap, 1200 + gap, 2, stream=8, pid=pid)],
                 runtime=runtime,
                 syncs=[sync(9, stream=8, event=5, pid=pid)] if with_wait else [])  # fmt: skip


def test_untied_wait_is_counted_and_inferred_within_the_gap():
    g = _untied(INFER_GAP_NS)
    assert g.unmatched_waits == 1
    assert {e for e in edges(g) if e[0] in ("inferred", "event")} == {
        ("inferred", "K0.e", "K1.s")}
    assert g.edge_counts["inferred"] == 1


def test_no_inference_past_the_gap_or_without_an_untied_wait():
    assert "inferred" not in {e[0] for e in edges(_untied(INFER_GAP_NS + 1))}
    g = _untied(100, with_wait=False)
    assert g.unmatched_waits == 0 and "inferred" not in {e[0] for e in edges(g)}


def test_no_inference_when_the_op_had_its_own_reason():
    # K1's launch call started after K0 ended: the launch explains its start
    g = graph(kernels=[kernel(500, 1000, 1, stream=7), kernel(1500, 1600, 2, stream=8)],
              runtime=[call(10, 20, 1), call(1100, 1400, 2), call(25, 28, 9, "stream_wait")],
              syncs=[sync(9, stream=8, event=5)])  # fmt: skip
    assert "inferred" not in {e[0] for e in edges(g)}


def test_inference_only_in_the_process_with_untied_waits():
    a = _untied(100)
    both = graph(
        kernels=[kernel(500, 1000, 1, stream=7), kernel(1100, 1300, 2, stream=8),
                 kernel(500, 1000, 1, stream=7, pid=2), kernel(1100, 1300, 2, stream=8, pid=2)],
        runtime=[call(10, 20, 1), call(30, 40, 2), call(25, 28, 9, "stream_wait"),
                 call(10, 20, 1, pid=2, tid=20), call(30, 40, 2, pid=2, tid=20)],
        syncs=[sync(9, stream=8, event=5)])  # fmt: skip
    assert {e for e in edges(a) if e[0] == "inferred"} == {("inferred", "K0.e", "K1.s")}
    assert {e for e in edges(both) if e[0] == "inferred"} == {("inferred", "K0.e", "K1.s")}


def _two_ranks():
    """Rank 1 arrives at 100, rank 2 (the last) at 300; both end at 500: transfer 200,
    rank 1 waits 200. Then a second instance, both ranks arriving at 700 (no wait)."""
    g = graph(
        kernels=[comm(100, 500, pid=1), comm(300, 500, pid=2, device=1),
                 comm(700, 800, pid=1), comm(700, 800, pid=2, device=1),
                 kernel(0, 90, pid=1, stream=7)],
        matched=[(1, 0, 100, 500, "combine_kernel", 0, "ep.combine", 0, 300),
                 (2, 1, 300, 500, "combine_kernel", 0, "ep.combine", 0, 300),
                 (1, 0, 700, 800, "combine_kernel", 0, "ep.combine", 1, 700),
                 (2, 1, 700, 800, "combine_kernel", 0, "ep.combine", 1, 700)])  # fmt: skip
    return g


def test_collective_barriers_from_a_matched_table():
    g = _two_ranks()
    assert edges(g) == {
        ("collective", "K0.s", "B300.s"), ("collective", "K1.s", "B300.s"),
        ("collective", "B300.e", "K0.e"), ("collective", "B300.e", "K1.e"),
        ("collective", "K2.s", "B700.s"), ("collective", "K3.s", "B700.s"),
        ("collective", "B700.e", "K2.e"), ("collective", "B700.e", "K3.e"),
        ("stream", "K0.e", "K2.s"), ("stream", "K1.e", "K3.s")}  # fmt: skip
    b = g.nodes().filter(pl.col("kind") == "barrier")
    assert sorted(b.select("start", "end").rows()) == [(300, 300), (700, 700)]
    assert weight(g, "collective", "B300.e", "K0.e") == 200
    assert weight(g, "collective", "B300.e", "K1.e") == 200
    assert weight(g, "collective", "B700.e", "K2.e") == 100
    # a member's own time is its transfer: the wait before the last arrival is the barrier's
    assert weight(g, "duration", "K0.s", "K0.e") == 200
    assert weight(g, "duration", "K2.s", "K2.e") == 100
    assert g.nodes()["category"].to_list()[:4] == ["ep.combine.transfer"] * 4
    assert {"ep.combine", "ep.combine.transfer", "ep.combine.wait"} <= set(g.categories)


def test_unmatched_comm_kernel_keeps_its_channel_and_no_barrier():
    g = graph(kernels=[comm(100, 500, pid=1)], matched=[])
    assert g.nodes()["category"].to_list() == ["ep.combine"]
    assert edges(g) == set()


@pytest.mark.parametrize("case", ["launch", "stream"])
def test_contradicted_edge_is_dropped_and_counted(case):
    if case == "launch":  # the kernel starts before its launch call does
        g = graph(kernels=[kernel(100, 200, 1)], runtime=[call(150, 160, 1)])
    else:  # two ops overlap on one stream
        g = graph(kernels=[kernel(0, 100), kernel(50, 150)])
    assert case not in {e[0] for e in edges(g)}
    assert g.dropped == {case: 1}
    assert case not in g.edge_counts or g.edge_counts[case] == 0


def test_collective_barriers_are_numbered_the_same_on_every_build():
    # a join's row order is not fixed: the barriers (and so which of two arrivals at one
    # instant a path follows) must not depend on it
    builds = [_two_ranks() for _ in range(30)]
    first = builds[0]
    for g in builds[1:]:
        assert (g.t == first.t).all() and (g.src == first.src).all() and (g.w == first.w).all()
    # in instance order: the first instance's barrier first
    barriers = first.nodes().filter(pl.col("kind") == "barrier")
    assert barriers["start"].to_list() == [300, 700]


def test_a_threads_first_call_can_wait_for_another_thread():
    # review round 1 (51ae5f9), the bug: only a call after a silence on its own thread could
    # get a host_wait edge, so a thread's first call (the autograd thread's first launch, the
    # main thread blocked in backward()) was a root and kept its time in every replay. A0 on
    # thread 10 ends at 100; A1, thread 11's first call, starts 150 later (within
    # HOST_WAKE_NS); A2, thread 12's first call, starts past it: no edge
    g = graph(runtime=[call(0, 100), call(250, 260, tid=11), call(400 + HOST_WAKE_NS, 500,
                                                                  tid=12)])  # fmt: skip
    assert edges(g) == {("host_wait", "A0.e", "A1.s")}
    assert g.edge_counts["host_wait"] == 1 and not g.dropped


def test_a_threads_first_call_can_wait_for_a_gpu_op():
    # the latest end in the process before the first call wins: here K0's, after A0's
    g = graph(kernels=[kernel(50, 200, 1)],
              runtime=[call(0, 10, 1), call(300, 310, tid=11)])  # fmt: skip
    assert {e for e in edges(g) if e[0] == "host_wait"} == {("host_wait", "K0.e", "A1.s")}


def test_collective_member_that_ended_before_the_last_arrival_keeps_its_time():
    # review round 1 (51ae5f9), the bug: rank 1's member (100-250) ended before rank 2
    # arrived (300: clocks apart); its transfer came out 0, so its own time became 0 and its
    # barrier -> end edge (0 at 300, its end at 250) was contradicted and dropped: the 150 ns
    # were an unscalable delay and dropped counted 1 collective edge. Now it keeps its own
    # time and has no edge out of the barrier; rank 2's member is as before
    g = graph(kernels=[comm(100, 250, pid=1), comm(300, 500, pid=2, device=1)],
              matched=[(1, 0, 100, 250, "combine_kernel", 0, "ep.combine", 0, 300),
                       (2, 1, 300, 500, "combine_kernel", 0, "ep.combine", 0, 300)])  # fmt: skip
    assert edges(g) == {("collective", "K0.s", "B300.s"), ("collective", "K1.s", "B300.s"),
                        ("collective", "B300.e", "K1.e")}  # fmt: skip
    assert not g.dropped
    assert g.edge_counts["collective"] == 3
    assert weight(g, "duration", "K0.s", "K0.e") == 150
    assert weight(g, "duration", "K1.s", "K1.e") == 200
    assert weight(g, "collective", "B300.e", "K1.e") == 200
