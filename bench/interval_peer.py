"""The interval part of the overlap analysis, two ways, on the same arrays: PyPI ``intervaltree``
and nsysmoe's numpy :class:`~nsysmoe.intervals.IntervalSet`.

    python bench/interval_peer.py EXPORT.sqlite     (intervaltree importable, e.g. PYTHONPATH)

Per GPU = (pid, device): comm = kernels nsysmoe classifies as communication, compute = every
other kernel (as ``nsysmoe.measure.overlap``). Both sides compute |⋃comm|, |⋃compute| and
|⋃comm ∩ ⋃compute| from the kernel start/end arrays nsysmoe's reader returns; the answers are
asserted equal and one JSON object with both times (seconds, interval work only) is printed.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import polars as pl
from intervaltree import IntervalTree
from numpy.typing import NDArray

from nsysmoe.classify import classify, default_rules
from nsysmoe.intervals import IntervalSet
from nsysmoe.io import load_trace

Pair = tuple[NDArray[np.int64], NDArray[np.int64]]


def with_intervalset(comm: Pair, compute: Pair) -> tuple[int, int, int]:
    c = IntervalSet.from_arrays(*comm)
    k = IntervalSet.from_arrays(*compute)
    return c.length, k.length, c.intersect_length(k)


def with_intervaltree(comm: Pair, compute: Pair) -> tuple[int, int, int]:
    """The textbook way: build trees, merge overlapping and touching intervals (a union),
    then query the compute tree with each merged comm interval."""

    def union(pair: Pair) -> IntervalTree:
        starts, ends = pair[0].tolist(), pair[1].tolist()
        tree = IntervalTree.from_tuples((s, e) for s, e in zip(starts, ends, strict=True) if e > s)
        tree.merge_overlaps(strict=False)
        return tree

    c, k = union(comm), union(compute)
    hidden = 0
    for iv in c:
        for other in k.overlap(iv.begin, iv.end):
            hidden += min(iv.end, other.end) - max(iv.begin, other.begin)
    return sum(iv.length() for iv in c), sum(iv.length() for iv in k), hidden


def main() -> None:
    trace = load_trace(sys.argv[1])
    kernels = classify(trace.kernels, default_rules())
    gpus = []
    for (pid, device), part in sorted(kernels.partition_by("pid", "device", as_dict=True).items()):
        is_comm = part["class"] == "comm"
        comm = (part.filter(is_comm)["start"].to_numpy(), part.filter(is_comm)["end"].to_numpy())
        other = part.filter(~is_comm)
        compute = (other["start"].to_numpy(), other["end"].to_numpy())
        gpus.append((pid, device, comm, compute))
    timings = {}
    answers = {}
    for name, fn in (("intervalset", with_intervalset), ("intervaltree", with_intervaltree)):
        t0 = time.perf_counter()
        answers[name] = [fn(comm, compute) for _, _, comm, compute in gpus]
        timings[name] = time.perf_counter() - t0
    assert answers["intervalset"] == answers["intervaltree"], answers
    print(
        json.dumps(
            {
                "seconds": timings,
                "kernels": int(kernels.height),
                "gpus": [
                    {
                        "pid": int(p),
                        "device": int(d),
                        "comm_ns": a[0],
                        "compute_ns": a[1],
                        "hidden_ns": a[2],
                    }
                    for (p, d, _, _), a in zip(gpus, answers["intervalset"], strict=True)
                ],
                "polars": pl.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
