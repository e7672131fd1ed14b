"""Keeping credentials out of everything verifylab writes or prints: launch flags, parameters, server logs,
URLs, the environment. The package's one secret policy.

A name is secret when it is a key, token, secret, password, passphrase, cookie, bearer, session or credential
(``api_key``, ``--admin-api-key``, ``hf_token``, ``db_password``, ``SMTP_PASS``) — but not a count or a
tokenizer (``max_total_tokens``, ``tokenizer_path``). A value is secret when it looks like one wherever it
stands: ``Authorization: Bearer …``, a URL's ``user:password@``, ``token@`` or ``?api_key=…``, or a token by its
shape (GitHub's ``ghp_…``, Hugging Face's ``hf_…``, ``sk-live-…``, AWS key ids, Slack, GitLab, npm, PyPI, JWTs) under
any name. Prose is not a secret: "verify pass: fused" keeps its words (an English word before ": " hides only a
credential-shaped value). Of the environment only the names that matter to a measurement are recorded
(:data:`MEASUREMENT_ENV`). Secrets are replaced by ``<redacted>``; everything else is left byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"
# snake_case names (flags are normalised to it): *api_key*, *_token (not *_tokens, *_tokenizer, *_token_*), ...
_SECRET_NAME = re.compile(
    r"(?:[a-z0-9_]*api_key[a-z0-9_]*|(?:[a-z0-9]+_)*token|[a-z0-9_]*secret[a-z0-9_]*|[a-z0-9_]*passw(?:or)?d[a-z0-9_]*"
    r"|[a-z0-9_]*credential[a-z0-9_]*|auth(?:_[a-z0-9]+)*|[a-z0-9_]*_auth|[a-z0-9_]*access_key[a-z0-9_]*)",
)
# name=value / name: value / "name": "value" in free text (SGLang logs its ServerArgs as name=value pairs)
_ASSIGNMENT = re.compile(
    r"""(?P<name>["']?(?P<bare>[A-Za-z][A-Za-z0-9_-]*)["']?\s*[=:]\s*)(?P<value>'[^']*'|"[^"]*"|[^\s,)}\]]+)"""
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^/\s@]+)@")
_URL_TOKEN = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<password>[^/\s:@]+)@")  # https://tok@host
# a URL's query parameter (?api_key=... &token=...): the assignments below see a URL's "http:" first and read the
# rest of it as that name's value
_URL_QUERY = re.compile(r"(?P<name>[?&;](?P<bare>[A-Za-z][A-Za-z0-9_.-]*)=)(?P<value>[^&#;\s'\"]+)")
# Tokens known by their shape wherever they stand (a label, a note, an unknown variable): each vendor's prefix and
# enough random characters after it that no word, path or flag name matches.
_TOKEN_SHAPE = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face
    r"|(?:sk|rk|pk)[-_](?:live|test|proj|ant|svcacct)[-_][A-Za-z0-9_-]{12,}|sk-[A-Za-z0-9]{32,}"  # Stripe, OpenAI, ...
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|xox[abeprs]-[A-Za-z0-9-]{10,}"  # Slack
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"  # npm, PyPI
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
    r"|dckr_pat_[A-Za-z0-9_-]{20,}"  # Docker personal access token
    r"|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}"  # Slack webhook
    r"|-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----[\s\S]{0,16384}?(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY"
    r"( BLOCK)?-----|\Z)"  # a private key block, to its end (or the text's, when cut)
    r")"
)
# key=value pairs of connection strings whose value is a credential (Azure's AccountKey, SharedAccessKey, a SAS sig)
_CONNECTION_SECRET = re.compile(
    r"(?i)(?P<name>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|sig|Password|Pwd)=)(?P<value>[^;\s&\"']{6,})"
)
# English words that name a secret only in a key (SMTP_PASS=..., "token": ...), not in prose ("verify pass: fused")
_PROSE_WORDS = frozenset(
    {"pass", "token", "session", "secret", "cookie", "bearer", "credential", "credentials", "auth"}
)
_CREDENTIAL_LIKE = re.compile(r"(?=[^\s]*[A-Za-z])(?=[^\s]*[0-9])[A-Za-z0-9._~+/=-]{8,}")
_AUTH_HEADER = re.compile(r"(?i)\b(?P<kind>bearer|basic|token)(?P<gap>\s+)(?P<password>[A-Za-z0-9._~+/=-]{8,})")
# parts of a snake_case name that make it secret on their own (SMTP_PASS, SESSION_COOKIE, DB_PASSPHRASE)
_SECRET_PARTS = frozenset(
    {"pass", "passwd", "password", "passphrase", "cookie", "cookies", "bearer", "secret", "credential",
     "credentials", "session", "jwt"}
)  # fmt: skip
# The environment a run records: what changes a measurement (CUDA, NCCL, torch, SGLang, FlashInfer, verifylab).
MEASUREMENT_ENV = (
    "CUDA_",
    "NCCL_",
    "NVSHMEM_",
    "NVIDIA_",
    "TORCH_",
    "PYTORCH_",
    "SGLANG_",
    "SGL_",
    "FLASHINFER_",
    "VERIFYLAB_",
    "OMP_NUM_THREADS",
)


