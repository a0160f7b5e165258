r"""Kernel-name classification: communication vs GEMM/attention vs other compute.

Why a rule table and not code: real traces keep showing kernel names nobody listed (DeepSeek's
internal ``dpsk::ep::`` DeepEP build, cuDNN convolutions, generated fusions), so the rules live in
an ordered TOML file (``nsysmoe/rules/default.toml``) that users extend without editing code, and
anything no rule recognises stays visibly ``other``/``unclassified`` instead of being folded into a
real class. First matching rule wins; a pattern is searched anywhere in the demangled kernel name.

Patterns use the syntax of Rust's ``regex`` crate (polars' engine), which matches in time linear in
the name for any pattern: trace text is hostile, and a backtracking engine (Python's ``re``) takes
minutes on one 100k-character name with a rule as plain as ``\w+_copy_kernel_cuda``. The price is
no look-around and no back-references; a rule using them is refused when it is loaded.

CUDA graphs: a whole-graph row (nsys ``--cuda-graph-trace=graph``: one row per replay, named
``[CUDA graph N]``) has unknown contents, so no name says what it did. It gets the class ``graph``
(compute, for every overlap figure) unless a rule names it, usually by the NVTX range around its
``cudaGraphLaunch``: a rule's ``nvtx`` key is a pattern searched in the names of the ranges that
enclose the launching call on its thread, and the rule matches only launches inside one.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import polars as pl

from nsysmoe.enclosing import enclosing_pairs
from nsysmoe.errors import NsysmoeError
from nsysmoe.model import ClassifiedTrace, Trace

RuleClass = Literal["comm", "gemm", "attention", "moe_glue", "elementwise", "other"]
RULE_CLASSES: tuple[RuleClass, ...] = get_args(RuleClass)
"""The classes a rule can give; ``comm`` is what overlap analyses intersect with compute."""
GRAPH: Literal["graph"] = "graph"
GRAPH_SUBCLASS = "contents unknown"
"""Class and subclass of a whole-graph row no rule names (counted as compute)."""
KernelClass = RuleClass | Literal["graph"]
CLASSES: tuple[KernelClass, ...] = (*RULE_CLASSES, GRAPH)
"""Every class a kernel-table row can have."""

COMPUTE_GEMM_ATTN: tuple[str, ...] = ("gemm", "attention")
"""The "matrix math" subset of compute that the EP-overlap table reports separately."""

UNCLASSIFIED: tuple[str, str] = ("other", "unclassified")
OTHER_CHANNEL = "other"
"""The channel of a communication kernel whose rule names none."""
"""Class/subclass of a name that no rule matched (so a rule file needs no catch-all)."""

MAX_RULES_BYTES = 1 << 20  # a rule file is a few KiB of TOML
_PROBE = pl.Series([""], dtype=pl.String)  # compiles a pattern without any name to match
_RULE_KEYS = {"class", "subclass", "pattern", "nvtx", "channel", "note"}
_REQUIRED_KEYS = ("class", "subclass")
_FORMAT_HINT = "see nsysmoe/rules/default.toml for the format"
#: patterns known to compile (a rule table's are checked together, in one query, first)
_COMPILED: set[str] = {""}


def _precompile(patterns: Iterable[str]) -> None:
    """Check many patterns in one query (a hundred single checks cost a tenth of a second); on
    any failure none is marked, and each rule's own check names the bad one."""
    todo = sorted(set(patterns) - _COMPILED)
    if not todo:
        return
    try:
        pl.select(pl.lit("").str.contains(p).alias(str(i)) for i, p in enumerate(todo))
    except pl.exceptions.PolarsError:
        return
    _COMPILED.update(todo)


@dataclass(frozen=True)
class Rule:
    """One row of the rule table; validated at construction.

    Raises NsysmoeError (without a file name; the loader adds it) for an unknown class or a
    pattern the regex engine cannot compile, so a bad rule fails at load time, not mid-analysis.
    """

    klass: RuleClass
    subclass: str
    pattern: str
    note: str = ""
    #: a pattern for the name of an NVTX range enclosing the launching call; "" = any launch
    nvtx: str = ""
    #: communication only: what the kernel moves (``ep.dispatch``, ``nccl.allreduce``, ...);
    #: "" = :data:`OTHER_CHANNEL`
    channel: str = ""

    def __post_init__(self) -> None:
        if self.channel and self.klass != "comm":
            raise NsysmoeError(f"channel {self.channel!r} on a {self.klass} rule; only comm "
                               "rules name a channel")  # fmt: skip
        if self.klass == GRAPH:
            raise NsysmoeError(
                "class 'graph' is given to whole-graph rows no rule names; a rule says what a "
                f"graph holds instead: one of {', '.join(RULE_CLASSES)}"
            )
        if self.klass not in RULE_CLASSES:
            raise NsysmoeError(
                f"unknown class {self.klass!r}; use one of {', '.join(RULE_CLASSES)}"
            )
        if not self.pattern and not self.nvtx:
            raise NsysmoeError("give a pattern (kernel name), an nvtx pattern, or both")
        for key, value in (("pattern", self.pattern), ("nvtx", self.nvtx)):
            if value in _COMPILED:
                continue
            try:
                _PROBE.str.contains(value)
            except pl.exceptions.PolarsError as exc:
                reason = regex_error(exc)
                raise NsysmoeError(
                    f"{key} {value!r} is not a valid regex ({reason}); fix or escape it "
                    "(Rust regex syntax: no look-around or back-references)"
                ) from None

    def search(self, names: pl.Series) -> pl.Series:
        """Whether the pattern occurs in each name (linear time in the name's length)."""
        return names.str.contains(self.pattern)


