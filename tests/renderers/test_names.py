"""Shortened kernel names stay distinct: properties on any names, and the real kernel names of
the shipped examples and the shared traces (where cutting every name at one column made rows
print identically)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nsysmoe import api
from nsysmoe.renderers.names import ELLIPSIS, MIN_WIDTH, distinct
from tests.conftest import require_shared

#: names built from the pieces C++ kernel names are made of, so that many share long starts
PIECES = ["void ", "k", "ker<", ">", "(int)", "1", "2", "128", ", ", "(bool)0", "(bool)1",
          "::", "at::native::", "_", "x", " ", "(", ")"]  # fmt: skip
names_st = st.lists(
    st.one_of(
        st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
        st.text(alphabet="ab<>,( )_:", max_size=120),
    ),
    max_size=40,
)

HYBRID_ON = ("void hybrid_ep::dispatch_kernel<unsigned short, (int)8, (int)2048, (int)128, "
             "(int)16, (int)8, (int)1, (bool)1, (bool)1>(hybrid_ep::dispatch_kernel_param_t"
             "<unsigned short>)")  # fmt: skip
HYBRID_OFF = HYBRID_ON.replace("(bool)1, (bool)1", "(bool)0, (bool)0")


def _pieces_in_order(short: str, name: str) -> bool:
    """``short`` is ``name`` with runs left out: its pieces between "…" occur in ``name`` in
    order, the first at its start."""
    pos = 0
    for k, piece in enumerate(short.split(ELLIPSIS)):
        at = name.find(piece, pos)
        if at < 0 or (k == 0 and at != 0):
            return False
        pos = at + len(piece)
    return True


@settings(max_examples=400, deadline=None)
@given(names=names_st, width=st.integers(MIN_WIDTH, 90))
@example(names=[HYBRID_ON, HYBRID_OFF], width=80)
@example(names=["a" * 20, "a" * 19 + ELLIPSIS, "a" * 21], width=20)  # an output clashing a name
def test_distinct_names_stay_distinct(names: list[str], width: int) -> None:
    out = distinct(names, width)
    assert len(out) == len(names)
    assert all(len(s) <= width for s in out)
    assert len(set(out)) == len(set(names))  # distinct in, distinct out; equal in, equal out
    pairs = dict(zip(names, out, strict=True))
    for name, short in pairs.items():
        if len(name) <= width:
            assert short == name  # names that fit are unchanged
        elif f"{ELLIPSIS}#" not in short:
            assert _pieces_in_order(short, name), (name, short)  # only elided, never rewritten
    shuffled = list(names)
    random.Random(width).shuffle(shuffled)
    assert distinct(shuffled, width) == [pairs[n] for n in shuffled]  # the set decides, not order
    assert distinct(names, width) == out  # deterministic


@given(names=st.lists(st.text(max_size=30), max_size=20), width=st.integers(1, MIN_WIDTH))
def test_narrow_widths_still_fit(names: list[str], width: int) -> None:
    assert all(len(s) <= width for s in distinct(names, width))


def test_width_must_be_positive() -> None:
    with pytest.raises(ValueError, match="width"):
        distinct(["x"], 0)


def test_template_instantiations_differing_deep_inside() -> None:
    """The two HybridEP dispatch kernels of the examples: the same first 100 characters."""
    off, on = distinct([HYBRID_OFF, HYBRID_ON], 80)
    assert off != on and off.startswith("void hybrid_ep::dispatch_kernel<unsigned short")
    assert "(bool)0, (bool)0" in off and "(bool)1, (bool)1" in on
    assert off.replace("(bool)0, (bool)0", "") == on.replace("(bool)1, (bool)1", "")
    narrow = distinct([HYBRID_OFF, HYBRID_ON], 40)
    assert len(set(narrow)) == 2 and all(s.startswith("void hybrid_ep::") for s in narrow)


def _check_real(names: list[str]) -> None:
    for width in (30, 60, 80):
        out = distinct(names, width)
        assert len(set(out)) == len(set(names)), width
        assert all(len(s) <= width for s in out)
        assert not [s for s in out if f"{ELLIPSIS}#" in s], width  # told apart by their text
        for name, short in zip(names, out, strict=True):
            assert _pieces_in_order(short, name)
            assert short.startswith(name[:12])  # the start (the kernel's base name) first


def test_example_kernel_names() -> None:
    for path in api.example_paths():
        names = api.kernel_summary(path)["name"].to_list()
        naive = {n[:79] for n in names}
        assert len(naive) < len(names)  # a single cut made two rows the same
        _check_real(names)


def test_real_trace_kernel_names() -> None:
    nsys = require_shared() / "nsys"
    paths = sorted(Path(nsys).glob("*.sqlite"))
    assert paths
    for path in paths:
        _check_real(api.kernel_summary(path)["name"].to_list())
