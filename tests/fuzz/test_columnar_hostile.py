"""Hostile Parquet and Arrow export folders (issue 37): a table that is not Parquet, cut short,
of the wrong column types, empty, a link to nothing or to a FIFO, a folder of 10,000 files, both
kinds mixed. Each is held to the promises (tests/fuzz/harness.py): one stderr line and exit 2 (or
a right answer), no traceback, no hang, nothing changed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from nsysmoe.io import nsys_db
from tests.fixtures.columnar import to_columnar
from tests.fuzz.harness import Case, hold

EXAMPLE = sorted((Path(nsys_db.__file__).parents[1] / "examples").glob("*.sqlite"))[0]
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("columnar-bases")
    return {kind: to_columnar(EXAMPLE, d / f"base_{kind}", kind) for kind in ("parquet", "arrow")}


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / src.name
    shutil.copytree(src, dst)
    return dst


def _table(folder: Path, name: str) -> Path:
    return next(folder.glob(f"{name}.*"))


def _rewrite(name: str, edit: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = _table(folder, name)
        read = pl.read_parquet if path.suffix == ".parquet" else pl.read_ipc_stream
        df = edit(read(path))
        if path.suffix == ".parquet":
            df.write_parquet(path)
        else:
            df.write_ipc_stream(path)

    return apply


def _bytes(name: str, how: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = _table(folder, name)
        path.write_bytes(how(path.read_bytes()))

    return apply


def _many_files(folder: Path) -> None:
    for i in range(10_000):
        (folder / f"junk{i:05d}.txt").write_bytes(b"")


def _dangling(folder: Path) -> None:
    path = _table(folder, "TARGET_INFO_GPU")
    path.unlink()
    path.symlink_to(folder / "nowhere")


def _loop(folder: Path) -> None:
    path = _table(folder, "TARGET_INFO_GPU")
    path.unlink()
    path.symlink_to(path)


def _fifo(folder: Path) -> None:
    path = _table(folder, "TARGET_INFO_GPU")
    path.unlink()
    os.mkfifo(path)


def _mixed(folder: Path) -> None:
    (folder / "EXTRA.arrow" if next(folder.iterdir()).suffix == ".parquet"
     else folder / "EXTRA.parquet").write_bytes(b"x")  # fmt: skip


def _empty_kernels(folder: Path) -> None:
    _rewrite(KERNEL, lambda df: df.clear())(folder)


def _no_kernel_column(folder: Path) -> None:
    _rewrite(KERNEL, lambda df: df.drop("demangledName"))(folder)


def _no_string_ids(folder: Path) -> None:
    _table(folder, "StringIds").unlink()


def _symlinked_table_works(folder: Path) -> None:
    """A table linked from elsewhere is read as the file it points to (not refused)."""
    path = _table(folder, "StringIds")
    real = folder.parent / ("real" + path.suffix)
    path.rename(real)
    path.symlink_to(real)


MUTATIONS: dict[str, tuple[Callable[[Path], None], str | None, frozenset[int]]] = {
    "not-the-format": (_bytes(KERNEL, lambda b: b"not parquet, not arrow" * 20),
                       r"CUPTI_ACTIVITY_KIND_KERNEL\.\w+: unreadable", frozenset({2})),
    "cut-in-half": (_bytes(KERNEL, lambda b: b[: len(b) // 2]), r"unreadable", frozenset({2})),
    "cut-to-nothing": (_bytes(KERNEL, lambda b: b""), r"unreadable", frozenset({2})),
    "start-as-float": (_rewrite(KERNEL, lambda df: df.with_columns(pl.col("start").cast(
        pl.Float64))), r"column start holds Float64 values", frozenset({2})),
    "start-as-text": (_rewrite(KERNEL, lambda df: df.with_columns(pl.col("start").cast(
        pl.String))), r"column start holds String values", frozenset({2})),
    "text-as-number": (_rewrite("StringIds", lambda df: df.with_columns(pl.col("value").str
        .len_bytes())), r"column value holds \w+ values where nsys writes text", frozenset({2})),
    "empty-kernels": (_empty_kernels, r"no CUDA kernel|no kernel", frozenset({2})),
    "no-kernel-name-column": (_no_kernel_column, r"has no column demangledName", frozenset({2})),
    "no-string-ids": (_no_string_ids, r"not an Nsight Systems export", frozenset({2})),
    "10k-other-files": (_many_files, None, frozenset({0})),
    "dangling-link": (_dangling, r"TARGET_INFO_GPU.*broken link", frozenset({2})),
    "link-loop": (_loop, r"TARGET_INFO_GPU", frozenset({2})),
    "fifo-table": (_fifo, r"TARGET_INFO_GPU.* not a regular file", frozenset({2})),
    "both-kinds": (_mixed, r"holds both \.parquet and \.arrow", frozenset({2})),
    "linked-table": (_symlinked_table_works, None, frozenset({0})),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_hostile_columnar_export(mutation: str, kind: str, base: dict[str, Path],
                                 tmp_path: Path) -> None:  # fmt: skip
    apply, error, codes = MUTATIONS[mutation]
    folder = _copy(base[kind], tmp_path)
    apply(folder)
    inputs = tuple(p for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    hold(Case(f"{mutation}/{kind}", ("analyze", str(folder), "--format", "json", "-o",
                                     str(tmp_path / "out.json")),
              inputs=inputs, codes=codes, expect_error=error,
              subprocess=mutation == "fifo-table"))  # fmt: skip


def test_a_folder_of_ranks_with_a_damaged_parquet_rank_says_which(
    base: dict[str, Path], tmp_path: Path
) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    good = _copy(base["parquet"], ranks)
    good.rename(ranks / "rank0_pqtdir")
    bad = _copy(base["parquet"], tmp_path)
    _bytes(KERNEL, lambda b: b[:100])(bad)
    bad.rename(ranks / "rank1_pqtdir")
    got = hold(Case("ranks", ("analyze", str(ranks), "--format", "json"),
                    codes=frozenset({0, 1, 2})))
    assert "rank1_pqtdir" in got.err
