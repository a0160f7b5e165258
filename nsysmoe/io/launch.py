"""How the run was launched, as the export recorded it: the command and its arguments, each
process's environment, and the host (driver, CUDA, OS). Read as recorded here; every secret in
it is redacted at the one gate every trace passes (:func:`nsysmoe.io.redact.redact_trace`, called
by :func:`nsysmoe.io.load_trace`), before any cache, analysis or output sees it.

nsys writes the launch into ``META_DATA_CAPTURE`` (``PROCESS_n:COMMAND``, ``…:ARGUMENT_k``,
``…:WORKING_DIR``, ``…:ENVIRONMENT_VARIABLE`` rows of ``NAME="value"``) and the host into
``TARGET_INFO_SYSTEM_ENV`` (``NvDriverVersion``, ``CudaDriverVersion``, ``OsDescription``,
``DeviceEnvironment`` — the environment again, as ``K=V;K=V``, or NUL-separated in exports of
nsys 2022.4 and older). Real exports hold API keys and
task secrets in both places (the shared ``nsysai-2gpu-*`` exports do).
"""

from __future__ import annotations

import re

from nsysmoe.io.export_tables import ExportTables
from nsysmoe.model import Launch

_ENV_ROW = re.compile(r'^([^=\s]+)=(.*)$', re.DOTALL)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


#: a ";" that starts another variable: one followed by a POSIX name (or bash's exported
#: function, ``BASH_FUNC_name%%``) and "="
_NEXT_VARIABLE = re.compile(r";(?=[A-Za-z_][A-Za-z0-9_]*(?:%%)?=)")


def _env_parts(value: str) -> list[str]:
    """``DeviceEnvironment``'s variables. nsys 2022.4 and older separate them with NULs
    (exact); later ones join them with ";" unescaped, so a value holding ";" (``LS_COLORS``,
    Lmod's ``__LMOD_REF_COUNT_*`` path lists) is split only where a variable's name and "="
    follow: ``fi=33;1:di=31;1`` stays one value, as the NUL-separated export of the same report
    has it."""
    return value.split("\x00") if "\x00" in value else _NEXT_VARIABLE.split(value)


def read_launch(db: ExportTables) -> Launch:
    """The launch of an nsys export (:class:`~nsysmoe.model.Launch`) as recorded (not yet
    redacted: :func:`nsysmoe.io.redact.redact_trace` does that); empty when none was recorded."""
    argv: dict[int, dict[int, str]] = {}
    command: dict[int, str] = {}
    env: dict[str, str] = {}
    workdir = ""
    t = "META_DATA_CAPTURE"
    if db.has(t) and {"name", "value"} <= db.columns(t):
        for name, value in db.rows(t, ["name", "value"]):
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            proc, _, key = name.partition(":") if name.startswith("PROCESS_") else ("", "", name)
            n = int(proc.removeprefix("PROCESS_")) if proc[8:].isdigit() else 0
            if key == "COMMAND":
                command[n] = value
            elif key.startswith("ARGUMENT_") and key[9:].isdigit():
                argv.setdefault(n, {})[int(key[9:])] = value
            elif key == "WORKING_DIR":
                workdir = value
            elif key == "ENVIRONMENT_VARIABLE" and (m := _ENV_ROW.match(value)):
                env[m.group(1)] = _unquote(m.group(2))
    system: dict[str, str] = {}
    t = "TARGET_INFO_SYSTEM_ENV"
    if db.has(t) and {"name", "value"} <= db.columns(t):
        for name, value in db.rows(t, ["name", "value"]):
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            if name == "DeviceEnvironment":  # the environment again (see _env_parts)
                for part in _env_parts(value):
                    if m := _ENV_ROW.match(part):
                        env.setdefault(m.group(1), _unquote(m.group(2)))
                continue
            system[name] = value
    first = min(command) if command else None
    args = [argv.get(first, {})[k] for k in sorted(argv.get(first, {}))] if first is not None \
        else []  # fmt: skip
    cmd = [command[first], *args] if first is not None else []
    return Launch(
        command=tuple(cmd),
        working_dir=workdir,
        environment={k: env[k] for k in sorted(env)},
        system={k: system[k] for k in sorted(system)},
    )

