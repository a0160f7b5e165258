"""The graph's hot loops, compiled (numba, cached on disk): a topological order, the identity
settle (each event's ready time and binding predecessor), the replay with changed weights,
the backward walk that is the critical path, and the linear scans that find stream and host
thread order. Each is one linear pass over events and edges; the pure-Python references they
are checked against live in the tests.

Events are numbered; edges are given as predecessor lists in CSR form (``indptr`` over
destination events, ``src`` and ``w`` per edge). An event's time is
``max(t[src] + w over its predecessors) + delay``; an event without predecessors (a *root*)
keeps its measured time.
"""

from __future__ import annotations

import numpy as np

from nsysmoe.jit import compiled as _compiled
from nsysmoe.jit import kernel as _kernel

NO_EDGE = -1
INT64_MIN = -(2**63)


def topological_order(indptr: np.ndarray, src: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Kahn's order of the events (predecessors first). Where a cycle stops it (only possible
    among zero-weight edges at one instant, in inconsistent data), its earliest held event is
    released (the first in time order, then by number) and the order goes on from there."""
    order = _topological_order(indptr, src, _NO_ORDER)
    if order.size == indptr.size - 1:  # no cycle: the usual case, no sort
        return order
    return _topological_order(indptr, src, np.argsort(t, kind="stable"))


_NO_ORDER = np.zeros(0, np.int64)


@_compiled
def _topological_order(indptr: np.ndarray, src: np.ndarray, by_time: np.ndarray) -> np.ndarray:
    """:func:`topological_order`, given the events in time order (sorted by numpy, outside:
    numba's sort costs seconds of compile time for a branch inconsistent data alone takes);
    without them (empty ``by_time``), the order up to where a cycle stops it."""
    n = indptr.size - 1
    m = src.size
    indeg = np.empty(n, np.int32)
    out_start = np.empty(n + 1, np.int64)
    for v in range(n + 1):
        out_start[v] = 0
    for v in range(n):
        indeg[v] = indptr[v + 1] - indptr[v]
    for e in range(m):
        out_start[src[e] + 1] += 1
    for v in range(n):
        out_start[v + 1] += out_start[v]
    succ = np.empty(m, np.int32)
    fill = np.empty(n, np.int64)  # a loop, not a slice copy: a fraction of the compile time
    for v in range(n):
        fill[v] = out_start[v]
    for v in range(n):
        for e in range(indptr[v], indptr[v + 1]):
            u = src[e]
            succ[fill[u]] = v
            fill[u] += 1
    order = np.empty(n, np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if indeg[v] == 0:
            order[tail] = v
            tail += 1
    f = 0  # events before by_time[f] are all released: a held event's count never grows
    while True:
        while head < tail:
            u = order[head]
            head += 1
            for k in range(out_start[u], out_start[u + 1]):
                v = succ[k]
                indeg[v] -= 1
                if indeg[v] == 0:
                    order[tail] = v
                    tail += 1
        if tail == n:
            break
        # a cycle (zero-weight edges at one instant, in inconsistent data) holds the rest:
        # release its earliest event and go on, so only the cycle's edges are broken
        if by_time.size == 0:
            return order[:tail]
        while indeg[by_time[f]] <= 0:
            f += 1
        v = by_time[f]
        indeg[v] = 0
        order[tail] = v
        tail += 1
    return order


@_compiled
def settle(order: np.ndarray, indptr: np.ndarray, src: np.ndarray, w: np.ndarray,
           t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each event's binding edge (the predecessor edge with the latest ``t[src] + w``; the
    first such in its list on a tie; -1 for a root) and its delay (``t - that``, the time
    nothing known explains; 0 for a root). An edge from an event later in ``order`` (a cycle's,
    possible only among zero-weight edges at one instant) is not followed: a binding edge
    always comes from an earlier event, so a walk back along them ends."""
    n = indptr.size - 1
    bind = np.empty(n, np.int64)
    delay = np.empty(n, np.int64)
    done = np.empty(n, np.bool_)
    for v in range(n):  # loops, not np.full / np.zeros: less to compile
        bind[v] = NO_EDGE
        delay[v] = 0
        done[v] = False
    for i in range(order.size):
        v = order[i]
        best = INT64_MIN
        b = NO_EDGE
        for e in range(indptr[v], indptr[v + 1]):
            if not done[src[e]]:
                continue
            x = t[src[e]] + w[e]
            if x > best:
                best = x
                b = e
        bind[v] = b
        if b != NO_EDGE:
            delay[v] = t[v] - best
        done[v] = True
    return bind, delay


@_compiled
def replay(order: np.ndarray, indptr: np.ndarray, src: np.ndarray, w: np.ndarray,
           t: np.ndarray, bind: np.ndarray, delay: np.ndarray) -> np.ndarray:  # fmt: skip
    """Every event's time when each starts as soon as its predecessors allow (weights ``w``),
    after its own measured delay; roots keep their measured time. Edges from events later in
    ``order`` are not followed (as in :func:`settle`)."""
    n = indptr.size - 1
    out = np.empty(n, np.int64)
    done = np.empty(n, np.bool_)
    for v in range(n):
        done[v] = False
    for i in range(order.size):
        v = order[i]
        done[v] = True
        if bind[v] == NO_EDGE:
            out[v] = t[v]
            continue
        best = INT64_MIN
        for e in range(indptr[v], indptr[v + 1]):
            if not done[src[e]]:
                continue
            x = out[src[e]] + w[e]
            if x > best:
                best = x
        out[v] = best + delay[v]
    return out


@_kernel
def _grow(a: np.ndarray, k: int) -> np.ndarray:
    if k < a.size:
        return a
    b = np.empty(2 * a.size, a.dtype)
    for i in range(a.size):  # a loop, not a slice assignment: a third of walk's compile time
        b[i] = a[i]
    return b


@_compiled
def walk(ends: np.ndarray, stops: np.ndarray, t: np.ndarray, src: np.ndarray, w: np.ndarray,
         kind: np.ndarray, bind: np.ndarray, node_cat: np.ndarray, delay_cat: np.ndarray,
         wait_cat: np.ndarray, root_cat: int, collective: int, follow: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The critical paths back from each event ``ends[i]`` to time ``stops[i]``, as segments
    in parallel arrays (path index, category, ns, the event each ends at, the event a wait
    waited for or -1), each clipped at its stop; a path's segments add up to
    ``t[end] - stop``.

    Each step follows the binding edge: its weight is a segment of the destination node's
    category (``node_cat``), the event's delay one of ``delay_cat[kind]`` (-1: the node's own
    category); a root after the stop is ``root_cat``. An edge of kind ``collective`` into an
    end event comes from a barrier (the last arrival, maybe on another rank): with ``follow``
    the path goes on at the barrier; without, the time from the event's own start to the
    barrier is a wait (``wait_cat`` of the node's category) and the path stays on its rank."""
    cap = 1024
    path = np.empty(cap, np.int64)
    cats = np.empty(cap, np.int64)
    ns = np.empty(cap, np.int64)
    at = np.empty(cap, np.int64)
    peer = np.empty(cap, np.int64)
    k = 0
    for i in range(ends.size):
        v = ends[i]
        stop = stops[i]
        while t[v] > stop:
            if k + 3 >= cap:
                cap *= 2
                path, cats, ns = _grow(path, cap), _grow(cats, cap), _grow(ns, cap)
                at, peer = _grow(at, cap), _grow(peer, cap)
            e = bind[v]
            if e == NO_EDGE:
                path[k], cats[k], ns[k], at[k], peer[k] = i, root_cat, t[v] - stop, v, -1
                k += 1
                break
            u = src[e]
            ready = t[u] + w[e]
            d = t[v] - max(ready, stop)
            cat = node_cat[v // 2]
            if d > 0:
                dc = delay_cat[kind[e]]
                path[k], cats[k], ns[k], at[k], peer[k] = i, cat if dc < 0 else dc, d, v, -1
                k += 1
            if ready <= stop:
                break
            lo = max(t[u], stop)
            if ready - lo > 0:
                path[k], cats[k], ns[k], at[k], peer[k] = i, cat, ready - lo, v, -1
                k += 1
            if kind[e] == collective and v % 2 == 1 and not follow:
                own = v - 1  # stay on this rank: its own start to the barrier is a wait
                lo2 = max(t[own], stop)
                if t[u] - lo2 > 0:
                    path[k], cats[k], ns[k], at[k], peer[k] = i, wait_cat[cat], t[u] - lo2, v, u
                    k += 1
                v = own
            else:
                v = u
    return path[:k], cats[:k], ns[:k], at[:k], peer[:k]


@_compiled
def thread_pairs(order: np.ndarray, group: np.ndarray, start: np.ndarray, end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Host thread order over calls sorted by (thread, start, longest first): each call's
    predecessor is the latest-ending earlier call of its thread; ``nested`` where that call
    was still running (the call is inside it)."""
    n = order.size
    a = np.empty(max(n - 1, 0), np.int64)
    b = np.empty(max(n - 1, 0), np.int64)
    nested = np.empty(max(n - 1, 0), np.bool_)
    k = 0
    top = -1
    for i in range(n):
        c = order[i]
        if i > 0 and group[c] != group[order[i - 1]]:
            top = -1
        if top >= 0:
            a[k] = top
            b[k] = c
            nested[k] = end[top] > start[c]
            k += 1
        if top < 0 or end[c] >= end[top]:
            top = c
    return a[:k], b[:k], nested[:k]


@_compiled
def by_destination(dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A stable counting sort of edges by destination event: the permutation, and ``indptr``
    (edges of event v at positions indptr[v]..indptr[v+1])."""
    indptr = np.empty(n + 1, np.int64)
    for v in range(n + 1):
        indptr[v] = 0
    for e in range(dst.size):
        indptr[dst[e] + 1] += 1
    for v in range(n):
        indptr[v + 1] += indptr[v]
    fill = np.empty(n, np.int64)
    for v in range(n):
        fill[v] = indptr[v]
    perm = np.empty(dst.size, np.int64)
    for e in range(dst.size):
        perm[fill[dst[e]]] = e
        fill[dst[e]] += 1
    return perm, indptr


def warm() -> None:
    """Load every compiled pass (from numba's disk cache, or compile it) on tiny inputs, so a
    thread can do it while the trace is still being classified."""
    indptr = np.array([0, 0, 1], np.int64)
    src = np.array([0], np.int32)
    t = np.array([0, 1], np.int64)
    w = np.array([1], np.int64)
    order = topological_order(indptr, src, t)
    bind, delay = settle(order, indptr, src, w, t)
    replay(order, indptr, src, w, t, bind, delay)
    kind = np.zeros(1, np.int8)
    cat = np.zeros(1, np.int16)
    walk(np.array([1], np.int64), np.array([0], np.int64), t, src, w, kind, bind, cat,
         np.array([-1], np.int64), np.array([-1], np.int64), 0, 1, True)
    thread_pairs(np.array([0, 1], np.int64), np.array([0, 0], np.int64), t, t + 1)
    by_destination(np.array([1], np.int64), 2)
