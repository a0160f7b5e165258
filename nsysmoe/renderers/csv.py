"""CSV, for tables a spreadsheet reads: the kernel audit table."""

from __future__ import annotations

from nsysmoe.errors import NsysmoeError
from nsysmoe.results import KernelSummary


def render_csv(result: object) -> str:
    if not isinstance(result, KernelSummary):
        raise NsysmoeError("--format csv is for `nsysmoe kernels`; use json for analyses")
    return result.shown.write_csv()
