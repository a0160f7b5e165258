"""The measurement contract read from the exports' own launch (issue 14): the variable under
test declared (``--vary``) or inferred, every difference marked variable / consequence /
incidental / unexpected, ``--strict`` failing only on the unexpected, the validity gates
(backend not in use, benchmark-only, graph trace mode), and the labels the reports use."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.ab.variables import file_labels
from nsysmoe.errors import UsageError
from nsysmoe.renderers import render
from tests.conftest import require_shared
from tests.fixtures.generate import moe_step_scenario, write_export
from tests.fixtures.scenarios import megatron_command
from tests.fixtures.spec import GraphTraceOptions

SMALL = {"steps": 4, "layers": 1, "microbatches": 2, "warmup_steps": 1}


def export(path: Path, *, overlap: bool, dispatcher: str = "hybridep",
           command: tuple[str, ...] | None = None, environment: tuple[tuple[str, str], ...] = (),
           graph: GraphTraceOptions | None = None) -> str:  # fmt: skip
    """A small MoE run whose launch records ``command`` (default: Megatron's, as the
    scenario writes it) and ``environment``."""
    spec, _ = moe_step_scenario(dispatcher=dispatcher, overlap=overlap, **SMALL)
    proc = spec.processes[0]
    spec.processes[0] = dataclasses.replace(proc, command=command or proc.command,
                                            environment=environment)  # fmt: skip
    if graph is not None:
        spec = dataclasses.replace(spec, graph_options=graph)
    return str(write_export(path, spec))


def checks(c) -> dict[str, object]:  # noqa: ANN001 - a Comparison
    return {ch.name: ch for ch in c.contract.checks}


def roles(c) -> dict[str, str]:  # noqa: ANN001
    return {ch.name: ch.role for ch in c.contract.checks if ch.role != "same"}


def unwrapped(text: str) -> str:
    """Report text with its line wrapping undone (the terminal wraps at 100 columns)."""
    return " ".join(text.split())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nsysmoe", "analyze", *args],
                          capture_output=True, text=True, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def overlap_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("overlap")
    return (export(d / "run-a.sqlite", overlap=False), export(d / "run-b.sqlite", overlap=True))


def test_only_the_overlap_flag_differs_matched_variable_named_labels(overlap_pair) -> None:
    c = api.compare(*overlap_pair)
    assert c.contract.matched, c.contract.summary()
    (var,) = c.contract.variables
    assert (var.key, var.kind, var.off, var.on, var.declared) == (
        "overlap_moe_expert_parallel_comm", "config", None, "true", False)
    assert "the only setting that differs" in c.contract.note
    assert (c.off.name, c.on.name) == ("overlap off", "overlap on")
    assert (c.off.label, c.on.label) == ("off", "on")  # the JSON keys stay
    assert roles(c) == {"overlap_moe_expert_parallel_comm": "variable",
                        "NVTX ranges": "consequence"}  # the EP-overlap schedule's ranges
    md = render(c, "markdown")
    assert md.startswith("### nsysmoe A/B: overlap off vs on\n")
    assert "| metric (all GPUs) | overlap off | overlap on |" in md
    assert "variable under test: overlap_moe_expert_parallel_comm" in md
    doc = json.loads(render(c, "json"))
    assert doc["labels"] == {"off": "overlap off", "on": "overlap on"}
    assert doc["contract"]["variables"][0]["key"] == "overlap_moe_expert_parallel_comm"
    assert {ch["check"]: ch["role"] for ch in doc["contract"]["checks"]}[
        "overlap_moe_expert_parallel_comm"] == "variable"
    # declared in any spelling: the same variable, said to be declared
    for name in ("overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm"):
        d = api.compare(*overlap_pair, vary=(name,))
        assert d.contract.matched and d.contract.variables[0].declared
        assert d.contract.note == "declared with --vary"


def test_the_cli_strict_passes_and_labels_override(overlap_pair) -> None:
    out = cli(*overlap_pair, "--strict")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("overlap off vs on, all GPUs")
    out = cli(*overlap_pair, "--labels", "baseline,EP overlap", "--format", "markdown")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("### nsysmoe A/B: baseline vs EP overlap\n")
    assert "| check | baseline | EP overlap |" in out.stdout
    for bad in ("one", "a,b,c", "same,same", ",x"):
        out = cli(*overlap_pair, "--labels", bad)
        assert out.returncode == 2 and out.stderr.count("\n") == 1, (bad, out.stderr)
        assert "--labels" in out.stderr


def test_ep_size_differing_too_is_not_matched_and_named(tmp_path: Path) -> None:
    off = export(tmp_path / "ep1-off.sqlite", overlap=False)
    on = export(tmp_path / "ep2-on.sqlite", overlap=True,
                command=megatron_command(0, "hybridep", True, ep=2))  # fmt: skip
    c = api.compare(off, on)
    assert not c.contract.matched and not c.contract.variables
    got = checks(c)
    assert (got["ep"].off, got["ep"].on, got["ep"].role) == ("1", "2", "unexpected")
    assert got["overlap_moe_expert_parallel_comm"].role == "unexpected"
    assert got["NVTX ranges"].role == "unexpected"  # no variable explains the schedule's ranges
    assert "2 settings differ" in c.contract.note and "--vary" in c.contract.note
    assert (c.off.name, c.on.name) == ("ep1-off", "ep2-on")  # file names: no one variable
    summary = c.contract.summary()
    assert "ep differs" in summary and "overlap_moe_expert_parallel_comm differs" in summary
    out = cli(off, on, "--strict")
    assert out.returncode == 2 and "ep differs" in out.stderr and "--vary" in out.stderr
    # both declared: matched, both the variable
    d = api.compare(off, on, vary=("overlap_moe_expert_parallel_comm", "ep"))
    assert d.contract.matched, d.contract.summary()
    assert {k: v for k, v in roles(d).items() if v == "variable"} == {
        "ep": "variable", "overlap_moe_expert_parallel_comm": "variable"}


def test_nersc_bucket_cap_with_vary_nccl_is_matched_and_strict_passes() -> None:
    t = require_shared() / "nsys"
    off, on = (str(t / f"nersc-ddp-4gpu-{n}.sqlite") for n in ("baseline", "bucketcap100mb"))
    plain = api.compare(off, on)
    assert not plain.contract.matched and checks(plain)["kernels"].role == "unexpected"
    assert "--vary nccl" in plain.contract.note
    c = api.compare(off, on, vary=("nccl",))
    assert c.contract.matched, c.contract.summary()
    assert [(v.key, v.kind) for v in c.contract.variables] == [("nccl", "channel")]
    kernels = checks(c)["kernels"]
    assert kernels.role == "variable" and "ncclKernel_AllReduce_RING_LL_Sum_float" in kernels.detail
    # the environment (NUL-separated in these 2022.4 exports) differs only in job facts
    assert {ch.name: ch.role for ch in c.contract.checks if ch.role != "same"} == {
        "kernels": "variable", "other environment": "incidental"}
    assert (c.off.name, c.on.name) == ("baseline", "bucketcap100mb")
    assert cli(off, on, "--vary", "nccl", "--strict").returncode == 0
    strict = cli(off, on, "--strict")
    assert strict.returncode == 2 and "--vary nccl" in strict.stderr


def test_nsysai_pair_lists_what_differs() -> None:
    t = require_shared() / "nsys"
    c = api.compare(str(t / "nsysai-2gpu-before.sqlite"), str(t / "nsysai-2gpu-after.sqlite"))
    got = roles(c)
    assert got["kernels"] == "unexpected" and got["NVTX ranges"] == "unexpected"
    assert got["other environment"] == "incidental"  # MODAL_TASK_ID, the region, …
    assert "MODAL_CLOUD_PROVIDER" in checks(c)["other environment"].detail
    assert "different work" in c.contract.note
    assert (c.off.name, c.on.name) == ("before", "after")


def test_an_env_variable_alone_is_the_variable_and_incidental_ones_are_not(tmp_path: Path) -> None:
    job = (("SLURM_JOB_ID", "1"),)
    off = export(tmp_path / "a.sqlite", overlap=False, environment=job)
    on = export(tmp_path / "b.sqlite", overlap=False,
                environment=(("SLURM_JOB_ID", "2"), ("NCCL_ALGO", "Tree")))  # fmt: skip
    c = api.compare(off, on)
    assert c.contract.matched, c.contract.summary()
    assert [(v.key, v.kind, v.off, v.on) for v in c.contract.variables] == [
        ("NCCL_ALGO", "environment", None, "Tree")]
    assert (c.off.name, c.on.name) == ("NCCL_ALGO unset", "NCCL_ALGO=Tree")
    assert roles(c) == {"NCCL_ALGO": "variable", "other environment": "incidental"}
    # an incidental difference alone: matched, no variable, no label from it
    same = api.compare(off, export(tmp_path / "c.sqlite", overlap=False,
                                   environment=(("SLURM_JOB_ID", "3"),)))  # fmt: skip
    assert same.contract.matched and not same.contract.variables
    assert (same.off.name, same.on.name) == ("a", "c")


def test_vary_names_nothing_or_a_setting_that_does_not_differ(overlap_pair) -> None:
    with pytest.raises(UsageError, match="--vary bogus: not a contract setting"):
        api.compare(*overlap_pair, vary=("bogus",))
    out = cli(*overlap_pair, "--vary", "bogus")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "overlap_moe_expert_parallel_comm" in out.stderr  # what does differ
    c = api.compare(*overlap_pair, vary=("--bf16",))
    assert not c.contract.matched
    bf16 = checks(c)["bf16"]
    assert bf16.role == "unexpected" and "nothing was varied" in bf16.detail
    assert "bf16 true on both sides: declared with --vary" in c.contract.summary()
    assert "bf16 differs" not in c.contract.summary()
    # a contract setting neither export recorded is taken as declared
    d = api.compare(*overlap_pair, vary=("overlap_moe_expert_parallel_comm", "seq_length"))
    assert d.contract.matched and checks(d)["seq_length"].off == "(not recorded)"


def test_backend_selected_but_not_in_use_fires_the_gate(tmp_path: Path) -> None:
    deepep = megatron_command(0, "deepep", False)  # flex + DeepEP on the command line …
    path = export(tmp_path / "fallback.sqlite", overlap=False, command=deepep)  # … HybridEP ran
    a = api.analyze(path)
    assert [cv.code for cv in a.caveats] == ["backend_not_in_use"]
    assert "this is not a timing of DeepEP" in a.caveats[0].text
    for fmt in ("terminal", "markdown", "html"):
        assert "this is not a timing of DeepEP" in unwrapped(render(a, fmt)), fmt
    assert json.loads(render(a, "json"))["traces"][0]["caveats"][0]["code"] == "backend_not_in_use"
    ok = api.analyze(export(tmp_path / "hybridep.sqlite", overlap=False))
    assert ok.caveats == ()
    really = api.analyze(export(tmp_path / "deepep.sqlite", overlap=False, dispatcher="deepep",
                                command=deepep))  # fmt: skip
    assert really.caveats == ()
    c = api.compare(path, export(tmp_path / "fallback-on.sqlite", overlap=True,
                                 command=megatron_command(0, "deepep", True)))  # fmt: skip
    assert not c.contract.matched
    backend = checks(c)["backend in use"]
    assert backend.role == "unexpected" and "not a timing of DeepEP" in backend.detail
    assert "not a timing of DeepEP" in unwrapped(render(c, "terminal"))


def test_forced_balancing_is_labelled_benchmark_only(tmp_path: Path) -> None:
    forced = ("--moe-router-force-load-balancing",)
    off = export(tmp_path / "f-off.sqlite", overlap=False,
                 command=megatron_command(0, "hybridep", False, extra=forced))  # fmt: skip
    on = export(tmp_path / "f-on.sqlite", overlap=True,
                command=megatron_command(0, "hybridep", True, extra=forced))  # fmt: skip
    a = api.analyze(off)
    assert [cv.code for cv in a.caveats] == ["benchmark_only"]
    assert "benchmark-only" in render(a, "terminal")
    c = api.compare(off, on)
    assert c.contract.matched and checks(c)["benchmark-only routing"].role == "same"
    assert "benchmark-only" in render(c, "markdown")


def test_graph_trace_mode_differing_breaks_the_contract(tmp_path: Path) -> None:
    off = export(tmp_path / "g-off.sqlite", overlap=False, graph=GraphTraceOptions("Graph"))
    on = export(tmp_path / "g-on.sqlite", overlap=True, graph=GraphTraceOptions("Node"))
    c = api.compare(off, on)
    assert not c.contract.matched
    mode = checks(c)["cuda_graph_trace"]
    assert (mode.off, mode.on, mode.role) == ("Graph", "Node", "unexpected")
    assert "--cuda-graph-trace" in mode.detail


def test_secrets_that_differ_stay_redacted_in_the_contract(tmp_path: Path) -> None:
    secret = "s3cr3t-value-that-must-not-leak"
    off = export(tmp_path / "a.sqlite", overlap=False, environment=(("WANDB_API_KEY", "x1"),),
                 command=(*megatron_command(0), "--hf-token", "tok-" + secret))  # fmt: skip
    on = export(tmp_path / "b.sqlite", overlap=True,
                environment=(("WANDB_API_KEY", secret),))  # fmt: skip
    c = api.compare(off, on)
    for fmt in ("terminal", "markdown", "json", "html"):
        assert secret not in render(c, fmt), fmt


def test_file_labels() -> None:
    nersc = ("x/nersc-ddp-4gpu-baseline.sqlite", "y/nersc-ddp-4gpu-bucketcap100mb.sqlite")
    assert file_labels(nersc) == ("baseline", "bucketcap100mb")
    assert file_labels(("a/run.sqlite", "b/run.sqlite")) == ("a/run", "b/run")
    assert file_labels(("moe-off.pt.trace.json.gz", "moe-on.pt.trace.json.gz")) == ("off", "on")
    assert file_labels(("run1.sqlite", "run2.sqlite")) == ("run1", "run2")  # no separator: whole


def test_kineto_headers_are_the_launch_and_their_versions_are_compared(tmp_path: Path) -> None:
    """A Kineto trace's ``distributedInfo`` (backend, world size, NCCL version) and CUDA versions
    are its launch; a different NCCL version is an unexpected difference, declarable."""
    import gzip

    paths = []
    for i, (src, nccl) in enumerate(zip(api.example_paths("kineto"), ("2.21.5", "2.23.4"),
                                        strict=True)):  # fmt: skip
        doc = json.loads(gzip.open(src, "rt").read())
        doc["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1,
                                  "nccl_version": nccl}  # fmt: skip
        doc["cuda_driver_version"] = 12080
        paths.append(tmp_path / f"k{i}.pt.trace.json")
        paths[-1].write_text(json.dumps(doc))
    a = api.load(str(paths[0]))
    assert a.launch.system == {"CudaDriverVersion": "12080", "DistributedBackend": "nccl",
                               "NcclVersion": "2.21.5", "WorldSize": "1"}  # fmt: skip
    c = api.compare(str(paths[0]), str(paths[1]))
    got = checks(c)["nccl_version"]
    assert (got.off, got.on, got.role) == ("2.21.5", "2.23.4", "unexpected")
    assert json.loads(render(c, "json"))["off"]["launch"]["host"]["NcclVersion"] == "2.21.5"
    d = api.compare(str(paths[0]), str(paths[1]), vary=("nccl_version",))
    assert d.contract.matched and checks(d)["nccl_version"].role == "variable"
