"""What the log-reader tests check of every refusal: one line, starting with the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsysmoe.errors import NsysmoeError
from nsysmoe.io.logs import read_log


def one_line(path: Path) -> str:
    """read_log's error on ``path``: asserted one line, path first; returned for its words."""
    with pytest.raises(NsysmoeError) as err:
        read_log(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message