def is_secret_name(name: str) -> bool:
    """Whether a parameter, flag or field name holds a credential (``--api-key``, ``hf_token``, ...)."""
    snake = name.strip().lstrip("-").replace("-", "_").lower()
    return bool(snake) and (_SECRET_NAME.fullmatch(snake) is not None or not _SECRET_PARTS.isdisjoint(snake.split("_")))


def redact_args(args: list[str]) -> list[str]:
    """A command line with the values of secret flags redacted (``--api-key X`` and ``--api-key=X``)."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("--"):
            flag, eq, _value = arg.partition("=")
            if is_secret_name(flag):
                if eq:
                    out.append(f"{flag}={REDACTED}")
                    continue
                hide_next = True
        out.append(redact_text(arg))
    return out


def redact_text(text: str) -> str:
    """Free text (a log, a note, a URL) with secret assignments and URL passwords redacted."""

    def assignment(match: re.Match) -> str:
        if not _is_secret_assignment(match):
            return match.group(0)
        value = match.group("value")
        quote = value[0] if value[:1] in ("'", '"') else ""
        return f"{match.group('name')}{quote}{REDACTED}{quote}"

    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@", text)
    text = _URL_TOKEN.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _URL_QUERY.sub(
        lambda m: f"{m.group('name')}{REDACTED}" if is_secret_name(m.group("bare")) else m.group(0), text
    )
    text = _AUTH_HEADER.sub(lambda m: f"{m.group('kind')}{m.group('gap')}{REDACTED}", text)
    text = _TOKEN_SHAPE.sub(REDACTED, text)
    text = _CONNECTION_SECRET.sub(lambda m: f"{m.group('name')}{REDACTED}", text)
    return _ASSIGNMENT.sub(assignment, text)


def _is_secret_assignment(match: re.Match) -> bool:
    """Whether ``name: value`` / ``name=value`` in free text assigns a credential: a secret name with a value, but an
    unquoted English word before ": " only when the value looks like a credential (letters and digits, 8 or more)."""
    name, value = match.group("bare"), match.group("value")
    if not is_secret_name(name) or value in ("None", "''", '""', REDACTED):
        return False
    prose = name.lower() in _PROSE_WORDS and name == name.lower() and not match.group("name").startswith(("'", '"'))
    if prose and re.search(r":\s", match.group("name")):
        return _CREDENTIAL_LIKE.fullmatch(value.strip("'\"")) is not None
    return True


def measurement_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a manifest records: only :data:`MEASUREMENT_ENV` names, a secret-named one as
    ``<redacted>``, every value with its credential-looking parts redacted."""
    kept: dict[str, str] = {}
    for name in sorted(env):
        if name.upper().startswith(MEASUREMENT_ENV):
            kept[name] = REDACTED if is_secret_name(name) else redact_text(env[name])
    return kept


