"""The graph's hot loops, compiled (numba, cached on disk): a topological order, the identity
settle (each event's ready time and binding predecessor), the replay with changed weights,
and the backward walk that is the critical path. Each is one linear pass over events and
edges; the pure-Python references they are checked against live in the tests.

Events are numbered; edges are given as predecessor lists in CSR form (``indptr`` over
destination events, ``src`` and ``w`` per edge). An event's time is
``max(t[src] + w over its predecessors) + delay``; an event without predecessors (a *root*)
keeps its measured time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NO_EDGE = -1


@njit(cache=True, nogil=True)
def topological_order(indptr: np.ndarray, src: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Kahn's order of the events (predecessors first). Events left in a cycle (only possible
    among zero-weight edges at one instant, in inconsistent data) follow in time order."""
    n = indptr.size - 1
    m = src.size
    indeg = np.zeros(n, np.int64)
    out_count = np.zeros(n + 1, np.int64)
    for v in range(n):
        indeg[v] = indptr[v + 1] - indptr[v]
    for e in range(m):
        out_count[src[e] + 1] += 1
    for v in range(n):
        out_count[v + 1] += out_count[v]
    succ = np.empty(m, np.int64)
    fill = out_count[:-1].copy()
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
    while head < tail:
        u = order[head]
        head += 1
        for k in range(out_count[u], out_count[u + 1]):
            v = succ[k]
            indeg[v] -= 1
            if indeg[v] == 0:
                order[tail] = v
                tail += 1
    if tail < n:  # a cycle: the rest by time
        rest = np.empty(n - tail, np.int64)
        r = 0
        for v in range(n):
            if indeg[v] > 0:
                rest[r] = v
                r += 1
        rest = rest[np.argsort(t[rest], kind="mergesort")]
        order[tail:] = rest
    return order


@njit(cache=True, nogil=True)
def settle(order: np.ndarray, indptr: np.ndarray, src: np.ndarray, w: np.ndarray,
           t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each event's binding edge (the predecessor edge with the latest ``t[src] + w``; the
    first such in its list on a tie; -1 for a root) and its delay (``t - that``, the time
    nothing known explains; 0 for a root)."""
    n = indptr.size - 1
    bind = np.full(n, NO_EDGE, np.int64)
    delay = np.zeros(n, np.int64)
    for v in order:
        best = np.iinfo(np.int64).min
        b = NO_EDGE
        for e in range(indptr[v], indptr[v + 1]):
            x = t[src[e]] + w[e]
            if x > best:
                best = x
                b = e
        bind[v] = b
        if b != NO_EDGE:
            delay[v] = t[v] - best
    return bind, delay


@njit(cache=True, nogil=True)
def replay(order: np.ndarray, indptr: np.ndarray, src: np.ndarray, w: np.ndarray,
           t: np.ndarray, bind: np.ndarray, delay: np.ndarray) -> np.ndarray:  # fmt: skip
    """Every event's time when each starts as soon as its predecessors allow (weights ``w``),
    after its own measured delay; roots keep their measured time."""
    n = indptr.size - 1
    out = np.empty(n, np.int64)
    for v in order:
        if bind[v] == NO_EDGE:
            out[v] = t[v]
            continue
        best = np.iinfo(np.int64).min
        for e in range(indptr[v], indptr[v + 1]):
            x = out[src[e]] + w[e]
            if x > best:
                best = x
        out[v] = best + delay[v]
    return out


@njit(cache=True, nogil=True)
def walk(end: int, stop: int, t: np.ndarray, src: np.ndarray, w: np.ndarray,
         bind: np.ndarray, weight_cat: np.ndarray, delay_cat: np.ndarray,
         wait_edge: np.ndarray, wait_cat: np.ndarray, root_cat: int, follow: bool
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The critical path back from event ``end`` to time ``stop``: segments as parallel arrays
    (category, ns, the event they end at, the event a wait waited for or -1), each clipped at
    ``stop``; they add up to ``t[end] - stop``.

    Each step follows the binding edge: its weight is a segment of ``weight_cat[edge]``, the
    event's delay one of ``delay_cat[edge]``; a root before ``stop`` is ``root_cat``. An edge
    with ``wait_edge[e] >= 0`` is a collective's barrier (the last arrival, on another rank):
    with ``follow`` the path goes on at that rank; without, the time from the event's own
    start (event ``wait_edge[e]``) to the barrier is a wait (``wait_cat[e]``) and the path
    stays on the event's rank."""
    cap = 64
    cats = np.empty(cap, np.int64)
    ns = np.empty(cap, np.int64)
    at = np.empty(cap, np.int64)
    peer = np.empty(cap, np.int64)
    k = 0
    v = end
    while t[v] > stop:
        if k + 3 > cap:
            cap *= 2
            cats2 = np.empty(cap, np.int64)
            ns2 = np.empty(cap, np.int64)
            at2 = np.empty(cap, np.int64)
            peer2 = np.empty(cap, np.int64)
            cats2[:k] = cats[:k]
            ns2[:k] = ns[:k]
            at2[:k] = at[:k]
            peer2[:k] = peer[:k]
            cats, ns, at, peer = cats2, ns2, at2, peer2
        e = bind[v]
        if e == NO_EDGE:
            cats[k] = root_cat
            ns[k] = t[v] - stop
            at[k] = v
            peer[k] = -1
            k += 1
            break
        u = src[e]
        ready = t[u] + w[e]
        d = t[v] - max(ready, stop)
        if d > 0:
            cats[k] = delay_cat[e]
            ns[k] = d
            at[k] = v
            peer[k] = -1
            k += 1
        if ready <= stop:
            break
        lo = max(t[u], stop)
        if ready - lo > 0:
            cats[k] = weight_cat[e]
            ns[k] = ready - lo
            at[k] = v
            peer[k] = -1
            k += 1
        own = wait_edge[e]
        if own >= 0 and not follow:
            # stay on this rank: its own start to the barrier is the wait
            lo2 = max(t[own], stop)
            if t[u] - lo2 > 0:
                cats[k] = wait_cat[e]
                ns[k] = t[u] - lo2
                at[k] = v
                peer[k] = u
                k += 1
            v = own
        else:
            v = u
    return cats[:k], ns[:k], at[:k], peer[:k]
