"""The report of one trace: the headline, then per GPU, per channel, the wall's evidence, kernel
classes, iterations, NVTX and notes."""

from __future__ import annotations

from nsysmoe.renderers.cells import (
    RANK_FIGURES,
    count,
    gpu_label,
    ms,
    pct,
    warmup_hint,
    window_text,
)
from nsysmoe.renderers.document import (
    Block,
    Caption,
    Details,
    Document,
    Heading,
    Lines,
    ReportOptions,
    Table,
)  # fmt: skip
from nsysmoe.renderers.report import critical_path as path
from nsysmoe.renderers.report.collectives import collective_blocks
from nsysmoe.renderers.report.graphs import graph_lines
from nsysmoe.renderers.report.headline import shown_source, trace_headline
from nsysmoe.renderers.report.sm_budget import sm_block, sm_details
from nsysmoe.results import TraceAnalysis, launch_dict

TOP_NVTX = 15
FORMULA = "hidden % = |⋃comm ∩ ⋃compute| / |⋃comm|, per GPU, exact to the ns"


def document(a: TraceAnalysis, options: ReportOptions | None = None) -> Document:
    """The headline (:mod:`~nsysmoe.renderers.report.headline`), then the detail: per GPU, per
    channel, the wall's evidence and knobs, idle, graphs, and the folded tables."""
    blocks: list[Block] = [
        Heading("nsysmoe:", code=shown_source(a),
                terminal=f"nsysmoe: {shown_source(a, name_only=True)}"),
    ]
    if a.rank is not None:
        blocks.append(Lines((rank_line(a),)))
    if caveats := caveat_lines(a):
        blocks.append(Lines(tuple(caveats)))
    blocks += trace_headline(a)
    blocks.append(Caption((("window", window_text(a), False), ("rules", a.rules_source, True)),
                          FORMULA))  # fmt: skip
    if bound_by := path.bound_by_line(a.critical_path):  # the headline has no room left
        blocks.append(Lines((bound_by,)))
    blocks.append(gpu_table(a))
    if not a.channel_totals.is_empty():
        blocks.append(channel_table(a))
    if table_lines := on_the_table_lines(a):
        blocks.append(Lines(tuple(table_lines)))
    blocks += sm_block(a.sm)
    blocks += collective_blocks(a.collectives)
    blocks.append(Lines(tuple(wall_lines(a)[1:]), hanging=True))
    blocks += path.advice_blocks(a.critical_path)  # what each knob could buy, ranked
    if idle := idle_lines(a):
        blocks.append(Lines(tuple(idle)))
    graphs = graph_lines(a.graphs, a.totals.active_ns)
    if graphs:
        blocks.append(Lines(tuple(graphs)))
    if not a.phase_totals.is_empty():
        phase_blocks = [phase_table(a)] + ([layer_table(a)] if not a.layers.is_empty() else [])
        blocks.append(Details("Communication by step phase", tuple(phase_blocks)))
    blocks += path.detail_blocks(a.critical_path, options)
    blocks += [Details("Kernel classes", (class_table(a),)),
               *optional_tables(a, options or ReportOptions())]  # fmt: skip
    if launch := launch_lines(a):
        blocks.append(Details("Launch (as the export recorded it; secrets redacted)",
                              (Lines(tuple(launch), style="list"),)))  # fmt: skip
    if a.graphs.present:
        blocks.append(Details("CUDA graphs", (graph_table(a),)))
    if len(a.gpus) > 1 and not a.channels.is_empty():
        blocks.append(Details("Communication by channel, per GPU", (channel_gpu_table(a),)))
    labels = {(r["pid"], r["device"]): gpu_label(r) for r in a.gpus.iter_rows(named=True)}
    blocks += sm_details(a.sm, labels, options)
    if notes(a):
        blocks.append(Lines(tuple(notes(a)), style="notes"))
    return Document(tuple(blocks))


def rank_line(a: TraceAnalysis) -> str:
    """Under ``--rank``, which process every figure is of (said before any of them)."""
    assert a.rank is not None
    return f"{a.rank.text}: {RANK_FIGURES.format('this')}"


def caveat_lines(a: TraceAnalysis, prefix: str = "") -> list[str]:
    """The validity caveats, first thing after the window: a timing that is not what the
    command line claims is a WARNING; benchmark-only routing, a label."""
    return [f"{prefix}{'WARNING: ' if c.code == 'backend_not_in_use' else ''}{c.text}"
            for c in a.caveats]  # fmt: skip


