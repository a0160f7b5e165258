"""Round three of hostile inputs, secrets and stale caches (issue 31, points 1-3): secrets planted
in every metadata string an export can carry must reach no file any run writes — stdout, stderr,
``-o``, ``--plot``, the trace cache and the result cache — in any format; and a cache must not
serve a file whose ``-wal`` or hot ``-journal`` holds changes the reader would refuse.

Every case edits a private copy of the shipped example exports (never the originals)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from nsysmoe import api
from nsysmoe.errors import NsysmoeError
from nsysmoe.io.redact import REDACTED, redact, redact_argv, redact_text, secret_name
from tests.fixtures.schema import load_schema
from tests.fuzz.harness import Case, hold, run_subprocess

OFF, ON = api.example_paths("nsys")
KINETO = api.example_paths("kineto")[1]

#: the planted secrets: each value is unique, so any leak of it (or of its middle, SECRET_CORE)
#: is found wherever it lands
SAS = "sv=2020-08-04&ss=b&srt=co&sp=r&se=2030-01-01&sig=SASsig0Secret4x9Q%2Fw%3D"
ARGS = [
    "-c",
    "torchrun t.py --hf-token hfXYZsecret --lr=3e-4 --wandb-api-key=WandbKey0Secret1 "
    f"'--data-path=https://acct.blob.core.windows.net/c/d?{SAS}' --db-pass=DbPass0Secret2 "
    "--header 'Authorization: Bearer BearerTok0Secret3' --api-key ApiKey0Secret4",
]
ENV_ROWS = {
    "AZURE_STORAGE_CONNECTION_STRING": '"DefaultEndpointsProtocol=https;AccountName=a;'
                                       'AccountKey=AzAccountKey0Secret5==;EndpointSuffix=x.net"',
    "GPG_PASSPHRASE": "GpgPhrase0Secret6",
    "SSH_PRIVATE_KEY_PEM": "SshPem0Secret7",
    "DATABASE_URL": "postgres://u:PgPw0Secret8@db:5432/x",
    "PGPASSWORD": "PgPassword0Secret9",
    "HF_TOKEN": "hf_HfTok0Secret10abcdefghijklmno",
    "NCCL_DEBUG": "INFO",  # kept: no secret
}  # fmt: skip
SECRETS = [
    "hfXYZsecret", "WandbKey0Secret1", "SASsig0Secret4x9Q", "DbPass0Secret2",
    "BearerTok0Secret3", "ApiKey0Secret4", "AzAccountKey0Secret5", "GpgPhrase0Secret6",
    "SshPem0Secret7", "PgPw0Secret8", "PgPassword0Secret9", "HfTok0Secret10",
    "GraphTok0Secret11", "SysEnvTok0Secret12", "OSDESCTOK0SECRET", "GpuTok0Secret14",
    "VersionTok0Secret15", "WorkDirPw0Secret16", "EnvCmdTok0Secret17", "PyCodeTok0Secret18",
    "KinetoTok0Secret19", "GeneratorTok0Secret20",
]  # fmt: skip
#: token-shaped values (caught by their shape, whatever they are called)
GHP = "ghp_GraphTok0Secret11abcdefghijklmnopqrst"
AKIA = "AKIAOSDESCTOK0SECRET"


def _ddl(conn: sqlite3.Connection, table: str) -> None:
    """Create ``table`` from the real 2024.5 DDL when the copy lacks it."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
        conn.execute(load_schema("3.13.2").statements[table])


def plant(src: Path, dst: Path) -> Path:
    """A writable copy of ``src`` with a secret in every metadata string an export carries."""
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    conn = sqlite3.connect(dst)
    try:
        conn.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:ARGUMENT_%' "
                     "OR name IN ('PROCESS_0:COMMAND', 'PROCESS_0:WORKING_DIR')")  # fmt: skip
        rows = [("PROCESS_0:COMMAND", "bash"),
                ("PROCESS_0:WORKING_DIR", "https://me:WorkDirPw0Secret16@host/ws")]  # fmt: skip
        rows += [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(ARGS)]
        rows += [("PROCESS_0:ENVIRONMENT_VARIABLE", f"{k}={v}") for k, v in ENV_ROWS.items()]
        # a second process: env K=V, python -c
        rows += [("PROCESS_1:COMMAND", "env"),
                 ("PROCESS_1:ARGUMENT_0", "HF_TOKEN=EnvCmdTok0Secret17"),
                 ("PROCESS_1:ARGUMENT_1", "python"), ("PROCESS_1:ARGUMENT_2", "-c"),
                 ("PROCESS_1:ARGUMENT_3", "import os; os.environ['WANDB_API_KEY']="
                                          "'PyCodeTok0Secret18'"),
                 ("CUDA_GRAPH_TRACE_OPTIONS:TOKEN_HINT", GHP)]  # fmt: skip
        conn.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", rows)
        conn.execute("UPDATE META_DATA_EXPORT SET value = value || ' sk-VersionTok0Secret15xyz' "
                     "WHERE name = 'EXPORT_PRODUCT_VERSION'")  # fmt: skip
        conn.execute("UPDATE TARGET_INFO_GPU SET name = name || ' token=GpuTok0Secret14'")
        _ddl(conn, "TARGET_INFO_SYSTEM_ENV")
        conn.executemany(
            "INSERT INTO TARGET_INFO_SYSTEM_ENV (globalVid, devStateName, name, nameEnum, value) "
            "VALUES (0, 'x', ?, 0, ?)",
            [("DeviceEnvironment", "A=1;MY_SECRET=SysEnvTok0Secret12;B=2"),
             ("OsDescription", f"Ubuntu 22.04 {AKIA}"), ("NvDriverVersion", "580.95.05")])
        conn.commit()
    finally:
        conn.close()
    return dst


