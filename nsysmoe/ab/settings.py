"""What each side of an A/B was run with, flattened to one ``{key: Setting}`` per side so two
sides diff key by key and ``--vary`` names a key: the contract settings of the command line
(:mod:`nsysmoe.measure.launch`), its other options and words, the environment, the versions
(nsys, driver, CUDA) and the capture's CUDA-graph trace mode.

Some differences bear not on performance (a job id, a port, an output path, the host name): they
are *incidental*, shown but never a contract break.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from nsysmoe.measure.launch import canonical, parse_argv
from nsysmoe.results import PERF_ENV, TraceAnalysis

Group = Literal["config", "option", "command", "environment", "version", "system", "capture",
                "host"]  # fmt: skip

#: options whose value names where output goes or what a run is called, not how it runs
INCIDENTAL_OPTION = re.compile(
    r"(?:^|[._])(?:save|load|log|logs|logging|wandb|tensorboard|name|dir|path|output|out|file"
    r"|tag|exp|experiment|project|notes|port|addr|address|host|rdzv_id|run_id|job_id)(?:$|[._])"
)
#: system facts (nsys TARGET_INFO_SYSTEM_ENV names; a Kineto trace's header is read into the
#: same names) -> (key, group): versions and the job's shape are compared; the host name is
#: incidental
SYSTEM: dict[str, tuple[str, Group]] = {
    "NvDriverVersion": ("driver", "version"),
    "CudaDriverVersion": ("cuda", "version"),
    "CudaRuntimeVersion": ("cuda_runtime", "version"),
    "NcclVersion": ("nccl_version", "version"),
    "OsDescription": ("os", "version"),
    "DistributedBackend": ("distributed_backend", "system"),
    "WorldSize": ("world_size", "system"),
    "Hostname": ("host", "host"),
}


@dataclass(frozen=True)
class Setting:
    """One thing a side was run with: its group, its value (None: not set) and whether a
    difference in it is incidental."""

    key: str
    group: Group
    value: str | None
    incidental: bool = False


def settings(a: TraceAnalysis) -> dict[str, Setting]:
    """Every setting of one side by key (secret values redacted at load:
    :func:`nsysmoe.io.redact.redact_trace`)."""
    out: dict[str, Setting] = {}
    options, words = parse_argv(a.launch.command)
    for name, value in options.items():
        if (key := canonical(name)) is not None:
            out[key] = Setting(key, "config", normal(value))
        else:
            out[name] = Setting(name, "option", normal(value),
                                bool(INCIDENTAL_OPTION.search(name)))  # fmt: skip
    if words:
        out["command"] = Setting("command", "command", " ".join(words))
    for name, value in a.launch.environment.items():
        out.setdefault(name, Setting(name, "environment", value, not PERF_ENV.search(name)))
    if a.source_format == "nsys" and a.product_version:
        out["nsys"] = Setting("nsys", "version", a.product_version)
    for name, (key, group) in SYSTEM.items():
        if name in a.launch.system:
            out[key] = Setting(key, group, a.launch.system[name], group == "host")
    if mode := a.graphs.recorded.get("MODE"):
        out["cuda_graph_trace"] = Setting("cuda_graph_trace", "capture", mode)
    return out


_BOOL = {"true": "true", "yes": "true", "on": "true",
         "false": "false", "no": "false", "off": "false"}  # fmt: skip


def normal(value: str) -> str:
    """A value in one spelling where spellings differ only in form (``True``/``true``/``1``)."""
    return _BOOL.get(value.strip().lower(), value)


def differing(off: dict[str, Setting], on: dict[str, Setting]) -> list[tuple[str, Setting]]:
    """(key, setting of either side) for every key whose values differ, in report order: config,
    options, command, environment, versions, capture, host; then by key."""
    order = ("config", "option", "command", "environment", "version", "system", "capture",
             "host")  # fmt: skip
    keys = [k for k in {**off, **on} if _value(off, k) != _value(on, k)]
    pairs = [(k, off.get(k) or on[k]) for k in keys]
    return sorted(pairs, key=lambda p: (order.index(p[1].group), p[0]))


def _value(side: dict[str, Setting], key: str) -> str | None:
    s = side.get(key)
    return None if s is None else s.value