def gpu_table(a: TraceAnalysis) -> Table:
    header = ("GPU", "kernels", "span ms", "active ms", "idle ms", "comm ms", "hidden ms",
              "exposed ms", "hidden %", "comm∩GEMM/attn ms")  # fmt: skip
    rows = tuple(
        (gpu_label(r), count(r["kernels"]), ms(r["span_ns"]), ms(r["active_ns"]),
         ms(r["idle_ns"]), ms(r["comm_ns"]), ms(r["hidden_ns"]), ms(r["exposed_ns"]),
         pct(r["hidden_pct"]), ms(r["comm_gemm_attn_ns"]))
        for r in a.gpus.iter_rows(named=True)
    )  # fmt: skip
    return Table("Communication hidden by compute, per GPU", header, rows,
                 (False,) + (True,) * (len(header) - 1))  # fmt: skip


CHANNEL_HEADER = ("kernels", "comm ms", "hidden ms", "exposed ms", "hidden %", "exposed-only ms",
                  "comm∩GEMM/attn ms")  # fmt: skip


def channel_cells(r: dict) -> tuple[str, ...]:
    return (count(r["count"]), ms(r["comm_ns"]), ms(r["hidden_ns"]), ms(r["exposed_ns"]),
            pct(r["hidden_pct"]), ms(r["exposed_only_ns"]), ms(r["comm_gemm_attn_ns"]))  # fmt: skip


def channel_table(a: TraceAnalysis) -> Table:
    """Per channel, all GPUs together: which communication was hidden and which was not."""
    scope = "all GPUs" if len(a.gpus) > 1 else "the GPU"
    rows = tuple((r["channel"], *channel_cells(r)) for r in a.channel_totals.iter_rows(named=True))
    return Table(f"Communication by channel ({scope}; exposed-only = exposed time no other "
                 "channel shares)", ("channel", *CHANNEL_HEADER), rows,
                 (False,) + (True,) * len(CHANNEL_HEADER))  # fmt: skip


def channel_gpu_table(a: TraceAnalysis) -> Table:
    labels = {(r["pid"], r["device"]): gpu_label(r) for r in a.gpus.iter_rows(named=True)}
    rows = tuple((labels.get((r["pid"], r["device"]), ""), r["channel"], *channel_cells(r))
                 for r in a.channels.iter_rows(named=True))  # fmt: skip
    return Table("Communication by channel, per GPU", ("GPU", "channel", *CHANNEL_HEADER), rows,
                 (False, False) + (True,) * len(CHANNEL_HEADER))  # fmt: skip


TOP_PHASES = 12


def phase_table(a: TraceAnalysis, top: int = TOP_PHASES) -> Table:
    header = ("phase (NVTX range)", "ranges", "comm kernels", "comm ms", "hidden ms",
              "exposed ms", "hidden %")  # fmt: skip
    t = a.phase_totals
    rows = tuple(
        (r["phase"], count(r["instances"]), count(r["count"]), ms(r["comm_ns"]),
         ms(r["hidden_ns"]), ms(r["exposed_ns"]), pct(r["hidden_pct"]))
        for r in t.head(top).iter_rows(named=True)
    )  # fmt: skip
    more = f" (top {top} of {len(t)}; --format json lists all, per GPU)" if len(t) > top else ""
    return Table("Communication each step phase launched, hidden by any compute (all GPUs)"
                 + more, header, rows, (False,) + (True,) * 6)  # fmt: skip


def layer_table(a: TraceAnalysis) -> Table:
    header = ("layer", "comm kernels", "comm ms", "hidden ms", "exposed ms", "hidden %")
    rows = tuple(
        (str(r["layer"]), count(r["count"]), ms(r["comm_ns"]), ms(r["hidden_ns"]),
         ms(r["exposed_ns"]), pct(r["hidden_pct"]))
        for r in a.layer_totals.iter_rows(named=True)
    )  # fmt: skip
    return Table("Per layer (ranges naming the layer; a range naming two counts for both)",
                 header, rows, (False,) + (True,) * 5)  # fmt: skip