def redact_obj(obj: Any) -> Any:
    """Parameters as stored in a manifest: secret keys' values, secret flags in argument lists, URL passwords."""
    if isinstance(obj, dict):
        return {
            k: REDACTED if is_secret_name(str(k)) and v not in (None, "") else redact_obj(v) for k, v in obj.items()
        }
    if isinstance(obj, list):
        if all(isinstance(x, str) for x in obj):
            return redact_args(obj)
        return [redact_obj(x) for x in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_environment(env: Mapping[str, str]) -> dict[str, str]:
    """An environment as it may be shown: a secret-named variable's value replaced by its name's placeholder, every
    other value with its credential-looking parts redacted (whatever wrote it: a manifest may be old or edited)."""
    return {name: REDACTED if is_secret_name(name) else redact_text(str(value)) for name, value in env.items()}


def secret_values(obj: Any) -> set[str]:
    """The credentials inside parameters (the values ``redact_obj`` hides): to scrub them from what else is written
    with those parameters, such as an executed notebook's injected cell, its metadata and its outputs."""
    found: set[str] = set()
    if isinstance(obj, dict):
        for key, value in obj.items():
            if is_secret_name(str(key)) and value not in (None, ""):
                found.add(str(value))
            else:
                found |= secret_values(value)
    elif isinstance(obj, list) and all(isinstance(x, str) for x in obj):
        for i, arg in enumerate(obj):
            flag, eq, value = arg.partition("=")
            if arg.startswith("--") and is_secret_name(flag):
                found.add(value if eq else (obj[i + 1] if i + 1 < len(obj) else ""))
            found |= _text_secrets(arg)
    elif isinstance(obj, list):
        for item in obj:
            found |= secret_values(item)
    elif isinstance(obj, str):
        found |= _text_secrets(obj)
    return {s for s in found if s and s != REDACTED}


def _text_secrets(text: str) -> set[str]:
    values = {
        m.group("password") for pattern in (_URL_CREDENTIALS, _URL_TOKEN, _AUTH_HEADER) for m in pattern.finditer(text)
    }
    values |= {m.group(0) for m in _TOKEN_SHAPE.finditer(text)}
    for match in _ASSIGNMENT.finditer(text):
        value = match.group("value").strip("'\"")
        if _is_secret_assignment(match) and value:
            values.add(value)
    return values


def scrub(obj: Any, secrets: set[str]) -> Any:
    """``obj`` (JSON-like) with every occurrence of each secret inside its strings replaced; keys are left alone."""
    if not secrets:
        return obj
    if isinstance(obj, dict):
        return {key: scrub(value, secrets) for key, value in obj.items()}
    if isinstance(obj, list):
        return [scrub(item, secrets) for item in obj]
    if isinstance(obj, str):
        for secret in sorted(secrets, key=len, reverse=True):
            obj = obj.replace(secret, REDACTED)
    return obj


# Every control sequence a terminal acts on: string commands (OSC, DCS, SOS, PM, APC: a clipboard write, a title,
# a hyperlink) with their payload up to BEL or ST, CSI sequences (cursor moves, line erasure, colours), two-byte
# escapes, their 8-bit (C1) forms, and the remaining C0 controls but tab and newline (a carriage return or backspace
# that overprints a line).
_STRING_COMMAND = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)?"
_CSI = r"(?:\x1b\[|\x9b)[0-?]{0,64}[ -/]{0,16}[@-~]?"
_TERMINAL_CODE = re.compile(rf"{_STRING_COMMAND}|{_CSI}|\x1b[ -/]*[0-~]?|[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
_COLOUR = re.compile(r"\x1b\[[0-9;]{0,64}m")


def strip_terminal_codes(text: str, keep_colour: bool = False) -> str:
    """``text`` without any control sequence a terminal would act on (see ``_TERMINAL_CODE``): what a run records is
    plain text, and what is printed back (a kept answer, a kernel's log) can move no cursor, write no clipboard and
    erase no line. ``keep_colour``: SGR colour sequences (``ESC [ ... m``) are kept, nothing else."""
    if not keep_colour:
        return _TERMINAL_CODE.sub("", text)
    out, at = [], 0
    for colour in _COLOUR.finditer(text):
        out += [_TERMINAL_CODE.sub("", text[at : colour.start()]), colour.group()]
        at = colour.end()
    out.append(_TERMINAL_CODE.sub("", text[at:]))
    return "".join(out)
