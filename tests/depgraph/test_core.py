"""The compiled passes of nsysmoe.depgraph.core against pure-Python references written here
(no numba): random small DAGs of events (hypothesis) whose times follow from their edges'
weights and each event's delay, computed forward; the topological order, the settle, the
replay and the walk each checked against a plain definition, the walk's path against every
path enumerated back from its end; and a hand-built two-rank collective whose wait and
transfer are known by construction."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsysmoe.depgraph import core

EXAMPLES = settings(max_examples=200)
N_CATS = 4  # node categories 0..3; then the root's and the unexplained's
ROOT_CAT = 4
N_KINDS = 8  # edge kinds as the graph numbers them; kind 1 is a collective's
COLLECTIVE = 1


@dataclass
class Graph:
    """Events 0..n-1 (node v // 2 owns event v), predecessor lists in CSR form."""

    t: np.ndarray
    indptr: np.ndarray
    src: np.ndarray
    w: np.ndarray
    kind: np.ndarray
    node_cat: np.ndarray  # per node
    delay_of_kind: np.ndarray  # per kind: the category of a delay it binds (-1: the node's)
    wait_of: np.ndarray  # per category: its wait category (-1: none)
    delay: np.ndarray  # the delay each event was generated with (0 for a root)

    @property
    def n(self) -> int:
        return self.t.size

    def preds(self, v: int) -> range:
        return range(int(self.indptr[v]), int(self.indptr[v + 1]))

    def weight_cat(self, e: int, v: int) -> int:
        return int(self.node_cat[v // 2])

    def delay_cat(self, e: int, v: int) -> int:
        d = int(self.delay_of_kind[self.kind[e]])
        return int(self.node_cat[v // 2]) if d < 0 else d


def csr(n: int, edges: list[tuple[int, int, int, int]]) -> tuple[np.ndarray, ...]:
    """(src, dst, w, kind) edges → indptr, src, w, kind; each destination's edges in the
    order given."""
    by_dst: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    for s, d, w, k in edges:
        by_dst[d].append((s, w, k))
    indptr = np.zeros(n + 1, np.int64)
    indptr[1:] = np.cumsum([len(x) for x in by_dst])
    flat = [x for lst in by_dst for x in lst]
    src = np.array([x[0] for x in flat], np.int64)
    w = np.array([x[1] for x in flat], np.int64)
    kind = np.array([x[2] for x in flat], np.int64)
    return indptr, src, w, kind


@st.composite
def dags(draw, *, zero_delay: bool = False, kinds: tuple[int, ...] = (0, 2, 3, 5, 6, 7),
         max_n: int = 10) -> Graph:  # fmt: skip
    """A random DAG: edges between topological positions i < j (repeats allowed), weights
    0..20, root times 0..50, delays 0..10 (or 0), times computed forward; events labelled by a
    random permutation of the positions; each event's edges in a random order."""
    n = draw(st.integers(1, max_n))
    label = draw(st.permutations(range(n)))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                                    st.integers(0, 20), st.sampled_from(kinds)),
                          max_size=3 * n))  # fmt: skip
    edges = [(min(a, b), max(a, b), w, k) for a, b, w, k in pairs if a != b]
    edges = draw(st.permutations(edges))
    roots = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    delays = [0] * n if zero_delay else draw(st.lists(st.integers(0, 10), min_size=n,
                                                      max_size=n))  # fmt: skip
    t_pos = [0] * n
    d_pos = [0] * n
    for j in range(n):
        into = [t_pos[i] + w for i, jj, w, _ in edges if jj == j]
        t_pos[j] = max(into) + delays[j] if into else roots[j]
        d_pos[j] = delays[j] if into else 0
    t = np.empty(n, np.int64)
    delay = np.empty(n, np.int64)
    for pos in range(n):
        t[label[pos]] = t_pos[pos]
        delay[label[pos]] = d_pos[pos]
    indptr, src, w, kind = csr(n, [(label[a], label[b], w, k) for a, b, w, k in edges])
    n_nodes = (n + 1) // 2
    node_cat = np.array(draw(st.lists(st.integers(0, N_CATS - 1), min_size=n_nodes,
                                      max_size=n_nodes)), np.int64)  # fmt: skip
    delay_of_kind = np.array(draw(st.lists(st.integers(-1, N_CATS - 1), min_size=N_KINDS,
                                           max_size=N_KINDS)), np.int64)  # fmt: skip
    wait_of = np.full(ROOT_CAT + 2, -1, np.int64)
    return Graph(t, indptr, src, w, kind, node_cat, delay_of_kind, wait_of, delay)


def solved(g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = core.topological_order(g.indptr, g.src, g.t)
    bind, delay = core.settle(order, g.indptr, g.src, g.w, g.t)
    return order, bind, delay


def walk(g: Graph, bind: np.ndarray, end: int, stop: int, follow: bool = True
         ) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """core.walk's segments (category, ns, at event, peer event) of the path from ``end``."""
    _, cats, ns, at, peer = core.walk(
        np.array([end], np.int64), np.array([stop], np.int64), g.t, g.src, g.w, g.kind, bind,
        g.node_cat, g.delay_of_kind, g.wait_of, ROOT_CAT, COLLECTIVE, follow)  # fmt: skip
    return list(zip(cats.tolist(), ns.tolist(), at.tolist(), peer.tolist(), strict=True))


def composition(segments) -> dict[int, int]:
    out: Counter[int] = Counter()
    for cat, ns, *_ in segments:
        out[cat] += ns
    return {c: n for c, n in out.items() if n}


# --- pure-Python references -----------------------------------------------------------------


def ref_bind(g: Graph) -> tuple[list[int], list[int]]:
    """Each event's first predecessor edge with the largest t[src] + w, and t - that."""
    bind, delay = [], []
    for v in range(g.n):
        best, b = None, -1
        for e in g.preds(v):
            x = int(g.t[g.src[e]] + g.w[e])
            if best is None or x > best:
                best, b = x, e
        bind.append(b)
        delay.append(0 if b < 0 else int(g.t[v]) - best)
    return bind, delay


def ref_fixed_point(g: Graph, w: np.ndarray, delay: np.ndarray) -> list[int]:
    """Roots keep their time; every other event max(pred + w) + delay, iterated to a fixed
    point from the measured times (Bellman-Ford: n rounds suffice on a DAG)."""
    out = [int(x) for x in g.t]
    for _ in range(g.n + 1):
        changed = False
        for v in range(g.n):
            if len(g.preds(v)):
                x = max(out[g.src[e]] + int(w[e]) for e in g.preds(v)) + int(delay[v])
                if x != out[v]:
                    out[v], changed = x, True
        if not changed:
            return out
    raise AssertionError("no fixed point: the graph has a cycle")


def all_paths(g: Graph, end: int, stop: int):
    """Every path back from ``end`` to a root, as (length, composition clipped at ``stop``):
    length = the root's time + each edge's weight + each event's delay on the path; weights
    and delays laid on the time axis as the walk lays them and cut at ``stop``."""

    def clip(lo: int, hi: int) -> int:
        return max(0, hi - max(lo, stop))

    def back(v: int):
        if not len(g.preds(v)):
            yield int(g.t[v]), Counter({ROOT_CAT: clip(stop, int(g.t[v]))})
            return
        for e in g.preds(v):
            u = int(g.src[e])
            for length, comp in back(u):
                ready = int(g.t[u]) + int(g.w[e])
                c = Counter(comp)
                c[g.weight_cat(e, v)] += clip(int(g.t[u]), ready)
                c[g.delay_cat(e, v)] += clip(ready, ready + int(g.delay[v]))
                yield length + int(g.w[e]) + int(g.delay[v]), c

    for length, comp in back(end):
        yield length, {k: n for k, n in comp.items() if n}


def ref_walk(g: Graph, bind: list[int], end: int, stop: int) -> dict[int, int]:
    """The binding path from ``end``, its parts clipped at ``stop``: the walk's definition."""
    comp: Counter[int] = Counter()
    v = end
    while g.t[v] > stop:
        e = bind[v]
        if e < 0:
            comp[ROOT_CAT] += int(g.t[v]) - stop
            break
        u = int(g.src[e])
        ready = int(g.t[u] + g.w[e])
        comp[g.delay_cat(e, v)] += int(g.t[v]) - max(ready, stop)
        if ready <= stop:
            break
        comp[g.weight_cat(e, v)] += ready - max(int(g.t[u]), stop)
        v = u
    return {k: n for k, n in comp.items() if n}


# --- (a) topological order ------------------------------------------------------------------


@EXAMPLES
@given(dags())
def test_topological_order_is_a_permutation_with_every_edge_forward(g):
    order = core.topological_order(g.indptr, g.src, g.t)
    assert sorted(order.tolist()) == list(range(g.n))
    pos = np.empty(g.n, np.int64)
    pos[order] = np.arange(g.n)
    for v in range(g.n):
        for e in g.preds(v):
            assert pos[g.src[e]] < pos[v]


# --- (b) settle -----------------------------------------------------------------------------


@EXAMPLES
@given(dags())
def test_settle_binds_the_first_edge_achieving_the_max(g):
    _, bind, delay = solved(g)
    want_bind, want_delay = ref_bind(g)
    assert bind.tolist() == want_bind
    assert delay.tolist() == want_delay
    assert delay.tolist() == g.delay.tolist()  # the delays the times were generated with
    for v in range(g.n):
        if not len(g.preds(v)):
            assert bind[v] == -1 and delay[v] == 0
        else:
            assert g.preds(v).start <= bind[v] < g.preds(v).stop


# --- (c) replay -----------------------------------------------------------------------------


@EXAMPLES
@given(dags())
def test_identity_replay_reproduces_every_time(g):
    order, bind, delay = solved(g)
    assert core.replay(order, g.indptr, g.src, g.w, g.t, bind, delay).tolist() == g.t.tolist()


@EXAMPLES
@given(dags(), st.data())
def test_replay_with_less_time_is_never_later_and_is_the_fixed_point(g, data):
    order, bind, delay = solved(g)
    w = np.array([data.draw(st.integers(0, int(x))) for x in g.w], np.int64)
    d = np.array([data.draw(st.integers(0, int(x))) for x in delay], np.int64)
    out = core.replay(order, g.indptr, g.src, w, g.t, bind, d)
    assert (out <= g.t).all()
    assert out.tolist() == ref_fixed_point(g, w, d)


@EXAMPLES
@given(dags(), st.sampled_from([0.0, 0.5, 2.0]))
def test_replay_with_scaled_weights_is_the_fixed_point(g, factor):
    order, bind, delay = solved(g)
    w = np.rint(g.w * factor).astype(np.int64)
    out = core.replay(order, g.indptr, g.src, w, g.t, bind, delay)
    assert out.tolist() == ref_fixed_point(g, w, delay)
    if factor <= 1:
        assert (out <= g.t).all()


# --- (d) walk -------------------------------------------------------------------------------


@EXAMPLES
@given(dags(zero_delay=True), st.data())
def test_walk_is_a_longest_path_when_nothing_is_delayed(g, data):
    _, bind, _ = solved(g)
    end = data.draw(st.integers(0, g.n - 1))
    seg = walk(g, bind, end, 0)
    assert sum(s[1] for s in seg) == g.t[end]
    assert all(s[1] > 0 for s in seg)
    paths = list(all_paths(g, end, 0))
    longest = max(length for length, _ in paths)
    assert longest == g.t[end]  # the time is the longest path from a root's time
    assert composition(seg) in [c for length, c in paths if length == longest]
    assert composition(seg) == ref_walk(g, bind.tolist(), end, 0)


@EXAMPLES
@given(dags(), st.data())
def test_walk_adds_up_and_its_composition_is_a_longest_paths(g, data):
    _, bind, _ = solved(g)
    end = data.draw(st.integers(0, g.n - 1))
    stop = data.draw(st.integers(0, int(g.t[end]) + 5))
    seg = walk(g, bind, end, stop)
    assert sum(s[1] for s in seg) == max(0, int(g.t[end]) - stop)
    assert all(s[1] > 0 for s in seg) and all(s[3] == -1 for s in seg)
    paths = list(all_paths(g, end, stop))
    longest = max(length for length, _ in paths)
    assert longest == g.t[end]
    assert composition(seg) in [c for length, c in paths if length == longest]
    assert composition(seg) == ref_walk(g, bind.tolist(), end, stop)


def test_walk_categories_by_kind_hand_checked():
    # root a (t=10) -launch-> b start (t=25: weight 5, delay 10 of the host)
    # b start -duration 30-> b end (t=60: weight 30, delay 5 unexplained by kind 2)
    t = np.array([10, 0, 25, 60])  # events 0 (node 0), 2 and 3 (node 1); event 1 unused
    indptr, src, w, kind = csr(4, [(0, 2, 5, 6), (2, 3, 30, 2), (1, 3, 0, 0)])
    g = Graph(t, indptr, src, w, kind, np.array([0, 1]), np.array([-1, -1, 3, -1, -1, -1, 2, 2]),
              np.full(6, -1), np.zeros(4, np.int64))  # fmt: skip
    _, bind, _ = solved(g)
    assert composition(walk(g, bind, 3, 0)) == {1: 5 + 30, 3: 5, 2: 10, ROOT_CAT: 10}
    assert composition(walk(g, bind, 3, 40)) == {1: 15, 3: 5}
    assert composition(walk(g, bind, 3, 60)) == {}


# --- a collective across two ranks ----------------------------------------------------------

GEMM, TRANSFER, WAIT, UNEXPLAINED = 0, 1, 2, 3


def two_ranks() -> Graph:
    """Rank A: GEMM [0, 100), then its collective [100, 500). Rank B: GEMM [0, 300), its
    collective [300, 500). Barrier at B's arrival (300): A waits 200, both transfer 200.
    Nodes: 0 A's GEMM, 1 A's collective, 2 B's GEMM, 3 B's collective, 4 the barrier."""
    t = np.array([0, 100, 100, 500, 0, 300, 300, 500, 300, 300])
    dur, stream, coll = 0, 2, COLLECTIVE
    edges = [(0, 1, 100, dur), (1, 2, 0, stream), (2, 3, 200, dur), (9, 3, 200, coll),
             (4, 5, 300, dur), (5, 6, 0, stream), (6, 7, 200, dur), (9, 7, 200, coll),
             (2, 8, 0, coll), (6, 8, 0, coll), (8, 9, 0, dur)]  # fmt: skip
    edges.sort(key=lambda x: x[3])  # a destination's edges by kind, as the graph has them
    indptr, src, w, kind = csr(10, edges)
    wait_of = np.array([-1, WAIT, -1, -1, -1, -1])
    delay_of_kind = np.array([-1, UNEXPLAINED, UNEXPLAINED, UNEXPLAINED, UNEXPLAINED, -1, -1, -1])
    node_cat = np.array([GEMM, TRANSFER, GEMM, TRANSFER, TRANSFER])
    return Graph(t, indptr, src, w, kind, node_cat, delay_of_kind, wait_of, np.zeros(10, np.int64))


def test_two_ranks_graph_is_what_it_says():
    g = two_ranks()
    into = {v: sorted((int(g.src[e]), int(g.w[e]), int(g.kind[e])) for e in g.preds(v))
            for v in range(g.n)}  # fmt: skip
    assert into[3] == [(2, 200, 0), (9, 200, COLLECTIVE)]
    assert into[7] == [(6, 200, 0), (9, 200, COLLECTIVE)]
    assert into[8] == [(2, 0, COLLECTIVE), (6, 0, COLLECTIVE)]
    assert into[9] == [(8, 0, 0)]
    order, bind, delay = solved(g)
    assert (delay == 0).all()
    assert core.replay(order, g.indptr, g.src, g.w, g.t, bind, delay).tolist() == g.t.tolist()


def test_walk_without_follow_stays_on_the_rank_and_names_the_wait():
    g = two_ranks()
    _, bind, _ = solved(g)
    seg = walk(g, bind, 3, 0, follow=False)  # A's collective's end
    assert composition(seg) == {TRANSFER: 200, WAIT: 200, GEMM: 100}
    waits = [s for s in seg if s[0] == WAIT]
    assert waits == [(WAIT, 200, 3, 9)]  # at A's end, waiting for the barrier (event 9)
    assert all(s[3] == -1 for s in seg if s[0] != WAIT)
    # the last arrival waits for nobody
    assert composition(walk(g, bind, 7, 0, follow=False)) == {TRANSFER: 200, GEMM: 300}
    # clipped: from 150, A waited 150 of its 200
    assert composition(walk(g, bind, 3, 150, follow=False)) == {TRANSFER: 200, WAIT: 150}


def test_walk_with_follow_goes_on_at_the_last_arrival():
    g = two_ranks()
    _, bind, _ = solved(g)
    seg = walk(g, bind, 3, 0, follow=True)
    assert composition(seg) == {TRANSFER: 200, GEMM: 300}  # B's GEMM, not A's
    assert {s[2] for s in seg if s[0] == GEMM} == {5}  # B's GEMM's end
    assert all(s[3] == -1 for s in seg)


def test_replay_moves_the_waiter_with_the_last_arrival():
    g = two_ranks()
    order, bind, delay = solved(g)
    w = g.w.copy()
    w[(g.kind == 0) & (np.repeat(np.arange(g.n), np.diff(g.indptr)) == 5)] = 150  # B's GEMM
    out = core.replay(order, g.indptr, g.src, w, g.t, bind, delay)
    # B arrives at 150: the barrier moves to 150 (A arrived at 100), both end at 350
    assert out[[3, 7, 8]].tolist() == [350, 350, 150]


def test_walk_of_several_paths_at_once_is_each_path_alone():
    g = two_ranks()
    _, bind, _ = solved(g)
    ends, stops = np.array([3, 7, 3], np.int64), np.array([0, 0, 150], np.int64)
    path, cats, ns, at, peer = core.walk(ends, stops, g.t, g.src, g.w, g.kind, bind, g.node_cat,
                                         g.delay_of_kind, g.wait_of, ROOT_CAT, COLLECTIVE, False)
    for i in range(3):
        alone = walk(g, bind, int(ends[i]), int(stops[i]), follow=False)
        mine = path == i
        got = list(zip(cats[mine].tolist(), ns[mine].tolist(), at[mine].tolist(),
                       peer[mine].tolist(), strict=True))  # fmt: skip
        assert got == alone


# --- a cycle (zero-weight edges at one instant, as zero-length rows can make) ---------------


def cycle() -> Graph:
    """Event 0 (a root at 5), then events 1 and 2 at 5 each after the other (weight 0), and
    event 3 at 9 after event 2 (weight 4): a cycle the times cannot order."""
    t = np.array([5, 5, 5, 9])
    indptr, src, w, kind = csr(4, [(2, 1, 0, 2), (0, 1, 0, 2), (1, 2, 0, 2), (2, 3, 4, 0)])
    return Graph(t, indptr, src, w, kind, np.array([0, 1]), np.full(N_KINDS, -1),
                 np.full(6, -1), np.zeros(4, np.int64))  # fmt: skip


def test_a_cycle_binds_no_loop_and_replays_its_times():
    g = cycle()
    order, bind, delay = solved(g)
    assert sorted(order.tolist()) == [0, 1, 2, 3]
    pos = np.empty(4, np.int64)
    pos[order] = np.arange(4)
    for v in range(4):  # every binding edge comes from an earlier event: no loop to walk
        assert bind[v] == -1 or pos[g.src[bind[v]]] < pos[v]
    assert (delay >= 0).all()
    assert core.replay(order, g.indptr, g.src, g.w, g.t, bind, delay).tolist() == g.t.tolist()
    seg = walk(g, bind, 3, 0)  # ends (it looped forever when the cycle was bound both ways)
    assert sum(s[1] for s in seg) == 9


def test_zero_length_rows_at_one_instant_replay_exactly():
    # a zero-length stream sync returns at 100, released by a zero-length kernel that the
    # next call (at 100 too) launched: sync, host, launch and duration edges form a cycle
    from tests.depgraph.test_build import call, graph, kernel, sync

    g = graph(kernels=[kernel(100, 100, 2), kernel(150, 160, 3)],
              runtime=[call(100, 100, 1, "stream_sync"), call(100, 100, 2), call(120, 130, 3)],
              syncs=[sync(1, stream=7)])  # fmt: skip
    order = core.topological_order(g.indptr, g.src, g.t)
    bind, delay = core.settle(order, g.indptr, g.src, g.w, g.t)
    assert core.replay(order, g.indptr, g.src, g.w, g.t, bind, delay).tolist() == g.t.tolist()


def ref_order_with_cycles(n: int, edges: list[tuple[int, int]], t: list[int]) -> list[int]:
    """Kahn's order by hand (a FIFO queue, events in number order at the start and in edge
    order as they free up); where every held event waits on a cycle, the one earliest in
    time, then lowest in number, is released."""
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    by_dst = sorted(range(len(edges)), key=lambda i: edges[i][1])  # CSR order: by destination
    for i in by_dst:
        s, d = edges[i]
        indeg[d] += 1
    for v in range(n):  # successors in the order the CSR lists the edges (by destination)
        for i in by_dst:
            if edges[i][1] == v:
                succ[edges[i][0]].append(v)
    queue = [v for v in range(n) if indeg[v] == 0]
    order: list[int] = []
    while len(order) < n:
        while queue:
            u = queue.pop(0)
            order.append(u)
            for v in succ[u]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    queue.append(v)
        if len(order) < n:
            v = min((x for x in range(n) if indeg[x] > 0), key=lambda x: (t[x], x))
            indeg[v] = 0
            queue.append(v)
    return order


@EXAMPLES
@given(st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.lists(st.integers(0, 4), min_size=n, max_size=n))))  # fmt: skip
def test_topological_order_releases_the_earliest_held_event_of_a_cycle(case):
    """Graphs with cycles, self-loops and repeated edges (times that cannot order them): the
    order is Kahn's, and where a cycle holds every remaining event, the earliest (then
    lowest-numbered) is released; a released event's own loop takes its count below zero."""
    n, edges, t = case
    indptr, src, w, _ = csr(n, [(s, d, 0, 0) for s, d in edges])
    order = core.topological_order(indptr, src, np.array(t, np.int64))
    assert order.tolist() == ref_order_with_cycles(n, edges, t)
