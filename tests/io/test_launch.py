"""The launch as the export recorded it, secrets redacted at the reader: the real nsysai exports
hold API keys and task secrets, which must appear in no output of any format."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from nsysmoe.api import analyze, compare, load, render
from nsysmoe.io.redact import REDACTED, redact, redact_argv, redact_text
from tests.conftest import require_shared

FILES = ("nsysai-2gpu-before.sqlite", "nsysai-2gpu-after.sqlite")
SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|credential|auth")


def raw_secrets(path: Path) -> set[str]:
    """Every non-empty value of a credential-named variable, read with plain sqlite3, from the
    environment rows and from TARGET_INFO_SYSTEM_ENV's DeviceEnvironment."""
    rows = []
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        rows += [v for (v,) in conn.execute(
            "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE'")]
        for (v,) in conn.execute(
                "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'"):
            rows += v.split(";")
    out = set()
    for row in rows:
        name, _, value = row.partition("=")
        value = value.strip('"')
        if SECRET_NAME.search(name) and len(value) >= 4:
            out.add(value)
    return out


@pytest.fixture(scope="module")
def secrets() -> dict[str, set[str]]:
    traces = require_shared()
    found = {f: raw_secrets(traces / "nsys" / f) for f in FILES}
    assert all(found.values()), "the nsysai exports should hold secrets to redact"
    return found


def test_the_launch_is_read(traces: Path) -> None:
    launch = load(traces / "nsys" / FILES[0]).launch
    assert launch.command[0] == "torchrun" and "--nproc_per_node=2" in launch.command
    assert launch.system["NvDriverVersion"] == "580.95.05"
    assert launch.environment["NCCL_VERSION"] == "2.25.1-1"
    assert launch.environment["MODAL_TASK_SECRET"] == REDACTED


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json", "html"])
def test_no_secret_in_any_output(traces: Path, secrets, fmt: str, tmp_path: Path) -> None:
    paths = [traces / "nsys" / f for f in FILES]
    every = set().union(*secrets.values())
    outputs = [render(analyze(p), fmt) for p in paths] + [render(compare(*paths), fmt)]
    for out in outputs:
        leaked = [s for s in every if s in out]
        assert not leaked, f"{len(leaked)} secret value(s) in {fmt} output"
    # nor in the cache a run leaves behind
    for p in paths:
        load(p, cache_dir=tmp_path)
    stored = b"".join(f.read_bytes() for f in tmp_path.rglob("*") if f.is_file())
    assert not [s for s in every if s.encode() in stored]


def test_secret_names_and_megatron_options() -> None:
    from nsysmoe.io.redact import secret_name

    for name in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "MODAL_TASK_SECRET", "--hf-token", "db.password", "openaiApiKey", "GITHUB_PAT"):
        assert secret_name(name), name
    for name in ("--moe-token-dispatcher-type", "--tokenizer-model", "--max-tokens-to-oom",
                 "NCCL_IB_HCA", "KEY_FILE", "--moe-router-load-balancing-type"):
        assert not secret_name(name), name


def test_redaction_rules() -> None:
    assert redact("WANDB_API_KEY", "abc123") == REDACTED
    assert redact("HF_TOKEN", "") == ""  # an empty value reveals nothing
    assert redact("NCCL_IB_HCA", "mlx5_0") == "mlx5_0"
    assert redact("DATA_URL", "https://alice:pw@host/x") == f"https://{REDACTED}@host/x"
    assert REDACTED in redact("NOTE", "token hf_abcdefghijklmnopqrstuvwxyz123 here")
    assert redact_text("s3://AKIAABCDEFGHIJKLMNOP@bucket") == f"s3://{REDACTED}@bucket"
    argv = ["train.py", "--api-key", "s3cr3t", "--wandb_token=t0k", "lr=3e-4",
            "db.password=hunter2", "--tp", "2"]  # fmt: skip
    assert redact_argv(argv) == ["train.py", "--api-key", REDACTED, f"--wandb_token={REDACTED}",
                                 "lr=3e-4", f"db.password={REDACTED}", "--tp", "2"]  # fmt: skip


def test_a_nul_separated_environment_is_split() -> None:
    """nsys 2022.4 exports store ``DeviceEnvironment`` NUL-separated (values hold ``;``): every
    variable is read on its own, as plain sqlite3 splits it."""
    path = require_shared() / "nsys" / "nersc-ddp-4gpu-baseline.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        (raw,) = db.execute(
            "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'DeviceEnvironment'").fetchone()
    names = {part.split("=", 1)[0] for part in raw.split("\x00") if "=" in part}
    env = load(str(path)).launch.environment
    assert len(names) > 300 and set(env) == names
    assert not any("\x00" in v for v in env.values())
    assert env["WORLD_SIZE"] == "4" and env["NSIGHT_SYSTEMS_VERSION"] == "2021.3.2.4"


def test_a_semicolon_joined_environment_keeps_values_that_hold_semicolons() -> None:
    """nsys 2023 and later join ``DeviceEnvironment`` with ';' unescaped. A value holding ';'
    (LS_COLORS, Lmod's path lists, an exported bash function) stays whole: split only where a
    variable's name and '=' follow. The old split made ``31:*.aac`` and 109 more variables of
    nvfuser-h100's LS_COLORS (303 read where its environment holds 193)."""
    from nsysmoe.io.launch import _env_parts

    raw = ("A=1;LS_COLORS=rs=0:di=01;34:ln=01;36:*.tar=01;31;BASH_FUNC_ml%%=() {  eval $(x)\n};"
           "__LMOD_REF_COUNT_PATH=/opt/a:1;/opt/b:1;_=/usr/bin/python")
    assert _env_parts(raw) == ["A=1", "LS_COLORS=rs=0:di=01;34:ln=01;36:*.tar=01;31",
                               "BASH_FUNC_ml%%=() {  eval $(x)\n}",
                               "__LMOD_REF_COUNT_PATH=/opt/a:1;/opt/b:1", "_=/usr/bin/python"]
    env = load(str(require_shared() / "nsys" / "nvfuser-h100-schema3.16.sqlite")).launch.environment
    assert len(env) == 193 and not [k for k in env if not re.fullmatch(r"[A-Za-z_]\w*(%%)?", k)]
    assert env["LS_COLORS"].count(";") > 50