@dataclass(frozen=True)
class RuleSet:
    """An ordered rule table plus where it came from (reports cite ``source``)."""

    rules: tuple[Rule, ...]
    source: str


def regex_error(exc: Exception) -> str:
    """The regex engine's own one-line reason (``unclosed group``) from a polars error."""
    lines = [ln.strip() for ln in str(exc).splitlines()]
    found = [ln.removeprefix("error:").strip() for ln in lines if ln.startswith("error:")]
    return found[0] if found else (lines[0] if lines else type(exc).__name__)


def _rule_from_table(entry: Any, number: int, source: str) -> Rule:
    """Build rule ``number`` (1-based, file order) or raise a one-line NsysmoeError naming it."""
    where = f"{source}: rule {number}"
    if not isinstance(entry, dict):
        raise NsysmoeError(f"{where}: expected a [[rule]] table; {_FORMAT_HINT}")
    missing = [key for key in _REQUIRED_KEYS if key not in entry]
    if "pattern" not in entry and "nvtx" not in entry:
        missing.append("pattern (or nvtx)")
    if missing:
        raise NsysmoeError(f"{where}: missing key(s) {', '.join(missing)}; add them")
    unknown = sorted(set(entry) - _RULE_KEYS)
    if unknown:
        allowed = ", ".join(sorted(_RULE_KEYS))
        raise NsysmoeError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {allowed}")
    values = {key: entry.get(key, "") for key in _RULE_KEYS}
    wrong = [key for key, value in values.items() if not isinstance(value, str)]
    if wrong:
        raise NsysmoeError(f"{where}: {', '.join(sorted(wrong))} must be a string")
    try:
        return Rule(values["class"], values["subclass"], values["pattern"], values["note"],
                    values["nvtx"], values["channel"])  # fmt: skip
    except NsysmoeError as exc:
        raise NsysmoeError(f"{where} (subclass {values['subclass']!r}): {exc}") from exc


def parse_rules(text: str, source: str) -> RuleSet:
    """Parse rule-file text; ``source`` names the file in every error message."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NsysmoeError(f"{source}: not valid TOML ({exc}); fix the syntax") from exc
    version = doc.get("version", 1)
    if version != 1:
        raise NsysmoeError(f"{source}: unsupported version {version!r}; set version = 1")
    entries = doc.get("rule", [])
    if not isinstance(entries, list):
        raise NsysmoeError(f"{source}: 'rule' must be an array of [[rule]] tables; {_FORMAT_HINT}")
    _precompile(str(e.get(k, "")) for e in entries if isinstance(e, dict)
                for k in ("pattern", "nvtx") if isinstance(e.get(k, ""), str))  # fmt: skip
    rules = tuple(_rule_from_table(e, i, source) for i, e in enumerate(entries, start=1))
    return RuleSet(rules=rules, source=source)


@lru_cache(maxsize=1)
def default_rules() -> RuleSet:
    """The packaged default table; cached because every analysis starts from it."""
    resource = files("nsysmoe") / "rules" / "default.toml"
    rules = parse_rules(resource.read_text(encoding="utf-8"), str(resource))
    source = f"nsysmoe default rules ({len(rules.rules)}): nsysmoe/rules/default.toml"
    return RuleSet(rules.rules, source)


def _check_rules_file(path: Path) -> None:
    """Before reading: a regular file of sane size (``/dev/zero`` or a FIFO would never end)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise NsysmoeError(f"{path}: rule file not found; check the path") from None
    except OSError as exc:
        raise NsysmoeError(f"{path}: cannot look up the rule file ({exc.strerror}); check the "
                           "path") from None  # fmt: skip
    if not stat.S_ISREG(st.st_mode):
        raise NsysmoeError(f"{path}: not a regular file; --rules takes a TOML rule file "
                           "(format: nsysmoe/rules/default.toml)")  # fmt: skip
    if st.st_size > MAX_RULES_BYTES:
        size = f"{st.st_size / (1 << 20):.1f} MiB"
        raise NsysmoeError(f"{path}: {size} is no rule file (at most {MAX_RULES_BYTES >> 20} "
                           "MiB of TOML); check the --rules path")  # fmt: skip


