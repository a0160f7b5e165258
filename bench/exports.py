"""The benchmark's inputs: the A/B pair, its NVTX-light twin, the many-rank directory, the
scaling exports and the 8-GPU scale export.

Generated once by ``gen_exports.py`` and reused while their parameter sidecars match. The
sidecars live under ``WORK/meta/`` (one JSON per export, same relative path), never beside the
exports: ``analyze DIR`` must see rank files only.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from gen_exports import ExportParams, Job, ensure_many

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
LEFTOVERS = (".json", ".tmp")  # what older benches or interrupted runs left in a rank dir
#: the light twin records one PyTorch op range in this many: ~0.56 NVTX rows per kernel, the
#: density of the issue's held-out export (0.56M NVTX rows beside 1.1M kernels), where ``off``
#: records every op range (~3 per kernel, as with ``torch.autograd.profiler.emit_nvtx``)
LIGHT_OP_EVERY = 16


@dataclass(frozen=True)
class Sizes:
    processes: int
    kernels_per_process: int  # of the A/B pair ("off" is also one scaling point)
    layers: int
    ranks: int
    rank_kernels: int
    rank_layers: int
    scaling: tuple[int, ...]  # kernels per process of each scaling export
    #: the scale export (issue 35): LIGHT's generator and NVTX density on this many GPUs (one
    #: process each), this many kernels per process: a real 8-GPU capture of 10-20M kernels
    gpus: int = 8
    gpu_kernels: int = 1_000_000


FULL = Sizes(
    processes=2,
    kernels_per_process=500_000,
    layers=24,
    ranks=64,
    rank_kernels=20_000,
    rank_layers=4,
    scaling=(50_000, 250_000, 500_000, 1_000_000),
    gpus=8,
    gpu_kernels=1_000_000,
)
QUICK = Sizes(
    processes=2,
    kernels_per_process=20_000,
    layers=24,
    ranks=8,
    rank_kernels=4_000,
    rank_layers=4,
    scaling=(5_000, 10_000, 20_000, 40_000),
    gpus=8,
    gpu_kernels=20_000,
)


@dataclass(frozen=True)
class Exports:
    off: Path  # the big export, overlap off (the "analyze" input)
    light: Path  # ``off`` with one op range in LIGHT_OP_EVERY: same kernels, fewer NVTX rows
    on: Path  # the same run with overlap on
    rank_dir: Path  # exactly ``ranks`` rank files, nothing else
    ranks: list[Path]
    counts: dict[str, int]  # rows per table of ``off``
    light_counts: dict[str, int]  # rows per table of ``light``
    rank_kernels: int  # kernels in one rank file
    scaling: dict[Path, int]  # scaling export -> its kernel rows (``off`` among them)
    gpus: Path | None  # the 8-GPU scale export (None: not asked for)
    gpu_count: int  # its processes (one GPU each)
    gpus_counts: dict[str, int]  # rows per table of ``gpus``
    generated: int  # files generated this time
    seconds: float  # time spent generating / checking


def _meta(work: Path, path: Path) -> Path:
    return work / "meta" / path.relative_to(work).with_suffix(".json")


def _clean_rank_dir(rank_dir: Path, ranks: list[Path]) -> None:
    """Remove what an older bench left beside the rank files; refuse anything else."""
    wanted = {p.name for p in ranks}
    for entry in rank_dir.iterdir():
        if entry.name in wanted:
            continue
        if entry.is_file() and entry.suffix in LEFTOVERS:
            entry.unlink()
            continue
        sys.exit(f"{rank_dir} holds {entry.name}, which is not a rank export: remove it")


def make_exports(sizes: Sizes, work: Path, scale: bool = True) -> Exports:
    """Generate (or reuse) every input, two files at a time (``scale``: also the 8-GPU one)."""
    big = ExportParams(
        processes=sizes.processes,
        kernels_per_process=sizes.kernels_per_process,
        layers=sizes.layers,
        dispatcher="hybridep",
        overlap=False,
        seed=4,
    )
    off, on, light = (work / f"moe-{x}.sqlite" for x in ("off", "on", "light"))
    rank_dir = work / f"ranks{sizes.ranks}"
    rank_dir.mkdir(parents=True, exist_ok=True)
    ranks = [rank_dir / f"rank{r:02d}.sqlite" for r in range(sizes.ranks)]
    jobs: list[Job] = [
        (off, big, _meta(work, off)),
        (on, replace(big, overlap=True), _meta(work, on)),
        (light, replace(big, op_every=LIGHT_OP_EVERY), _meta(work, light)),
    ]
    for r, path in enumerate(ranks):
        rank = ExportParams(
            processes=1,
            kernels_per_process=sizes.rank_kernels,
            layers=sizes.rank_layers,
            dispatcher="deepep",
            overlap=True,
            seed=100 + r,
            first_pid=1_400_000 + 211 * r,
            first_device=r % 8,
        )
        jobs.append((path, rank, _meta(work, path)))
    scale_paths = []
    for per_process in sizes.scaling:
        if per_process == sizes.kernels_per_process:
            scale_paths.append(off)  # same generator, same parameters: the same file
            continue
        path = work / "scale" / f"kernels{per_process * sizes.processes}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        scale_paths.append(path)
        jobs.append((path, replace(big, kernels_per_process=per_process), _meta(work, path)))
    gpus = work / "gpus" / f"moe-{sizes.gpus}gpu.sqlite" if scale else None
    if gpus is not None:
        gpus.parent.mkdir(parents=True, exist_ok=True)
        many = replace(big, processes=sizes.gpus, kernels_per_process=sizes.gpu_kernels,
                       op_every=LIGHT_OP_EVERY)  # fmt: skip
        jobs.append((gpus, many, _meta(work, gpus)))
    t0 = time.perf_counter()
    made = ensure_many(jobs, workers=min(2, os.cpu_count() or 1))
    counts = {path: c for (path, _, _), (_, c) in zip(jobs, made, strict=True)}
    _clean_rank_dir(rank_dir, ranks)
    return Exports(
        off=off,
        on=on,
        light=light,
        rank_dir=rank_dir,
        ranks=ranks,
        counts=counts[off],
        light_counts=counts[light],
        rank_kernels=counts[ranks[0]][KERNELS],
        scaling={p: counts[p][KERNELS] for p in scale_paths},
        gpus=gpus,
        gpu_count=sizes.gpus,
        gpus_counts=counts[gpus] if gpus is not None else {},
        generated=sum(g for g, _ in made),
        seconds=time.perf_counter() - t0,
    )