def plant_kineto(dst: Path) -> Path:
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    doc.setdefault("distributedInfo", {})["nccl_version"] = "2.21 hf_KinetoTok0Secret19abcdefgh"
    doc["generatedBy"] = "gen sk-GeneratorTok0Secret20abcdef"
    dst.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    return dst


def leaks(data: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in data]


def written(root: Path, inputs: set[Path]) -> dict[Path, bytes]:
    """Every file under ``root`` but the inputs: what the runs wrote."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p not in inputs}


# --- the rules, one form each -------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "hidden"), [
    (["bash", "-c", "torchrun t.py --hf-token hfXYZsecret"], "hfXYZsecret"),
    (["sh", "-c", "python t.py --lr=3e-4 --wandb-api-key=X1secret"], "X1secret"),
    (["t.py", "--lr=3e-4 --wandb-api-key=X2secret"], "X2secret"),
    (["t.py", "--data-path=https://a.blob.core.windows.net/c?sv=1&sig=X3secret&se=2"], "X3secret"),
    (["t.py", "--db-pass=X4secret"], "X4secret"),
    (["t.py", "--db-pass", "X5secret"], "X5secret"),
    (["env", "HF_TOKEN=X6secret", "python", "t.py"], "X6secret"),
    (["python", "-c", "import os; os.environ['HF_TOKEN']='X7secret'"], "X7secret"),
    (["bash", "-c", "sh -c \"t.py --api-key 'X8secret'\""], "X8secret"),
    (["t.py", "--url", "https://user:X9secret@host/x"], "X9secret"),
    (["curl", "-H", "Authorization: Bearer X10secretvalue"], "X10secretvalue"),
    (["t.py", "--conn", "Server=s;Password=X11secret;Db=d"], "X11secret"),
    (["bash", "-c", "t.py --sas-token 'X12 secret'"], "X12 secret"),
    (["bash", "-c", "t.py --hf-token X13secret 'unbalanced"], "X13secret"),
])  # fmt: skip
def test_each_form_of_a_secret_in_a_command_line_is_redacted(argv: list[str],
                                                             hidden: str) -> None:  # fmt: skip
    got = redact_argv(argv)
    assert hidden not in " ".join(got) and REDACTED in " ".join(got), got
    assert got[0] == argv[0]


def test_a_shell_command_keeps_what_is_not_secret() -> None:
    got = redact_argv(["bash", "-c", "torchrun t.py --hf-token x --lr=3e-4 --tp 2 'a b'"])
    assert got == ["bash", "-c", f"torchrun t.py --hf-token {REDACTED} --lr=3e-4 --tp 2 'a b'"]
    clean = ["python", "pretrain_gpt.py", "--moe-token-dispatcher-type", "flex",
             "--tokenizer-model", "/m/tok.model", "--max-tokens-to-oom", "12000",
             "--data-path", "/data/Qwen3/MoE30B/ckpt2025/iter0001000/mp0",
             "--load", "Llama3_70B_Instruct_checkpoint2024", "--commit", "a3f5c9e2b7d14e6f8a9b0c1d"]
    assert redact_argv(clean) == clean  # fmt: skip


@pytest.mark.parametrize(("name", "value"), [
    ("AZURE_STORAGE_CONNECTION_STRING", "DefaultEndpointsProtocol=https;AccountKey=Y1;X=y"),
    ("GPG_PASSPHRASE", "Y2"), ("SSH_PRIVATE_KEY_PEM", "Y3"), ("PGPASSWORD", "Y4"),
    ("MYSQL_PWD", "Y5"), ("AWS_SECRET_ACCESS_KEY", "Y6"), ("X_AMZ_SIGNATURE", "Y7"),
])  # fmt: skip
def test_secret_variable_names(name: str, value: str) -> None:
    assert secret_name(name), name
    assert redact(name, value) == REDACTED


@pytest.mark.parametrize(("text", "hidden"), [
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=Z1k==;EndpointSuffix=x", "Z1k"),
    ("postgres://u:Z2pw@db:5432/x", "Z2pw"),
    ("https://a.blob.core.windows.net/c?sig=Z3s%2F&sv=1", "Z3s"),
    ("https://h/p?X-Amz-Credential=Z4c&X-Amz-Signature=Z4s", "Z4"),
    ("mode token: Z5tokenvalue", "Z5tokenvalue"),
    ("key ghp_Z6abcdefghijklmnopqrstuvwxyz0123", "Z6abcdef"),
    ("-----BEGIN RSA PRIVATE KEY-----\nZ7body\n-----END RSA PRIVATE KEY-----", "Z7body"),
    ("random wJalrXUtnFEMI/K7MDENG/bPxRfiCYZ8EXAMPLEKEY here", "bPxRfiCYZ8"),
])  # fmt: skip
def test_secrets_inside_free_text(text: str, hidden: str) -> None:
    got = redact_text(text)
    assert hidden not in got and REDACTED in got, got


def test_free_text_keeps_what_is_not_secret() -> None:
    for text in ("NVIDIA H100 80GB HBM3", "2024.5.1.113-245134619542v0", "Node",
                 "Ubuntu 22.04.4 LTS", "https://github.com/NVIDIA/Megatron-LM?tab=readme",
                 "MegatronLM_MoE_Qwen3_30B_A3B_run17", "Qwen3-235B-A22B-Instruct-2507",
                 "moe token dispatcher", "--moe-token-dispatcher-type alltoall"):  # fmt: skip
        assert redact_text(text) == text


# --- every file any run writes ------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    d = tmp_path_factory.mktemp("planted")
    return (plant(OFF, d / "off.sqlite"), plant(ON, d / "on.sqlite"),
            plant_kineto(d / "on.pt.trace.json.gz"))  # fmt: skip


def test_the_planted_exports_hold_the_secrets(planted: tuple[Path, Path, Path]) -> None:
    """The scan below can fail: the secrets are in the inputs, byte for byte."""
    off, _, kin = planted
    assert set(leaks(off.read_bytes())) >= set(SECRETS) - {"KinetoTok0Secret19",
                                                            "GeneratorTok0Secret20"}
    assert set(leaks(gzip.decompress(kin.read_bytes()))) >= {"KinetoTok0Secret19",
                                                              "GeneratorTok0Secret20"}


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json", "html"])
def test_no_planted_secret_in_any_file_any_run_writes(fmt: str, planted: tuple[Path, Path, Path],
                                                      tmp_path: Path) -> None:  # fmt: skip
    off, on, kin = planted
    work = tmp_path / "work"
    work.mkdir()
    env = (("NSYSMOE_CACHE_DIR", str(work / "cache")), ("FORCE_COLOR", "1"))
    runs = [
        ("analyze", str(off), str(on), "--format", fmt, "--cache"),  # stored
        ("analyze", str(off), str(on), "--format", fmt, "--cache"),  # served from the cache
        ("analyze", str(on), "--format", fmt, "--cache", "-o", str(work / f"one.{fmt}")),
        ("analyze", str(off), str(on), "--format", fmt, "--plot", str(work / "figs"),
         "-o", str(work / f"ab.{fmt}")),
        ("analyze", str(kin), "--format", fmt, "--cache"),
        ("analyze", str(work / "ab"), "--format", fmt),  # refused: no such file
    ]  # fmt: skip
    seen = b""
    for args in runs:
        got = hold(Case(f"secrets-{fmt}", args, (off, on, kin), frozenset({0, 2}), env))
        seen += (got.out + got.err).encode()
    files = written(work, {off, on, kin})
    assert any(p.suffix == ".png" for p in files) and any("cache" in p.parts for p in files)
    assert any(p.name == "meta.json" for p in files)  # the trace cache was written
    # and the result cache (an HTML page draws its figures from the traces: no cached result)
    assert any(p.name == "result.json" for p in files) or fmt == "html"
    assert not leaks(seen), leaks(seen)
    for path, data in files.items():
        assert not leaks(data), f"{path.relative_to(work)}: {leaks(data)}"
    assert REDACTED.encode() in seen  # the launch was shown, redacted


def test_no_planted_secret_in_the_api_results(planted: tuple[Path, Path, Path],
                                              tmp_path: Path) -> None:  # fmt: skip
    off, on, kin = planted
    trace = api.load(off, cache_dir=tmp_path)
    assert not leaks(repr(trace.launch).encode() + repr(trace.graph_trace).encode()
                     + repr(trace.gpus.to_dicts()).encode() + str(trace.product_version).encode())
    assert trace.launch.environment["NCCL_DEBUG"] == "INFO"
    assert trace.launch.command[:2] == ("bash", "-c")
    c = api.compare(off, on)
    assert not leaks(repr(c).encode() + repr(c.to_polars()).encode())
    assert not leaks(repr(api.load(kin)).encode())


def test_a_cache_entry_stored_before_redaction_is_never_served(
    planted: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace cache's format is part of its key: an entry the code that stored secrets wrote
    (format 6: the trace as read, nothing redacted) is another name, never read."""
    from nsysmoe.io import _read, cache

    off = planted[0]
    raw = _read(off)  # what format 6 stored
    assert leaks(repr(raw.launch).encode())
    with monkeypatch.context() as m:
        m.setattr(cache, "FORMAT", 6)
        assert cache.store(tmp_path, off, raw) is None
        assert cache.load(tmp_path, off) is not None  # stored, under format 6's name
    assert cache.load(tmp_path, off) is None
    trace = api.load(off, cache_dir=tmp_path)
    assert not leaks(repr(trace.launch).encode() + repr(trace.graph_trace).encode()
                     + repr(trace.gpus.to_dicts()).encode() + str(trace.product_version).encode())


