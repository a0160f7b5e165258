"""A 1 GB console log parses in a child process in under 1 GiB of resident memory: the reader
streams (bounded chunks, per-chunk polars filters), it never reads the file whole."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

GIB = 1024**3
BLOCKS = 1000  # of ~1 MiB noise each, plus LINES_PER_BLOCK iteration lines
LINES_PER_BLOCK = 50
NOISE = "".join(
    f"[default{i % 8}]: INFO:megatron.core.something:step helper {i} did this and that, "
    f"nothing to see (iteration-free text padded to a realistic length) {'x' * (i % 40)}\n"
    for i in range(6000)
).encode()
RECORD = (
    "[default7]: [2025-01-01 10:00:00.000000] iteration {i:8d}/{total:8d} | consumed samples: "
    "{samples:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU "
    "(TFLOP/s/GPU): 250.0 | learning rate: 1.000000E-04 | global batch size:    32 | "
    "lm loss: 5.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)


def iteration_line(i: int) -> bytes:
    """Megatron-LM's training_log() line (its format strings) for iteration i: 500 + i % 7 ms."""
    return RECORD.format(i=i, total=10**8, samples=i * 32, ms=500 + i % 7).encode()


def write_big_log(path: Path) -> int:
    """~1 GB of mostly noise with BLOCKS * LINES_PER_BLOCK iteration lines; its size."""
    i = 0
    with path.open("wb") as out:
        for _ in range(BLOCKS):
            out.write(NOISE)
            lines = []
            for _ in range(LINES_PER_BLOCK):
                i += 1
                lines.append(iteration_line(i))
            out.write(b"".join(lines))
    return path.stat().st_size


def test_one_gigabyte_log_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    size = write_big_log(path)
    assert size > 0.95 * 10**9
    code = (
        "import resource, sys\n"
        "from nsysmoe.io.logs import read_log\n"
        "log = read_log(sys.argv[1])\n"
        "print(log.table.height, log.table['step_s'].sum(), log.rank,"
        " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    height, total, rank, own_kib = done.stdout.split()
    lines = BLOCKS * LINES_PER_BLOCK
    assert int(height) == lines and rank == "[default7]"
    want = sum((500 + i % 7) / 1000 for i in range(1, lines + 1))  # plain Python, independent
    assert abs(float(total) - want) < 1e-6
    assert int(own_kib) * 1024 < GIB
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 < GIB