def load_rules(path: str | Path, *, extend_default: bool = True) -> RuleSet:
    """Load a user rule file; with ``extend_default`` its rules go FIRST, then the defaults.

    User rules first because first match wins: that is how a user re-labels a name the defaults
    already classify (e.g. HybridEP's generic ``permute_kernel`` as communication glue).
    """
    path = Path(path)
    _check_rules_file(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NsysmoeError(f"{path}: rule file not found; check the path") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise NsysmoeError(f"{path}: cannot read rule file ({exc}); check the file") from exc
    user = parse_rules(text, str(path))
    if not extend_default:
        return user
    base = default_rules()
    return RuleSet(rules=user.rules + base.rules, source=f"{user.source}, {base.source}")


def first_match(names: pl.Series, rules: tuple[Rule, ...]) -> np.ndarray:
    """Index of the first rule matching each name (-1: none): every rule searched in every name
    in one query, the first hit per name kept."""
    index = np.full(len(names), -1, dtype=np.int32)
    if not len(names) or not rules:
        return index
    # every rule over every distinct name in one parallel query: names are few (hundreds)
    hits = pl.DataFrame({"name": names.cast(pl.String)}).select(
        pl.col("name").str.contains(r.pattern).fill_null(False).alias(str(i))
        for i, r in enumerate(rules)
    ).to_numpy()  # fmt: skip
    found = hits.any(axis=1)
    index[found] = hits[found].argmax(axis=1)
    return index


def classify_names(names: pl.Series | Iterable[str], rules: RuleSet) -> pl.DataFrame:
    """Classify each distinct non-null name once (traces repeat a few hundred names 10^5 times).

    Returns one row per unique name, in first-seen order: ``name`` (str), ``class`` (str),
    ``subclass`` (str), ``rule_index`` (int32: position in ``rules.rules``, -1 = no rule matched).
    """
    series = names if isinstance(names, pl.Series) else pl.Series(list(names), dtype=pl.String)
    unique = series.cast(pl.String).drop_nulls().unique(maintain_order=True)
    index = first_match(unique, rules.rules)
    classes = [r.klass for r in rules.rules] + [UNCLASSIFIED[0]]
    subclasses = [r.subclass for r in rules.rules] + [UNCLASSIFIED[1]]
    return pl.DataFrame(
        {
            "name": unique,
            "class": [classes[i] for i in index.tolist()],
            "subclass": [subclasses[i] for i in index.tolist()],
            "rule_index": index,
        },
        schema={
            "name": pl.String,
            "class": pl.String,
            "subclass": pl.String,
            "rule_index": pl.Int32,
        },
    )


def classify(
    df: pl.DataFrame,
    rules: RuleSet,
    name_col: str = "name",
    *,
    runtime: pl.DataFrame | None = None,
    nvtx: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Return ``df`` with ``class``, ``subclass`` and ``channel`` (communication only, else
    null) columns (replaced if present), rows in order.

    The regexes of name-only rules run once per unique name; rows get their labels by a hash
    lookup on the name, so cost grows with distinct names, not kernels. Rules with an ``nvtx``
    key also need each row's launching call (``df``'s ``pid``/``corr_id`` in ``runtime``) and the
    ranges (``nvtx``); without them such a rule matches nothing. Null names are
    ``other``/``unclassified``; a whole-graph row (``graph == "whole"``) no rule names (or only
    a catch-all rule as ``other``/``unclassified``) is ``graph``/``contents unknown``.
    """
    if name_col not in df.columns:
        raise NsysmoeError(
            f"no column {name_col!r} to classify (columns: {', '.join(df.columns)}); pass name_col="
        )
    names = df.get_column(name_col).cast(pl.String)
    unique, ids = _name_ids(names)
    index = _rule_index(unique, ids, rules)
    if runtime is not None and nvtx is not None:
        _apply_nvtx_rules(df, unique, ids, rules, index, runtime, nvtx)
    last = len(rules.rules)  # index -1 (no rule): the unclassified entry after the rules
    entries = [(r.klass, r.subclass, (r.channel or OTHER_CHANNEL) if r.klass == "comm" else None)
               for r in rules.rules] + [(*UNCLASSIFIED, None)]  # fmt: skip
    at = np.where(index < 0, last, index)
    if "graph" in df.columns:
        # no rule, or only the catch-all ("other"/"unclassified"), says what a whole graph
        # held: its own entry after the rules (chosen per row in numpy: a string when/then
        # over a million rows builds a new string column each time)
        unknown = np.array([e[:2] == UNCLASSIFIED for e in entries])
        whole = df.select((pl.col("graph") == "whole").fill_null(False)).to_series().to_numpy()
        at = np.where(whole & unknown[at], len(entries), at)
        entries.append((GRAPH, GRAPH_SUBCLASS, None))
    rows = pl.Series(at, dtype=pl.UInt32)
    columns = zip(("class", "subclass", "channel"), zip(*entries, strict=True), strict=True)
    return df.with_columns(pl.Series(c, values, dtype=pl.String).gather(rows)
                           for c, values in columns)  # fmt: skip


def _name_ids(names: pl.Series) -> tuple[pl.Series, np.ndarray]:
    """The distinct non-null names (first-seen order) and each row's index among them (−1:
    null): every rule then runs once per distinct name, and rows read the result by index."""
    unique = names.drop_nulls().unique(maintain_order=True)
    at = pl.Series(np.arange(len(unique), dtype=np.int32))
    ids = names.replace_strict(unique, at, default=-1, return_dtype=pl.Int32)
    return unique, ids.fill_null(-1).to_numpy()


def _rule_index(unique: pl.Series, ids: np.ndarray, rules: RuleSet) -> np.ndarray:
    """Per row, the first name-only rule matching its name (-1: none), matched once per name."""
    plain = np.array([i for i, r in enumerate(rules.rules) if not r.nvtx], dtype=np.int32)
    local = first_match(unique, tuple(rules.rules[i] for i in plain))
    hit = np.where(local >= 0, plain[np.maximum(local, 0)] if plain.size else -1, -1)
    return np.append(hit, -1).astype(np.int32)[ids]  # ids −1 (null) reads the appended −1


def _apply_nvtx_rules(
    df: pl.DataFrame,
    unique: pl.Series,
    ids: np.ndarray,
    rules: RuleSet,
    index: np.ndarray,
    runtime: pl.DataFrame,
    nvtx: pl.DataFrame,
) -> None:
    """Lower ``index`` to rule j where rule j has an ``nvtx`` key, precedes the row's rule, and
    matches: its pattern in the name (searched once per distinct name) and its nvtx pattern in
    a range around the launch (ranges found once per nvtx pattern)."""
    named: dict[str, pl.DataFrame] = {}
    for j, rule in enumerate(rules.rules):
        if not rule.nvtx:
            continue
        hit = np.append(rule.search(unique).fill_null(False).to_numpy(), False)[ids]
        candidates = np.flatnonzero(hit & ((index < 0) | (index > j)))
        if candidates.size == 0:
            continue
        if rule.nvtx not in named:
            named[rule.nvtx] = _named_ranges(nvtx, rule.nvtx)
        if named[rule.nvtx].is_empty():
            continue
        inside = launched_inside(df[candidates], runtime, nvtx, rule.nvtx, named[rule.nvtx])
        index[candidates[inside]] = j


def _named_ranges(nvtx: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """Same-thread NVTX ranges whose name contains ``pattern``."""
    return nvtx.filter(
        ~pl.col("cross_thread").fill_null(False), pl.col("name").str.contains(pattern)
    )


def launched_inside(
    rows: pl.DataFrame,
    runtime: pl.DataFrame,
    nvtx: pl.DataFrame,
    pattern: str,
    named: pl.DataFrame | None = None,
) -> np.ndarray:
    """Whether each row's launching call (same ``pid``/``corr_id``) lies, on its thread, inside
    an NVTX range whose name contains ``pattern`` (``named``: those ranges, if found already)."""
    inside = np.zeros(len(rows), dtype=bool)
    named = _named_ranges(nvtx, pattern) if named is None else named
    if named.is_empty() or rows.is_empty():
        return inside
    calls = (
        rows.select("pid", "corr_id")
        .with_row_index("row")
        .join(runtime.select("pid", "corr_id", "tid", "start", "end"), on=["pid", "corr_id"])
        .with_row_index("call_id")
    )
    if calls.is_empty():
        return inside
    ranges = named.select("tid", "start", "end").with_row_index("range_id")
    pairs = enclosing_pairs(ranges, calls)
    rows_inside = calls.join(pairs.select("call_id").unique(), on="call_id", how="semi")["row"]
    inside[rows_inside.to_numpy()] = True
    return inside


def classify_trace(trace: Trace, rules: RuleSet) -> ClassifiedTrace:
    """The trace with its kernels classified by ``rules`` (the one classification of a trace)."""
    kernels = classify(trace.kernels, rules, runtime=trace.runtime, nvtx=trace.nvtx)
    return ClassifiedTrace(trace, kernels, rules.source)