def on_the_table_lines(a: TraceAnalysis) -> list[str]:
    """What hiding each channel's exposed time could give: an upper bound, said as one."""
    t = a.channel_totals
    if t.is_empty() or a.iterations.is_empty() or "median_step_if_hidden_ns" not in t.columns:
        return []
    step = a.median_step_ns
    parts = [f"{r['channel']} ≥ {ms(r['median_step_if_hidden_ns'])} ms"
             for r in t.sort("exposed_only_ns", descending=True).iter_rows(named=True)
             if r["exposed_only_ns"] and r["median_step_if_hidden_ns"] is not None]  # fmt: skip
    if not parts:
        return []
    return [f"Still on the table: median step {ms(step)} ms; with every exposed-only ns of one "
            f"channel hidden it would be at best: {'; '.join(parts)} (an upper bound on the "
            "gain: work that waits for the data may still wait)"]  # fmt: skip


def idle_lines(a: TraceAnalysis) -> list[str]:
    """GPU idle split by cause, and the largest gap with what the CPU thread was doing."""
    g = a.gpus
    if "idle_host_ns" not in g.columns or int(g["idle_ns"].sum()) == 0:
        return []
    idle = int(g["idle_ns"].sum())
    parts = {k: int(g[f"idle_{k}_ns"].sum()) for k in ("host", "dependency", "other")}
    share = {k: f"{ms(v)} ms ({pct(100.0 * v / idle)})" for k, v in parts.items()}
    line = (f"GPU idle {ms(idle)} ms: host-bound {share['host']} (the launch came after the GPU "
            f"went idle), dependency {share['dependency']} (queued, waiting on a sync, event or "
            f"peer), other {share['other']}")  # fmt: skip
    lines = [line]
    if not a.idle_gaps.is_empty():
        top = a.idle_gaps.sort("gap_ns", descending=True).row(0, named=True)
        where = f", CPU thread in NVTX range {top['nvtx']!r}" if top["nvtx"] else ""
        lines.append(f"largest idle gap: {ms(top['gap_ns'])} ms at {top['start_ns']:,} ns "
                     f"({top['kind']}{where})")  # fmt: skip
    return lines


def launch_lines(a: TraceAnalysis) -> list[str]:
    """The command, the performance-relevant environment and the host, one item each."""
    d = launch_dict(a.launch, a.launch_config)
    out = []
    if d["command"]:
        out.append("command: " + " ".join(d["command"]))
    if d["config"]:
        out.append("contract settings: " + ", ".join(f"{k}={v}" for k, v in d["config"].items()))
    if d["working_dir"]:
        out.append(f"working directory: {d['working_dir']}")
    if d["environment"]:
        out.append("environment: " + ", ".join(f"{k}={v}" for k, v in d["environment"].items())
                   + f" (of {d['environment_variables']} variables)")  # fmt: skip
    if d["host"]:
        out.append("host: " + ", ".join(f"{k} {v}" for k, v in d["host"].items()))
    return out


def graph_table(a: TraceAnalysis) -> Table:
    header = ("GPU", "replays", "whole-graph rows", "whole ms", "contents unknown ms",
              "node kernels", "node ms", "node comm ms")  # fmt: skip
    labels = {(r["pid"], r["device"]): gpu_label(r) for r in a.gpus.iter_rows(named=True)}
    rows = tuple(
        (labels.get((r["pid"], r["device"]), f"pid {r['pid']} dev {r['device']}"),
         count(r["replays"]), count(r["whole_rows"]), ms(r["whole_ns"]), ms(r["unknown_ns"]),
         count(r["node_kernels"]), ms(r["node_ns"]), ms(r["node_comm_ns"]))
        for r in a.graphs.per_gpu.iter_rows(named=True)
    )  # fmt: skip
    return Table("CUDA graphs per GPU (ms are unions)", header, rows, (False,) + (True,) * 7)


def class_table(a: TraceAnalysis) -> Table:
    header = ("GPU", "class", "kernels", "sum of durations ms", "union ms")
    labels = {(r["pid"], r["device"]): gpu_label(r) for r in a.gpus.iter_rows(named=True)}
    rows = tuple(
        (labels.get((r["pid"], r["device"]), ""), r["class"], count(r["count"]), ms(r["sum_ns"]),
         ms(r["union_ns"]))
        for r in a.classes.iter_rows(named=True)
        if r["count"]
    )  # fmt: skip
    return Table("Kernel classes (sum of durations is not wall time; union is)", header, rows,
                 (False, False, True, True, True))  # fmt: skip


