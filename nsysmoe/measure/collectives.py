"""Across ranks: one collective instance per matched launch, its time on each rank split into
*wait* (until the last peer arrived) and *transfer* (after), and the rank everyone waits for.

Matching (:func:`match`), within one iteration and one communication kernel (same channel, same
name) — a *group*:

* every rank launched it equally often: the k-th launch (by start) on every rank is one instance;
* launch counts differ (a rank lacks a launch: a dropped record, a shorter iteration): the k-th
  launches are different instances after the missing one (matching them called the shift a wait),
  so the group's launches are placed between the *anchors*, the launches of the iteration's
  equal-count groups (the same instances on every rank). On its rank, ``before`` anchors ended by
  a launch x's start and ``notafter`` started by its end (the difference: the anchors x overlaps
  or touches; none as a rule). A blocking collective cannot end on any rank before every peer has
  started it, so an anchor that ended by x's start on one rank started by x's end on every other
  (start(a, r') ≤ end(a, r) ≤ start(x, r) ≤ end(x, r'): every step ≤, so launches that touch keep
  it): the [before, notafter] ranges of one instance's launches meet on every pair of ranks.
  Ranges that meet, over all ranks, are merged into *blocks*; an instance lies in one block on
  every rank. A block every rank has equally many launches in is matched by order of start. Any
  other block is left unmatched, never guessed: its instances are listed in ``incomplete`` with
  the ranks that have all of the block's launches (``present_on``) and those that have only some,
  where which ones is not in the data (``ambiguous_on``); ``k`` there is the instance's launch
  number on the ranks that have it (the highest: that of a rank lacking none before it).

Equal counts are taken as the same launches: ranks that each lack a *different* launch of a group
(or of a block) in equal numbers cannot be told apart by counts; one rank with all of them
separates them. Matching assumes every rank takes part in every instance.

Per instance, with s_r, e_r rank r's kernel start and end and L = max_r s_r the last arrival:

* wait on rank r = [s_r, min(L, e_r)); transfer = [min(L, e_r), e_r)
* per rank and channel: ``wait_ns`` = |⋃ wait|, ``transfer_ns`` = |⋃ transfer|,
  ``exposed_wait_ns`` = |⋃ wait \\ ⋃K|, ``exposed_transfer_ns`` = |⋃ transfer \\ ⋃K| (K = that
  rank's compute kernels); ``imbalance_pct`` = 100 · wait / (wait + transfer)
* the straggler of a channel: the rank that was the single last arrival most often, with how
  often and the wait it caused the others (Σ of their wait in those instances). It is the rank
  with the *least* communication time: the others spin in their kernels waiting for it.

Kernels a rank runs without peers (HybridEP's ``scan``, metadata preprocessing) are not matched.

What travels from a worker is compact (:func:`arrivals`, :func:`compute_under_comm`): one row per
communication kernel, and the compute union only where it meets communication (all that the
exposed parts can subtract), so many ranks cost little more than reading them; placing the
launches of groups with unequal counts reads only their starts and ends, nothing more.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from nsysmoe.intervals import IntervalSet
from nsysmoe.measure.overlap import COMM, busy_table, by_gpu, gpu_keys
from nsysmoe.results import Collectives, TraceAnalysis

#: kernels without peers: never matched across ranks
LOCAL = r"(?i)hybrid_ep::scan|metadata_preprocess|\bscan_kernel\b"
ARRIVAL_SCHEMA: dict[str, pl.DataType] = {
    "pid": pl.Int64, "device": pl.Int64, "channel": pl.String, "name": pl.String,
    "step": pl.Int64, "k": pl.Int64, "start": pl.Int64, "end": pl.Int64,
}  # fmt: skip
KEY = ["step", "channel", "name", "k"]
WAIT_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.String, "channel": pl.String, "instances": pl.Int64, "wait_ns": pl.Int64,
    "transfer_ns": pl.Int64, "exposed_wait_ns": pl.Int64, "exposed_transfer_ns": pl.Int64,
    "imbalance_pct": pl.Float64,
}  # fmt: skip
#: per rank, all its channels together: each figure the union over its channels (time two
#: channels share counts once), so they answer "how long did this rank wait in all"
TOTAL_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.String, "channels": pl.Int64, "instances": pl.Int64, "wait_ns": pl.Int64,
    "transfer_ns": pl.Int64, "exposed_wait_ns": pl.Int64, "exposed_transfer_ns": pl.Int64,
    "imbalance_pct": pl.Float64,
}  # fmt: skip
STRAGGLER_SCHEMA: dict[str, pl.DataType] = {
    "channel": pl.String, "rank": pl.String, "last_count": pl.Int64, "instances": pl.Int64,
    "caused_wait_ns": pl.Int64,
}  # fmt: skip


def arrivals(kernels: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Each matchable communication kernel with its iteration (the process's iteration window
    its start lies in; -1 outside every window) and k, its rank among the same (channel, name)
    launches of that iteration on its GPU (:data:`ARRIVAL_SCHEMA`)."""
    comm = kernels.filter((pl.col("class") == COMM) & ~pl.col("name").str.contains(LOCAL))
    comm = comm.select("pid", "device", pl.col("channel").fill_null("other"), "name", "start",
                       "end").sort("pid", "start")  # fmt: skip
    if windows.is_empty():
        comm = comm.with_columns(pl.lit(-1, pl.Int64).alias("step"))
    else:
        w = windows.select("pid", "step", "start_ns", "end_ns").sort("start_ns")
        comm = comm.join_asof(w, left_on="start", right_on="start_ns", by="pid",
                              check_sortedness=False).with_columns(  # fmt: skip
            pl.when(pl.col("start") < pl.col("end_ns")).then("step").otherwise(-1)
            .fill_null(-1).alias("step"))  # fmt: skip
    comm = comm.sort("pid", "device", "start", "end", "name").with_columns(
        pl.int_range(pl.len()).over("pid", "device", "step", "channel", "name").alias("k"))
    return comm.select(list(ARRIVAL_SCHEMA)).cast(ARRIVAL_SCHEMA)


