"""How the run was launched, as the export recorded it: the command and its arguments, each
process's environment, and the host (driver, CUDA, OS) — with every secret redacted here, at the
reader, so no later stage and no output can ever hold one.

nsys writes the launch into ``META_DATA_CAPTURE`` (``PROCESS_n:COMMAND``, ``…:ARGUMENT_k``,
``…:WORKING_DIR``, ``…:ENVIRONMENT_VARIABLE`` rows of ``NAME="value"``) and the host into
``TARGET_INFO_SYSTEM_ENV`` (``NvDriverVersion``, ``CudaDriverVersion``, ``OsDescription``,
``DeviceEnvironment`` — the environment again, as ``K=V;K=V``, or NUL-separated in exports of
nsys 2022.4 and older). Real exports hold API keys and
task secrets in both places (the shared ``nsysai-2gpu-*`` exports do).

Redacted (:func:`redact`): the value of any variable or option whose name looks like a
credential (:func:`secret_name`), the user info of any URL (``scheme://user:pass@host``), and
values shaped like well-known tokens (:data:`SECRET_VALUE`) wherever they appear.
"""

from __future__ import annotations

import re

from nsysmoe.io.nsys_db import Db
from nsysmoe.model import Launch

REDACTED = "[redacted]"
#: a name is a credential's when its last word is one of these (``HF_TOKEN``, ``WANDB_API_KEY``,
#: ``--db.password``), or any word is one of :data:`SECRET_ANYWHERE`; a last-word rule, so
#: Megatron's ``--moe-token-dispatcher-type`` or ``--tokenizer-model`` stay readable
SECRET_LAST = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential",
               "credentials", "cookie", "signature", "dsn", "auth", "bearer", "pat"}  # fmt: skip
SECRET_ANYWHERE = {"secret", "password", "passwd", "credential", "credentials", "privatekey",
                   "apikey"}  # fmt: skip
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def secret_name(name: str) -> bool:
    """Whether ``name`` (a variable or option) names a credential."""
    words = [w.lower() for w in _WORDS.findall(name)]
    return bool(words) and (words[-1] in SECRET_LAST or bool(SECRET_ANYWHERE & set(words)))


#: values that are secrets whatever they are called: tokens of well-known services
SECRET_VALUE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{16,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)"
)
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_ENV_ROW = re.compile(r'^([^=\s]+)=(.*)$', re.DOTALL)


def redact_text(text: str) -> str:
    """A free text with URL user info and token-shaped values redacted."""
    text = URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return SECRET_VALUE.sub(REDACTED, text)


def redact(name: str, value: str) -> str:
    """The value of ``name`` as it may be shown: redacted when the name looks like a credential,
    else with any URL user info and token-shaped part redacted."""
    if secret_name(name) and value not in ("", '""'):
        return REDACTED
    return redact_text(value)


def redact_argv(argv: list[str]) -> list[str]:
    """Command-line arguments with the values of credential-like options redacted, in both the
    ``--api-key=V`` and the ``--api-key V`` forms, and ``key=value`` overrides too."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, value = arg.partition("=")
        if eq and secret_name(name):
            out.append(f"{name}={REDACTED}")
        elif arg.startswith("-") and not eq and secret_name(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(redact_text(arg))
    return out


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def read_launch(db: Db) -> Launch:
    """The launch of an nsys export (:class:`~nsysmoe.model.Launch`), secrets redacted; empty
    when the export recorded none."""
    argv: dict[int, dict[int, str]] = {}
    command: dict[int, str] = {}
    env: dict[str, str] = {}
    workdir = ""
    t = "META_DATA_CAPTURE"
    if db.has(t) and {"name", "value"} <= db.columns(t):
        for name, value in db.conn.execute(f"SELECT name, value FROM {t}"):
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            proc, _, key = name.partition(":") if name.startswith("PROCESS_") else ("", "", name)
            n = int(proc.removeprefix("PROCESS_")) if proc[8:].isdigit() else 0
            if key == "COMMAND":
                command[n] = value
            elif key.startswith("ARGUMENT_") and key[9:].isdigit():
                argv.setdefault(n, {})[int(key[9:])] = value
            elif key == "WORKING_DIR":
                workdir = redact_text(value)
            elif key == "ENVIRONMENT_VARIABLE" and (m := _ENV_ROW.match(value)):
                env[m.group(1)] = redact(m.group(1), _unquote(m.group(2)))
    system: dict[str, str] = {}
    t = "TARGET_INFO_SYSTEM_ENV"
    if db.has(t) and {"name", "value"} <= db.columns(t):
        for name, value in db.conn.execute(f"SELECT name, value FROM {t}"):
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            if name == "DeviceEnvironment":  # the environment again: K=V;K=V (NUL-separated
                for part in value.split("\x00" if "\x00" in value else ";"):  # before 2022.4)
                    if m := _ENV_ROW.match(part):
                        env.setdefault(m.group(1), redact(m.group(1), _unquote(m.group(2))))
                continue
            system[name] = redact(name, value)
    first = min(command) if command else None
    args = [argv.get(first, {})[k] for k in sorted(argv.get(first, {}))] if first is not None \
        else []  # fmt: skip
    cmd = [command[first], *args] if first is not None else []
    return Launch(
        command=tuple(redact_argv(cmd)),
        working_dir=workdir,
        environment={k: env[k] for k in sorted(env)},
        system={k: system[k] for k in sorted(system)},
    )

