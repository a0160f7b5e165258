"""Compatibility modes: other tools' conventions reproduced on nsysmoe's canonical tables, so a
user holding both tools' numbers can see where and why they differ."""

from nsysmoe.peers.hta import (
    HTA_CONVENTIONS,
    compat_analysis,
    hta_kernels,
    hta_overlap,
    profiler_step_names,
)
from nsysmoe.peers.hta_conventions import HTA_VERSION

__all__ = [
    "HTA_CONVENTIONS",
    "HTA_VERSION",
    "compat_analysis",
    "hta_kernels",
    "hta_overlap",
    "profiler_step_names",
]