def compute_under_comm(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per GPU, ⋃K ∩ ⋃C as disjoint intervals (:data:`~nsysmoe.measure.overlap.BUSY_SCHEMA`):
    the only part of the compute union the exposed wait and transfer can lose. An analysis
    takes them from its per-GPU unions (:func:`~nsysmoe.measure.overlap.per_gpu_and_busy`)."""
    busy = []
    # only the columns read (a row without a class is neither communication nor compute)
    side = pl.when(pl.col("class") == COMM).then(1).when(pl.col("class").is_not_null()).then(0)
    narrow = kernels.select("pid", "device", "start", "end", side.fill_null(-1).alias("side"))
    for (pid, device), k in by_gpu(narrow, gpu_keys(narrow)).items():
        s, e, is_comm, is_compute = k["start"], k["end"], k["side"] == 1, k["side"] == 0
        both = (IntervalSet.from_arrays(s[is_comm], e[is_comm])
                & IntervalSet.from_arrays(s[is_compute], e[is_compute]))
        busy.append(((pid, device), both.starts, both.ends))
    return busy_table(busy)


GROUP = ["step", "channel", "name"]
INCOMPLETE_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64, "channel": pl.String, "name": pl.String, "k": pl.Int64,
    "present_on": pl.List(pl.String), "ambiguous_on": pl.List(pl.String),
}  # fmt: skip


def match(table: pl.DataFrame, n_ranks: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Instances every rank has: the rows with ``k`` the instance's number (the same on every
    rank), ``last`` (L) and ``wait_end`` = min(L, end); and the instances left unmatched
    (:data:`INCOMPLETE_SCHEMA`: key, ``present_on``, ``ambiguous_on``; the module docstring says
    how groups with unequal launch counts are cut). ``table``: arrivals of every rank with a
    ``rank`` column, times on one clock; ``n_ranks``: the run's ranks (default: those in the
    table — a rank without any communication leaves every instance unmatched)."""
    n = table["rank"].n_unique() if n_ranks is None else n_ranks
    counts = table.group_by(*GROUP, "rank").len("c").group_by(GROUP).agg(
        pl.len().alias("ranks"), pl.col("c").min().alias("lo"), pl.col("c").max().alias("hi"))
    odd = counts.filter((pl.col("ranks") < n) | (pl.col("lo") < pl.col("hi"))).select(GROUP)
    missing = pl.DataFrame(schema=INCOMPLETE_SCHEMA)
    if not odd.is_empty():
        uneven = table.join(odd, on=GROUP, how="semi")
        table = table.join(odd, on=GROUP, how="anti")
        cut, missing = _cut(uneven, table, n)
        table = pl.concat([table, cut.select(table.columns)])
    last = table.group_by(KEY).agg(pl.col("start").max().alias("last"))
    rows = table.join(last, on=KEY).with_columns(
        pl.min_horizontal("last", "end").alias("wait_end"))
    return rows, missing


def _between(uneven: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """``uneven`` with ``before`` (the same rank's and iteration's anchors that ended by its
    start) and ``notafter`` (those that started by its end; an anchor that starts the instant
    it ends counts, so ranges are never narrower than the argument of the module docstring
    allows): the anchors it overlaps lie between. Two as-of joins on running counts, no loop."""
    by = ["rank", "step"]
    where = anchors.select(*by, "start", "end").join(uneven.select(by).unique(), on=by, how="semi")
    ended = where.sort("end").with_columns(pl.int_range(1, pl.len() + 1).over(by).alias("before"))
    began = where.sort("start").with_columns(
        pl.int_range(1, pl.len() + 1).over(by).alias("notafter"))
    out = uneven.sort("start").join_asof(
        ended.select(*by, pl.col("end").alias("a_end"), "before"), left_on="start",
        right_on="a_end", by=by, strategy="backward", check_sortedness=False)  # fmt: skip
    out = out.sort("end").join_asof(
        began.select(*by, pl.col("start").alias("a_start"), "notafter"), left_on="end",
        right_on="a_start", by=by, strategy="backward", allow_exact_matches=True,
        check_sortedness=False)  # fmt: skip
    return out.drop("a_end", "a_start").with_columns(pl.col("before", "notafter").fill_null(0))


def _cut(uneven: pl.DataFrame, anchors: pl.DataFrame, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows of groups with unequal launch counts cut into blocks between the anchors (the
    module docstring): those of blocks every rank has equally many launches of, with ``k`` the
    instance's number; and the instances of the other blocks (:data:`INCOMPLETE_SCHEMA`)."""
    # before <= notafter: an anchor that ended by x's start began by its end
    placed = _between(uneven, anchors).with_columns(
        pl.col("before").alias("lo"), pl.col("notafter").alias("hi"))
    order = {"order_by": ["lo", "hi"]}  # (windows ordered in place: sorts by strings are slow)
    reach = pl.col("hi").cum_max().shift(1).over(GROUP, **order)  # furthest reached before
    placed = placed.with_columns((reach.is_null() | (pl.col("lo") > reach)).alias("new"))
    block = [*GROUP, "block"]
    placed = placed.with_columns(pl.col("new").cum_sum().over(GROUP, **order).alias("block"))
    # per rank, a block's launches are a run of its k (k orders them by start); j = k - k0
    per = placed.group_by(*block, "rank").agg(
        pl.len().alias("c"), pl.col("k").min().alias("k0"), pl.col("k").max().alias("k1"))
    per = per.with_columns(
        pl.len().over(block).alias("ranks"), pl.col("c").max().over(block).alias("most"),
        ((pl.col("c").min().over(block) == pl.col("c").max().over(block))
         & (pl.col("k1") - pl.col("k0") + 1 == pl.col("c")).all().over(block)).alias("even"))
    ok = per.filter(pl.col("even") & (pl.col("ranks") == n))
    # instance j of a block: the highest k0 + j over the ranks (the rank lacking none before)
    shift = ok.select(*block, "rank", (pl.col("k0").max().over(block) - pl.col("k0")).alias("d"))
    matched = placed.join(shift, on=[*block, "rank"]).with_columns(pl.col("k") + pl.col("d"))
    left = per.join(ok.select(block).unique(), on=block, how="anti")
    whole = pl.col("c") == pl.col("most")
    named = (
        left.group_by(block).agg(
            pl.col("rank").filter(whole).sort().alias("present_on"),
            pl.col("rank").filter(~whole).sort().alias("ambiguous_on"),
            pl.col("k0").filter(whole).max(), pl.col("most").first())
        .with_columns(pl.int_ranges("k0", pl.col("k0") + pl.col("most")).alias("k"))
        .explode("k").sort(*GROUP, "k", "block")  # block: ties in k in timeline order
    )  # fmt: skip
    return matched, named.select(list(INCOMPLETE_SCHEMA)).cast(INCOMPLETE_SCHEMA)


def _exposed(starts: np.ndarray, ends: np.ndarray, busy: IntervalSet) -> tuple[int, int]:
    s = IntervalSet.from_arrays(starts, ends)
    return s.length, (s - busy).length


def compute_by_rank(busy: pl.DataFrame) -> dict[str, IntervalSet]:
    """Per rank, its ⋃K ∩ ⋃C as one set; ``busy``: :func:`compute_under_comm`'s rows of every
    rank with a ``rank`` column."""
    return {rank: IntervalSet.from_arrays(b["start"].to_numpy(), b["end"].to_numpy())
            for (rank,), b in busy.partition_by("rank", as_dict=True).items()}  # fmt: skip


def wait_split(rows: pl.DataFrame, under: dict[str, IntervalSet]) -> pl.DataFrame:
    """Per (rank, channel): instances, wait, transfer and their exposed parts
    (:data:`WAIT_SCHEMA`); ``under``: per rank, ⋃K ∩ ⋃C (:func:`compute_by_rank`). Loops run
    per rank and channel, never per kernel."""
    return _split(rows, under, ["rank", "channel"]).select(list(WAIT_SCHEMA))


def rank_totals(rows: pl.DataFrame, under: dict[str, IntervalSet]) -> pl.DataFrame:
    """Per rank, all its channels at once (:data:`TOTAL_SCHEMA`): the unions of every channel's
    wait, transfer and their exposed parts, so two channels waiting at the same time count
    that time once (the per-channel rows added up would count it twice). ``channels``: how
    many channels it had matched instances of; ``imbalance_pct`` = 100 · wait / (wait +
    transfer) of these unions (one channel's wait may overlap another's transfer)."""
    return _split(rows, under, ["rank"]).select(list(TOTAL_SCHEMA))


def _split(rows: pl.DataFrame, under: dict[str, IntervalSet], by: list[str]) -> pl.DataFrame:
    """Channels, instances, wait, transfer and their exposed parts per group ``by`` (rank
    first; :data:`WAIT_SCHEMA` and :data:`TOTAL_SCHEMA` together): each figure the exact
    union of the group's intervals, the exposed ones less the rank's compute (``under``:
    :func:`compute_by_rank`)."""
    out = []
    for key, g in sorted(rows.partition_by(*by, as_dict=True).items()):
        k = under.get(key[0], IntervalSet.empty())
        s, w, e = (g[c].to_numpy() for c in ("start", "wait_end", "end"))
        wait, exposed_wait = _exposed(s, w, k)
        transfer, exposed_transfer = _exposed(w, e, k)
        total = wait + transfer
        out.append({"rank": key[0], "channel": key[1] if len(key) > 1 else None,
                    "channels": g["channel"].n_unique(), "instances": len(g), "wait_ns": wait,
                    "transfer_ns": transfer, "exposed_wait_ns": exposed_wait,
                    "exposed_transfer_ns": exposed_transfer,
                    "imbalance_pct": 100.0 * wait / total if total else None})  # fmt: skip
    return pl.DataFrame(out, schema=WAIT_SCHEMA | TOTAL_SCHEMA, orient="row")


def stragglers(rows: pl.DataFrame) -> pl.DataFrame:
    """Per channel, the rank that was the single last arrival most often (:data:`STRAGGLER_SCHEMA`;
    ties between ranks: the smallest label); the wait it caused is the others' wait in those
    instances. An instance whose latest start two ranks share has no single last rank."""
    if rows.is_empty():
        return pl.DataFrame(schema=STRAGGLER_SCHEMA)
    at_last = rows.filter(pl.col("start") == pl.col("last"))
    single = at_last.group_by(KEY).agg(pl.len().alias("n"), pl.col("rank").first())
    single = single.filter(pl.col("n") == 1).drop("n").rename({"rank": "last_rank"})
    waited = rows.join(single, on=KEY).filter(pl.col("rank") != pl.col("last_rank"))
    caused = waited.group_by("channel", "last_rank").agg(
        (pl.col("wait_end") - pl.col("start")).sum().alias("caused_wait_ns"))
    counts = single.group_by("channel", "last_rank").len("last_count")
    instances = rows.select(*KEY).unique().group_by("channel").len("instances")
    best = (counts.join(caused, on=["channel", "last_rank"], how="left")
            .sort(["channel", "last_count", "last_rank"], descending=[False, True, False])
            .unique("channel", keep="first", maintain_order=True))  # fmt: skip
    out = best.join(instances, on="channel").rename({"last_rank": "rank"}).with_columns(
        pl.col("caused_wait_ns").fill_null(0))
    return out.select(list(STRAGGLER_SCHEMA)).cast(STRAGGLER_SCHEMA).sort("channel")


DAY_NS = 86_400 * 10**9


def clock_offset(session_start_ns: int | None, first_ns: int | None) -> tuple[int, str]:
    """What to add to a file's timestamps to put them on the UTC epoch, and why: nsys writes
    session-relative timestamps (add the session start), but exports of some setups are on the
    epoch already (the real 6-rank export: kernels at 1.7e18 ns) and must not be shifted."""
    if session_start_ns is None:
        return 0, "no session start in the file: its own clock"
    if first_ns is not None and first_ns >= session_start_ns - DAY_NS:
        return 0, "timestamps already on the UTC epoch"
    return session_start_ns, "session-relative timestamps + session start (utcEpochNs)"


def rank_label(file: str) -> pl.Expr:
    """The label of each row's rank, ``rank``: ``file:pid:device`` (``file`` the name of the
    file it came from), as every per-rank table names it."""
    return pl.format("{}:{}:{}", pl.lit(file), "pid", "device").alias("rank")


def with_rank(df: pl.DataFrame, file: str, shift: int = 0) -> pl.DataFrame:
    """Rows labelled with their rank (:func:`rank_label`), times moved by ``shift``."""
    return df.with_columns(
        rank_label(file),
        pl.col("start") + shift, pl.col("end") + shift,
    )  # fmt: skip


def aligned_by_ends(table: pl.DataFrame, n_ranks: int | None = None) -> pl.DataFrame:
    """Per rank, the correction that puts its collectives' ends on those of the reference rank
    (the first by label; all ranks leave a blocking collective together): the median over
    matched instances of (reference end − the rank's end), in integer ns. ``spread_ns``: max −
    min over instances of the ends left after the correction (how well one offset per rank
    explains them)."""
    rows, _ = match(table, n_ranks)
    if rows.is_empty():
        return pl.DataFrame(schema={"rank": pl.String, "correction_ns": pl.Int64,
                                    "spread_ns": pl.Int64})  # fmt: skip
    ref = rows["rank"].min()
    ends = rows.filter(pl.col("rank") == ref).select(*KEY, pl.col("end").alias("ref_end"))
    # integer differences (epoch ns as float64 would lose ~256 ns)
    gaps = rows.join(ends, on=KEY).with_columns((pl.col("ref_end") - pl.col("end")).alias("gap"))
    corr = gaps.group_by("rank").agg(pl.col("gap").median().round().cast(pl.Int64)
                                     .alias("correction_ns"))  # fmt: skip
    left = gaps.join(corr, on="rank").with_columns(
        (pl.col("end") + pl.col("correction_ns") - pl.col("ref_end")).alias("moved"))
    spread = left.group_by(KEY).agg((pl.col("moved").max() - pl.col("moved").min()).alias("s"))
    worst = int(spread["s"].max()) if len(spread) else 0
    return corr.with_columns(pl.lit(worst, pl.Int64).alias("spread_ns")).sort("rank")


def summarize(table: pl.DataFrame, busy: pl.DataFrame, offsets: pl.DataFrame,
              align: bool = False, n_ranks: int | None = None,
              matched: tuple[pl.DataFrame, pl.DataFrame] | None = None
              ) -> Collectives:  # fmt: skip
    """Match, split and name the straggler over every rank's arrivals (times on one clock);
    with ``align``, each rank's clock is first corrected so its collectives end with the
    others' (:func:`aligned_by_ends`), and the corrections join ``offsets``. ``matched``:
    ``match(table, n_ranks)`` when the caller has it already (not with ``align``)."""
    n_ranks = table["rank"].n_unique() if n_ranks is None else n_ranks
    if table.is_empty() or n_ranks < 2:
        return Collectives.none(offsets)
    if align:
        corr = aligned_by_ends(table, n_ranks)
        shift = [pl.col("start") + pl.col("correction_ns").fill_null(0),
                 pl.col("end") + pl.col("correction_ns").fill_null(0)]  # fmt: skip
        table = table.join(corr.select("rank", "correction_ns"), on="rank", how="left") \
            .with_columns(shift).drop("correction_ns")
        busy = busy.join(corr.select("rank", "correction_ns"), on="rank", how="left") \
            .with_columns(shift).drop("correction_ns")
        base = offsets if not offsets.is_empty() else corr.select("rank")
        offsets = base.join(corr, on="rank", how="left")
    rows, missing = match(table, n_ranks) if matched is None or align else matched
    under = compute_by_rank(busy)
    waits, named = wait_split(rows, under), stragglers(rows)
    return Collectives(
        offsets=offsets,
        waits=waits,
        rank_totals=rank_totals(rows, under),
        stragglers=named,
        incomplete=missing,
        matched=rows.select(KEY).unique().height,
        **wait_verdict(waits, named),
    )


#: exposed collective time this much wait means imbalance, not a slow network
WAIT_SHARE_PCT = 50.0
IMBALANCE_KNOBS = (
    "balance the routing (--moe-router-load-balancing-type aux_loss or seq_aux_loss, "
    "--moe-aux-loss-coeff)",
    "--moe-expert-capacity-factor (token dropping caps the busiest expert)",
    "check the straggler rank (a slow GPU, a host hiccup, its data)",
)


def wait_verdict(waits: pl.DataFrame, named: pl.DataFrame) -> dict[str, object]:
    """``exposed_wait_pct``: exposed wait as a share of exposed collective time, all ranks; at
    :data:`WAIT_SHARE_PCT` or more the exposed communication is mostly ranks waiting for a late
    peer (imbalance / straggler), and the knobs are those for it, not a faster dispatcher:
    routing balance where EP channels wait, even work per rank otherwise, and the straggler."""
    if waits.is_empty():
        return {"exposed_wait_pct": None, "knobs": ()}
    w, t = int(waits["exposed_wait_ns"].sum()), int(waits["exposed_transfer_ns"].sum())
    share = 100.0 * w / (w + t) if w + t else None
    if share is None or share < WAIT_SHARE_PCT:
        return {"exposed_wait_pct": share, "knobs": ()}
    who = sorted(set(named["rank"])) if not named.is_empty() else []
    check = (f"check {', '.join(who)}, the straggler (a slow GPU, a host hiccup, its data)",)
    moe = any(str(c).startswith("ep.") for c in waits["channel"])
    routing = IMBALANCE_KNOBS[:2] if moe else ("even out the work per rank (batch, sequence "
                                               "lengths, pipeline stages)",)  # fmt: skip
    return {"exposed_wait_pct": share, "knobs": routing + (check if who else IMBALANCE_KNOBS[2:])}


def across_files(analyses: tuple[TraceAnalysis, ...], align: bool = False) -> Collectives:
    """Collectives matched over every GPU of every file, each file's times moved onto one clock
    (its UTC-epoch offset, relative to the earliest file's)."""
    if not analyses:
        return Collectives.none()
    base = min(a.clock_offset_ns for a in analyses)
    offsets, arrived, busy = [], [], []
    for a in analyses:
        shift, name = a.clock_offset_ns - base, Path(a.path).name
        arrived.append(with_rank(a.arrivals, name, shift))
        busy.append(with_rank(a.compute_under_comm, name, shift))
        offsets += [{"rank": rank, "offset_ns": shift, "basis": a.clock_basis}
                    for rank in a.gpus.select(rank_label(name))["rank"]]  # fmt: skip
    table = pl.DataFrame(offsets, schema={"rank": pl.String, "offset_ns": pl.Int64,
                                          "basis": pl.String})  # fmt: skip
    return summarize(pl.concat(arrived), pl.concat(busy), table, align, n_ranks=len(table))
