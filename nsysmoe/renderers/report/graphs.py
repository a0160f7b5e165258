"""What a report says about CUDA graphs (:class:`~nsysmoe.results.Graphs`): how much GPU time ran
in them, what of it nobody can see inside, and which NVTX ranges were only captured, not run."""

from __future__ import annotations

from nsysmoe.renderers.cells import count, ms, pct
from nsysmoe.results import Graphs

NODE_ADVICE = (
    "record with `nsys profile --cuda-graph-trace=node` to see the kernels inside (and so the "
    "communication)"
)


def graph_lines(g: Graphs, active_ns: int, who: str = "") -> list[str]:
    """Sentences on ``g`` (none when no graph ran and none was captured); ``active_ns`` is the
    GPU-active union the shares are of; ``who`` prefixes each line (``off: ``)."""
    lines = []
    share = (lambda ns: f" ({pct(100.0 * ns / active_ns)} of GPU-active time)") if active_ns else (
        lambda ns: "")  # fmt: skip
    mode = g.recorded.get("MODE")
    option = f" (capture option MODE={mode})" if mode else ""
    if g.whole_rows:
        named = g.whole_ns - g.unknown_ns
        lines.append(
            f"CUDA graphs: {count(g.whole_rows)} replays were traced as whole graphs{option}, "
            f"{ms(g.whole_ns)} ms on the GPU{share(g.whole_ns)}; they count as GPU-active time. "
            + (f"{ms(g.unknown_ns)} ms of it has unknown contents, counted as compute: "
               "communication inside these graphs cannot be seen, so comm, hidden and exposed "
               f"leave it out; {NODE_ADVICE}, or name the graphs with a rule (nvtx = ...)."
               if g.unknown_ns else "Rules named every graph.")
            + (f" Rules named {ms(named)} ms of graphs." if named and g.unknown_ns else "")
        )  # fmt: skip
    if g.node_kernels:
        lines.append(
            f"CUDA graphs: {count(g.node_kernels)} kernels ran inside {count(g.replays)} graph "
            f"replays (traced per node{'; capture option MODE=' + mode if mode else ''}), "
            f"{ms(g.node_ns)} ms{share(g.node_ns)}; they are classified and "
            f"measured like any kernel (communication among them: {ms(g.node_comm_ns)} ms)."
        )
    if g.capture_nvtx:
        names = ", ".join(f"{n} ×{c}" for n, c in g.capture_nvtx[:5])
        more = f" and {len(g.capture_nvtx) - 5} more" if len(g.capture_nvtx) > 5 else ""
        lines.append(
            f"NVTX ranges pushed during CUDA-graph capture: {names}{more}. They exist once, at "
            "capture time, and launched no GPU work; their replays' work is attributed to the "
            "ranges around cudaGraphLaunch, and their CPU-side totals include the capture."
        )
    return [who + line for line in lines]
