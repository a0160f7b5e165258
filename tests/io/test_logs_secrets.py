"""Secrets in a training log's arguments never reach a report: ``nsysmoe steps`` in every format
on an A/B whose logs carry credentials in the console arguments block and in a metrics JSON's
model_config.yaml, while ordinary arguments stay readable (issue 33 review)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsysmoe.api import example_paths
from nsysmoe.cli import cli
from nsysmoe.io.logs import TrainingLog, read_log, redacted

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
# built here, not written out whole, so no scanner mistakes the test for a leak
HF = "hf_" + "Qx7Lm2Vb9Rt4Wz8Kp3Nd"
USER, PASSWORD = "alice", "Pa55w0rd" + "Xyz"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
BEARER = "tok3n" + "V4lue99zzQ"
ARG_PASSWORD = "hunter2" + "hunter2"
#: what no output may hold (the URL's user info, each value)
LEAKS = (HF, f"{USER}:", PASSWORD, AWS, BEARER, ARG_PASSWORD)
#: (Megatron argument name, value) planted in the off log; each a different rule
PLANTED = (
    ("hf_token", HF),  # a credential's name
    ("data_path", f"s3://{USER}:{PASSWORD}@bucket/data"),  # URL user info
    ("object_store_id", AWS),  # a token's shape under an ordinary name
    ("http_header", f"Authorization: Bearer {BEARER}"),  # Bearer
    ("wandb_password", ARG_PASSWORD),  # a password argument
    ("extra_args", f"--hf-token={HF}"),  # a flag inside a value
)
FORMATS = ("terminal", "markdown", "json", "html")


def _arg(name: str, value: str) -> str:
    """One line of Megatron's arguments block (``_print_args``: the name, dots, the value)."""
    return f"  {name} {'.' * (48 - len(name))} {value}\n"


def _console_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The shipped example logs with secrets in the off log's arguments block, and ordinary
    arguments that differ (so the report's table of differing arguments shows them)."""
    off_src, on_src = example_paths("logs")
    end = "-------------------- end of arguments ---------------------"
    planted = "".join(_arg(name, value) for name, value in PLANTED)
    off, on = tmp_path / "off.log", tmp_path / "on.log"
    model = _arg("tokenizer_model", "meta-llama/Llama-3.1-8B")
    off.write_text(off_src.read_text().replace(end, planted + model + end))
    model = _arg("tokenizer_model", "meta-llama/Llama-3.1-70B")
    flex, alltoall = (_arg("moe_token_dispatcher_type", v) for v in ("flex", "alltoall"))
    on.write_text(on_src.read_text().replace(end, model + end).replace(flex, alltoall))
    return off, on


def _json_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The interval-10 metrics JSON twice, the off side's model_config.yaml with secrets in
    MODEL_ARGS and ENV_VARS."""
    metrics = (DATA / "megatron-json-interval10" / "golden_values.json").read_bytes()
    planted = "".join(f"  --{name.replace('_', '-')}: {value}\n" for name, value in PLANTED)
    paths = []
    for side, extra, model in (("off", planted, "Llama-3.1-8B"), ("on", "", "Llama-3.1-70B")):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "golden_values.json").write_bytes(metrics)
        (folder / "model_config.yaml").write_text(
            f"ENV_VARS:\n  HF_TOKEN: {HF}\n  AWS_ACCESS_KEY_ID: {AWS}\nMODEL_ARGS:\n"
            f"  --log-interval: 10\n  --tokenizer-model: meta-llama/{model}\n"
            f"  --moe-token-dispatcher-type: {'flex' if extra else 'alltoall'}\n{extra}"
        )
        paths.append(folder / "golden_values.json")
    return paths[0], paths[1]


@pytest.mark.parametrize("pair", [_console_pair, _json_pair], ids=["console", "metrics-json"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_steps_shows_no_secret_in_any_format(tmp_path: Path, pair, fmt: str) -> None:  # noqa: ANN001
    off, on = pair(tmp_path)
    result = CliRunner().invoke(cli, ["steps", str(off), str(on), "--format", fmt],
                                catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    for leak in LEAKS:
        assert leak not in out, (fmt, leak)
    # ordinary arguments stay readable: names and values
    for readable in ("--tokenizer-model", "meta-llama/Llama-3.1-8B", "--moe-token-dispatcher-type",
                     "alltoall", "--data-path", "@bucket/data"):  # fmt: skip
        assert readable in out, (fmt, readable)


def test_read_log_redacts_config_values_by_rule(tmp_path: Path) -> None:
    off, _ = _console_pair(tmp_path)
    config = read_log(off).config
    assert config["--hf-token"] == config["--wandb-password"] == "[redacted]"
    assert config["--data-path"] == "s3://[redacted]@bucket/data"
    assert config["--object-store-id"] == "[redacted]"
    assert config["--http-header"].startswith("Authorization: [redacted]")
    assert config["--extra-args"] == "--hf-token=[redacted]"
    assert config["--tokenizer-model"] == "meta-llama/Llama-3.1-8B"
    assert config["--moe-token-dispatcher-type"] == "flex"
    assert config["--global-batch-size"] == "256"


def test_the_gate_redacts_notes() -> None:
    log = read_log(DATA / "megatron-lm.log")
    dirty = TrainingLog(**{**log.__dict__, "notes": (f"token={HF} at s3://{USER}:{PASSWORD}@b",)})
    (note,) = redacted(dirty).notes
    assert not any(leak in note for leak in LEAKS) and re.search(r"s3://\[redacted\]@b", note)
