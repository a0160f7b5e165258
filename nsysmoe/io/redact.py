"""Secrets out of every string a trace's metadata brings, at the one gate every trace passes
(:func:`nsysmoe.io.load_trace` calls :func:`redact_trace` before anything else sees the trace:
the caches, the analysis, every output). A report is pasted into public PR reviews: one leaked
token is one too many, and a redaction that hides too much costs a reader only a value.

What is redacted, wherever it appears:

* the value of a variable, option or ``key=value`` pair whose name looks like a credential's
  (:func:`secret_name`: ``HF_TOKEN``, ``--db-pass``, ``AccountKey``, ``sig``, ``PGPASSWORD``),
  in a name/value pair of the metadata, in a command line tokenised as a shell would (``bash -c
  '…'``, ``python -c``, ``env K=V …``, ``--flag=value`` and ``--flag value``), inside free text
  (``…;AccountKey=X;…``, ``?sv=…&sig=X``, ``token: X``) and after ``Bearer``;
* the user info of any URL (``scheme://user:pass@host``);
* values shaped like well-known tokens (:data:`SECRET_VALUE`: Hugging Face, GitHub, OpenAI,
  Slack, AWS, Google, JWTs, PEM private keys) and long random-looking base64 runs
  (:func:`_random_looking`), whatever they are called.

Readable on purpose: Megatron's ``--moe-token-dispatcher-type``, ``--tokenizer-model``,
``--max-tokens…``, ``KEY_FILE`` (a name's *last* word decides, beside the few words that mark
a credential anywhere in a name).
"""

from __future__ import annotations

import math
import re
import shlex
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsysmoe.model import Launch, Trace

REDACTED = "[redacted]"
#: a name is a credential's when its last word is one of these (``HF_TOKEN``, ``WANDB_API_KEY``,
#: ``--db-pass``, ``sig`` of an Azure SAS URL) …
SECRET_LAST = {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "pass",
               "passphrase", "credential", "credentials", "cookie", "signature", "sig", "sas",
               "dsn", "auth", "authorization", "bearer", "pat", "pem"}  # fmt: skip
#: … or when it holds one of these anywhere, as a word, two joined words (``SSH_PRIVATE_KEY_PEM``,
#: ``AZURE_STORAGE_CONNECTION_STRING``) or inside one word (``PGPASSWORD``, ``MYSECRETVAR``)
SECRET_ANYWHERE = {"secret", "password", "passwd", "passphrase", "credential", "credentials",
                   "privatekey", "apikey", "accountkey", "accesskey", "secretkey",
                   "connectionstring", "sastoken"}  # fmt: skip
_INSIDE = ("password", "passwd", "passphrase", "secret", "credential", "privatekey", "apikey")
_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def secret_name(name: str) -> bool:
    """Whether ``name`` (a variable, option or key) names a credential."""
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words:
        return False
    pairs = {a + b for a, b in zip(words, words[1:], strict=False)}
    joined = "".join(words)
    return (words[-1] in SECRET_LAST or bool(SECRET_ANYWHERE & (set(words) | pairs))
            or any(w in joined for w in _INSIDE))  # fmt: skip


#: values that are secrets whatever they are called: tokens of well-known services
SECRET_VALUE = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|npm_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)"
    r"|-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|$)",
    re.DOTALL,
)
URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
#: ``name=value`` or ``name: value`` inside text (connection strings, query strings, YAML-ish
#: settings, ``--flag=value`` inside one argument); the value is quoted or runs to a separator
_PAIR = re.compile(
    r"(?<![\w.-])(-{0,2}[A-Za-z_][\w.-]*)(\s*(?:=|:(?!//))\s*)"
    r"(\"[^\"]*\"?|'[^']*'?|[^\s;&,?'\"]+)"
)
#: ``--secret-flag value`` inside text (the value does not start with a dash)
_FLAG_VALUE = re.compile(r"(?<![\w.-])(--?[A-Za-z_][\w.-]*)(\s+)(\"[^\"]*\"?|'[^']*'?|[^\s-]\S*)")
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=-]{8,})")
#: runs of the base64 alphabet long enough to be a key
_RUN = re.compile(r"[A-Za-z0-9+/=]{24,}")


def _random_looking(run: str) -> bool:
    """A base64 run that reads as random, not as a word, a version or a path: upper and lower
    case and digits mixed, few slashes, and near the entropy of random text."""
    if run.count("/") * 12 > len(run):  # a path has a slash every few characters
        return False
    if sum(c.isdigit() for c in run) < 2 or sum(c.isupper() for c in run) < 2 \
            or sum(c.islower() for c in run) < 2:  # fmt: skip
        return False
    n = len(run)
    entropy = -sum(k / n * math.log2(k / n) for k in Counter(run).values())
    return entropy >= min(4.0, 0.8 * math.log2(n))