# --- a stale cache on a live database -----------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "live.sqlite"
    shutil.copyfile(ON, path)
    path.chmod(0o644)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("fmt", ["json", "terminal"])
def test_cache_does_not_serve_a_file_with_an_uncheckpointed_wal(fmt: str, tmp_path: Path) -> None:
    """A WAL-mode export, cached while its log was empty; then a writer commits changes that
    stay in the ``-wal`` (the file itself, and so its fingerprint, unchanged)."""
    path = _copy(tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.close()  # the last connection checkpoints and removes the log; the file stays WAL-mode
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    first = run_subprocess(("analyze", str(path), "--format", fmt, "--cache"), env.items())
    assert first.code == 0, first.err
    api.analyze(path, cache_dir=tmp_path / "cache")  # the API's entries too
    before = _sha(path)
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 2 = 0")
        writer.commit()
        assert path.with_name(path.name + "-wal").stat().st_size > 0
        assert _sha(path) == before  # what makes a stale entry look fresh
        plain = run_subprocess(("analyze", str(path), "--format", fmt), ())
        cached = run_subprocess(("analyze", str(path), "--format", fmt, "--cache"), env.items())
        assert plain.code == cached.code == 2
        assert cached.err == plain.err and "-wal beside it may hold changes" in cached.err
        assert cached.out == ""
        with pytest.raises(NsysmoeError, match="-wal beside it"):
            api.load(path, cache_dir=tmp_path / "cache")
        with pytest.raises(NsysmoeError, match="-wal beside it"):
            api.analyze(path, cache_dir=tmp_path / "cache")
    finally:
        writer.close()


def test_cache_does_not_serve_a_file_with_a_hot_journal(tmp_path: Path) -> None:
    """A file cached with no journal beside it; then a live rollback journal appears (a writer
    mid-transaction) while the file's bytes stay as they were, so its fingerprint alone would
    still name the entry: the cached run refuses it as a plain run does."""
    from nsysmoe.fingerprint import JOURNAL_MAGIC

    path = _copy(tmp_path)
    env = {"NSYSMOE_CACHE_DIR": str(tmp_path / "cache")}
    first = run_subprocess(("analyze", str(path), "--format", "json", "--cache"), env.items())
    assert first.code == 0, first.err
    before = _sha(path)
    path.with_name(path.name + "-journal").write_bytes(JOURNAL_MAGIC + b"\0" * 504)
    assert _sha(path) == before  # what makes a stale entry look fresh
    plain = run_subprocess(("analyze", str(path), "--format", "json"), ())
    cached = run_subprocess(("analyze", str(path), "--format", "json", "--cache"), env.items())
    assert plain.code == cached.code == 2
    assert cached.err == plain.err and "-journal beside it" in cached.err, cached.err
    assert cached.out == ""


def test_pending_writes_sees_what_the_reader_refuses(tmp_path: Path) -> None:
    from nsysmoe.fingerprint import JOURNAL_MAGIC, PendingWrites, file_key, pending_writes

    path = _copy(tmp_path)
    assert pending_writes(path) is None
    side = path.with_name(path.name + "-journal")
    side.write_bytes(b"\0" * 16)  # a journal that is not live (zeroed header): no change pending
    assert pending_writes(path) is None
    side.write_bytes(JOURNAL_MAGIC + b"\0" * 8)
    assert pending_writes(path) == (side, "journal")
    with pytest.raises(PendingWrites):
        file_key(path)
    os.remove(side)
    path.with_name(path.name + "-wal").write_bytes(b"x")
    assert pending_writes(path)[1] == "wal"