def nvtx_table(a: TraceAnalysis, top: int = TOP_NVTX) -> Table:
    header = ("NVTX range (CPU side)", "count", "total ms")
    rows = tuple(
        (r["name"], count(r["count"]), ms(r["total_ns"]))
        for r in a.nvtx.head(top).iter_rows(named=True)
    )
    more = len(a.nvtx) - top
    title = "NVTX ranges by total CPU-side duration"
    if more > 0:
        title += f" (top {top} of {len(a.nvtx)}; --format json lists all)"
    return Table(title, header, rows, (False, True, True))


def unclassified_table(a: TraceAnalysis, options: ReportOptions | None = None) -> Table:
    header = ("unclassified kernel name", "count", "sum ms")
    names = (options or ReportOptions()).names(a.unclassified["name"].to_list(), 80)
    rows = tuple(
        (name, count(r["count"]), ms(r["sum_ns"]))
        for name, r in zip(names, a.unclassified.iter_rows(named=True), strict=True)
    )
    return Table("Busiest kernels no rule recognised (extend with --rules FILE)", header, rows,
                 (False, True, True))  # fmt: skip


def iteration_table(a: TraceAnalysis) -> Table:
    header = ("iteration", "step ms", "comm ms", "hidden ms", "exposed ms", "hidden %", "idle ms")
    rows = tuple(
        (str(r["step"]), ms(r["step_ns"]), ms(r["comm_ns"]), ms(r["hidden_ns"]),
         ms(r["exposed_ns"]), pct(r["hidden_pct"]), ms(r["idle_ns"]))
        for r in a.iterations.iter_rows(named=True)
    )  # fmt: skip
    where = "GPU" if a.step_timeline == "gpu" else "CPU"
    title = f"Per iteration (all GPUs together; step = {where} period)"
    return Table(title, header, rows, (False,) + (True,) * 6)


def wall_lines(a: TraceAnalysis) -> list[str]:
    """The verdict, then its evidence, thresholds, knobs (and GPUs that disagree), each a line."""
    w = a.wall
    ev, th = w.evidence, w.thresholds
    lines = [
        f"Dominant wall: {w.wall} — {w.reason}",
        f"evidence: exposed comm {ms(ev.get('exposed_comm_ns'))} ms "
        f"({pct(ev.get('exposed_comm_pct_of_span'))} of span), idle {ms(ev.get('idle_ns'))} ms "
        f"({pct(ev.get('idle_pct_of_span'))} of span), memory: {memory_text(ev)}",
        f"thresholds: exposed comm ≥ {th['exposed_comm_pct_of_span']:g} % of span, idle ≥ "
        f"{th['idle_pct_of_span']:g} % of span, peak memory ≥ {th['memory_peak_pct']:g} %",
        "knobs: " + "; ".join(w.knobs),
    ]
    if len({v.wall for v in a.gpu_walls}) > 1:
        lines.append("per GPU: " + ", ".join(
            f"{gpu_label(r)}: {v.wall}"
            for r, v in zip(a.gpus.iter_rows(named=True), a.gpu_walls, strict=True)
        ))  # fmt: skip
    return lines


def memory_text(ev: dict) -> str:
    if "peak_allocated_bytes" in ev:
        pct_text = pct(ev.get("peak_memory_pct"))
        return f"peak {ev['peak_allocated_bytes'] / 2**30:,.2f} GiB ({pct_text} of GPU memory)"
    return str(ev.get("memory_usage", "not captured"))


def optional_tables(a: TraceAnalysis, options: ReportOptions | None = None) -> list[Block]:
    """The tables a report shows only when the trace has that data (per iteration and NVTX
    folded: detail a reader opens on demand)."""
    tables: list[Block] = []
    if not a.iterations.is_empty():
        tables.append(Details("Per iteration", (iteration_table(a),)))
    if not a.nvtx.is_empty():
        tables.append(Details("NVTX ranges", (nvtx_table(a),)))
    if not a.unclassified.is_empty():
        tables.append(unclassified_table(a, options or ReportOptions()))
    return tables


def notes(a: TraceAnalysis) -> list[str]:
    """What the trace did not capture, what the reader left out, and window hints."""
    return (
        [f"{k}: {v}" for k, v in a.not_captured.items()]
        + [f"warning: {w}" for w in a.warnings]
        + warmup_hint(a)
    )