def redact_text(text: str) -> str:
    """A free text with every secret it can be seen to hold redacted (see the module doc)."""
    text = SECRET_VALUE.sub(REDACTED, text)
    text = URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)

    def pair(m: re.Match[str]) -> str:
        return m.group(1) + m.group(2) + REDACTED if secret_name(m.group(1)) else m.group()

    text = _PAIR.sub(pair, text)
    text = _FLAG_VALUE.sub(pair, text)
    return _RUN.sub(lambda m: REDACTED if _random_looking(m.group()) else m.group(), text)


def redact(name: str, value: str) -> str:
    """The value of ``name`` as it may be shown: redacted when the name looks like a credential,
    else with every secret inside it redacted."""
    if secret_name(name) and value not in ("", '""', "''"):
        return REDACTED
    return redact_text(value)


#: how deep shell commands inside arguments are followed (``bash -c "sh -c '…'"``)
_MAX_DEPTH = 4


def redact_argv(argv: list[str] | tuple[str, ...], _depth: int = 0) -> list[str]:
    """Command-line arguments with secrets redacted: the values of credential-like options in the
    ``--api-key=V``, ``--api-key V`` and ``key=value`` forms, and every argument that holds a
    command of its own (``bash -c '…'``, ``python -c '…'``) tokenised as a shell would and
    redacted the same way, then as free text."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED if arg not in ("", '""', "''") else arg)
            hide_next = False
            continue
        name, eq, value = arg.partition("=")
        if eq and not any(c.isspace() for c in name) and secret_name(name):
            out.append(f"{name}={REDACTED}" if value else arg)
        elif arg.startswith("-") and not eq and secret_name(arg):
            out.append(arg)
            hide_next = True
        elif any(c.isspace() for c in arg) and _depth < _MAX_DEPTH:
            out.append(_redact_command(arg, _depth))
        else:
            out.append(redact_text(arg))
    return out


def _redact_command(text: str, depth: int) -> str:
    """One argument holding words of a command line: its tokens redacted as arguments, put
    back together with quotes only where a token needs them."""
    try:
        tokens = shlex.split(text)
    except ValueError:  # an unbalanced quote: words as a shell would nearly split them
        tokens = text.split()
    redacted = redact_argv(tokens, depth + 1)
    if redacted == tokens:
        return redact_text(text)
    return redact_text(" ".join(_quoted(t) for t in redacted))


def _quoted(token: str) -> str:
    if token and not any(c.isspace() or c in "'\"\\$`" for c in token):
        return token
    return shlex.quote(token)


def redact_launch(launch: Launch) -> Launch:
    """Every string of ``launch`` redacted: the command, the working directory, each variable of
    the environment and of the host (by its name and value; names too, as text)."""

    def pairs(d: dict[str, str]) -> dict[str, str]:
        return {redact_text(k): redact(k, v) for k, v in d.items()}

    return replace(
        launch,
        command=tuple(redact_argv(launch.command)),
        working_dir=redact_text(launch.working_dir),
        environment=pairs(launch.environment),
        system=pairs(launch.system),
        generated_by=None if launch.generated_by is None else redact_text(launch.generated_by),
    )


def redact_trace(trace: Trace) -> Trace:
    """``trace`` with every string its file's metadata brought redacted: versions, the graph
    trace options, the launch, the GPU names, and the reader's warnings and notes (they may
    quote the file). Kernel and NVTX names are trace content, not metadata, and stay as
    recorded."""
    import polars as pl

    def opt(s: str | None) -> str | None:
        return None if s is None else redact_text(s)

    gpus = trace.gpus
    if "gpu_name" in gpus.columns and gpus.height:
        names = gpus["gpu_name"].drop_nulls().unique().to_list()
        mapping = {n: redact_text(n) for n in names}
        if any(k != v for k, v in mapping.items()):
            gpus = gpus.with_columns(pl.col("gpu_name").replace(mapping))
    return replace(
        trace,
        schema_version=opt(trace.schema_version),
        product_version=opt(trace.product_version),
        graph_trace={redact_text(k): redact(k, v) for k, v in trace.graph_trace.items()},
        launch=redact_launch(trace.launch),
        gpus=gpus,
        warnings=tuple(redact_text(w) for w in trace.warnings),
        not_captured={k: redact_text(v) for k, v in trace.not_captured.items()},
    )
