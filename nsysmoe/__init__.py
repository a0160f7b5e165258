"""nsysmoe: how much MoE communication the compute hid, from Nsight Systems exports.

``import nsysmoe`` gives the API at the top level — ``nsysmoe.load``, ``nsysmoe.analyze``,
``nsysmoe.compare``, ``nsysmoe.render`` … (the functions of :mod:`nsysmoe.api`) — loaded on first
use, so importing the package (and ``nsysmoe --help``) stays cheap and no module below imports
the package root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nsysmoe._version import __version__

_API = ("accept", "analyze", "analyze_many", "compare", "compare_many", "compat",
        "dependency_graph", "example_paths", "figure_svgs", "figures", "kernel_summary", "load",
        "plot", "read_log", "render", "sweep")  # fmt: skip
_MODEL = ("STEADY", "WHOLE", "Iterations", "Scope", "Whole", "Window")

if TYPE_CHECKING:
    from nsysmoe.api import (
        accept,
        analyze,
        analyze_many,
        compare,
        compare_many,
        compat,
        dependency_graph,
        example_paths,
        figure_svgs,
        figures,
        kernel_summary,
        load,
        plot,
        read_log,
        render,
        sweep,
    )
    from nsysmoe.model import STEADY, WHOLE, Iterations, Scope, Whole, Window


def __getattr__(name: str) -> Any:
    if name in _API:
        from nsysmoe import api

        return getattr(api, name)
    if name in _MODEL:
        from nsysmoe import model

        return getattr(model, name)
    raise AttributeError(f"module 'nsysmoe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, *_MODEL])


__all__ = [  # the API first, then the model types
    "__version__", "accept", "analyze", "analyze_many", "compare", "compare_many", "compat",
    "dependency_graph",
    "example_paths", "figure_svgs", "figures", "kernel_summary", "load", "plot", "read_log",
    "render", "sweep",
    "STEADY", "WHOLE", "Iterations", "Scope", "Whole", "Window",
]  # fmt: skip
