"""``nsysmoe analyze`` without the SM budget (issue 38): the same command line, run in this
process with the SM budget and inflation measure replaced by an empty one — the baseline of
their cost (the reader's launch-shape columns stay read: the 'reader alone' rows hold them).

    python bench/without_sm_budget.py analyze EXPORT --format json -o /dev/null
"""

from __future__ import annotations

import sys

from nsysmoe import pipeline
from nsysmoe.cli import main
from nsysmoe.measure.sm_budget import SmPart

if __name__ == "__main__":
    pipeline.measure_sm = lambda *args, **kwargs: SmPart.none()  # type: ignore[assignment]
    sys.argv = ["nsysmoe", *sys.argv[1:]]
    main()
