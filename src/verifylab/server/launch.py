"""Launch and stop an SGLang server for one variant, wait for health, capture the log, classify failures,
and record the state actually in effect (server args, fusion enabled/skipped, speculative algorithm).

The launcher is a command (default ``python -m sglang.launch_server``); tests pass the test double's
command through the very same code path.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from pydantic import BaseModel, Field

from verifylab.errors import ServerError
from verifylab.guard import guarded_env
from verifylab.iorw import atomic_write_text
from verifylab.redact import redact_text

FAILURE_SIGNATURES = [
    (
        "sm120_jit_gate",
        r"No supported CUDA architectures found for major versions",
        "FlashInfer's JIT arch list excludes this GPU: open it (verifylab gates apply) or use FlashInfer >= 0.6.17",
    ),
    ("cuda_oom", r"CUDA out of memory|OutOfMemoryError", "lower --mem-fraction-static or the model/batch size"),
    (
        "nccl_error",
        r"NCCL error|ncclUnhandledCudaError|ncclSystemError|NCCL WARN",
        "NCCL failed: check P2P/topology, NCCL_DEBUG=INFO",
    ),
    ("unknown_argument", r"unrecognized arguments?|error: argument", "a flag this SGLang version does not know"),
    (
        "fusion_resolve",
        r"FlashInfer allreduce fusion requires SM90 or SM10X",
        "the fusion backend guard rejects this arch: verifylab gates apply",
    ),
    ("port_in_use", r"address already in use|Errno 98", "another process holds the port"),
    (
        "missing_package",
        r'requires "([\w.\-]+)" to be installed',
        "SGLang needs the Python package '{0}' at run time: install it beside SGLang",
    ),
    ("import_error", r"No module named '([\w.]+)'", "a Python dependency is missing: no module named '{0}'"),
    ("import_error", r"ModuleNotFoundError|ImportError", "a Python dependency is missing"),
]
_ERROR_LINE = re.compile(r"^\s*[\w.]+(?:Error|Exception)\b.*$", re.MULTILINE)
# Fusion *in effect*, from SGLang's log (0.5.11+: flashinfer_comm_fusion.py). Checked in this order: a skip or a
# failed workspace wins over an earlier success. "Auto-enabling ..." only says fusion was *requested*.
FUSION_LOG = [
    ("skipped", r"Skipping allreduce fusion|Disabling flashinfer allreduce fusion permanently"),
    ("enabled", r"AllReduce Fusion enabled and workspace initialized"),
]
GUARD_LOG = "verifylab multicast guard loaded"
# The workspace backend verifylab asks for: 'trtllm' (P2P buffers, no multicast). Never 'mnnvl' or 'auto' (which
# may pick mnnvl): mnnvl creates NVLink multicast objects.
FUSION_BACKEND = "trtllm"


class BaseConfig(BaseModel):
    """What every variant shares."""

    model_path: str
    tp_size: int = Field(1, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(30000, ge=1, le=65535)
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    attention_backend: str | None = None
    draft_model_path: str | None = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    extra_args: list[str] = Field(default_factory=list)
    launcher: list[str] = Field(default_factory=lambda: [sys.executable, "-m", "sglang.launch_server"])
    simulate_no_multicast: bool = Field(
        False,
        description="answer SGLang's multicast queries as a PCIe box without NVLink multicast would "
        "(verifylab.guard's sitecustomize): reproduces the 'Skipping allreduce fusion' preflight on NVLink GPUs",
    )


class Variant(BaseModel):
    """A named server configuration: which mechanisms it asks for."""

    name: str
    fusion: bool = False
    speculative: str | None = None  # EAGLE3, NGRAM, ...
    extra_args: list[str] = Field(default_factory=list)


DEFAULT_VARIANTS = {
    "baseline": Variant(name="baseline"),
    "fusion": Variant(name="fusion", fusion=True),
    "eagle3": Variant(name="eagle3", speculative="EAGLE3"),
    "eagle3_fusion": Variant(name="eagle3_fusion", fusion=True, speculative="EAGLE3"),
    "ngram": Variant(name="ngram", speculative="NGRAM"),
}


def launcher_help(launcher: list[str], timeout: float = 120.0) -> str:
    """The launcher's ``--help`` text (the installed SGLang's flags)."""
    try:
        proc = subprocess.run([*launcher, "--help"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"cannot run {shlex.join(launcher)} --help: {exc}") from None
    if proc.returncode != 0:
        raise ServerError(f"{shlex.join(launcher)} --help failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return proc.stdout


def known_flags(help_text: str) -> set[str]:
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", help_text))


def variant_args(base: BaseConfig, variant: Variant, help_text: str) -> list[str]:
    """The launch arguments of ``variant``, with the fusion flags this SGLang version knows."""
    flags = known_flags(help_text)
    args = [
        "--model-path",
        base.model_path,
        "--tp-size",
        str(base.tp_size),
        "--host",
        base.host,
        "--port",
        str(base.port),
    ]
    if base.mem_fraction_static is not None:
        args += ["--mem-fraction-static", str(base.mem_fraction_static)]
    if base.attention_backend:
        args += ["--attention-backend", base.attention_backend]
    if variant.fusion:
        if "--flashinfer-allreduce-fusion-backend" in flags:
            args += ["--flashinfer-allreduce-fusion-backend", FUSION_BACKEND]
        else:
            args += ["--enable-flashinfer-allreduce-fusion"]
    elif "--enforce-disable-flashinfer-allreduce-fusion" in flags:
        args += ["--enforce-disable-flashinfer-allreduce-fusion"]  # some versions auto-enable it for Kimi/DeepSeek
    if variant.speculative:
        args += ["--speculative-algorithm", variant.speculative]
        if variant.speculative.upper().startswith("EAGLE"):
            if not base.draft_model_path:
                raise ServerError(f"variant '{variant.name}' needs draft_model_path (--draft-model-path)")
            args += ["--speculative-draft-model-path", base.draft_model_path]
        args += [
            "--speculative-num-steps",
            str(base.speculative_num_steps),
            "--speculative-eagle-topk",
            str(base.speculative_eagle_topk),
            "--speculative-num-draft-tokens",
            str(base.speculative_num_draft_tokens),
        ]
    return args + base.extra_args + variant.extra_args


def check_flags(args: list[str], help_text: str) -> None:
    """Refuse, before anything starts, any flag the installed SGLang does not list in ``--help``."""
    flags = known_flags(help_text)
    unknown = [a.split("=")[0] for a in args if a.startswith("--") and a.split("=")[0] not in flags]
    if unknown:
        raise ServerError(f"the installed SGLang does not know {', '.join(unknown)} (checked against --help)")


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


# Lines SGLang logs for problems it deliberately ignores (optional model modules whose imports fail).
_IGNORED_LINE = re.compile(r"^.*Ignore import error when loading.*$\n?", re.MULTILINE)


def classify_failure(log_text: str) -> tuple[str, str]:
    """(signature, what to do) for a server log; ('unknown', ...) when nothing matches. Errors SGLang says it
    ignores are skipped, and the last occurrence counts (the one that stopped the server)."""
    text = _IGNORED_LINE.sub("", log_text)
    for name, pattern, advice in FAILURE_SIGNATURES:
        matches = list(re.finditer(pattern, text))
        if matches:
            return name, advice.format(*matches[-1].groups())
    return "unknown", "read the server log"


def last_error_line(log_text: str) -> str | None:
    """The last ``SomethingError: ...`` line of a log: usually what killed the server."""
    lines = _ERROR_LINE.findall(log_text)
    return lines[-1].strip()[:300] if lines else None


@dataclass
class EffectiveState:
    """What the running server actually does, not what was asked."""

    variant: str
    server_args: dict
    fusion: str  # enabled / skipped / off / unknown
    speculative_algorithm: str | None
    tp_size: int
    active: bool
    inactive_reasons: list[str] = field(default_factory=list)
    multicast_guard: bool = False  # the server's processes loaded verifylab's sitecustomize guard

    def as_row(self) -> dict:
        """The columns a ``variant_state`` / ``profile_state`` table stores for a server that started."""
        return {
            "fusion": self.fusion,
            "speculative_algorithm": self.speculative_algorithm,
            "tp_size": self.tp_size,
            "active": self.active,
            "inactive_reasons": "; ".join(self.inactive_reasons),
            "multicast_guard": self.multicast_guard,
            "failure": "",
        }


def fusion_in_effect(log_text: str) -> str | None:
    """'skipped' or 'enabled' as SGLang's log says (a skip wins), or None when the log says neither."""
    for state, pattern in FUSION_LOG:
        if re.search(pattern, log_text, re.IGNORECASE):
            return state
    return None


def effective_state(variant: Variant, server_info: dict, log_text: str) -> EffectiveState:
    """Decide whether the variant's mechanism can act, from /server_info and the log."""
    args = server_info.get("server_args", server_info)
    tp = int(args.get("tp_size") or 1)
    logged = fusion_in_effect(log_text)
    if "flashinfer_allreduce_fusion" in args:  # resolved by SGLang (0.5.17: False at TP 1 whatever was asked)
        requested = bool(args["flashinfer_allreduce_fusion"])
    else:
        requested = bool(
            args.get("enable_flashinfer_allreduce_fusion") or args.get("flashinfer_allreduce_fusion_backend")
        )
    if args.get("enforce_disable_flashinfer_allreduce_fusion"):
        requested = False
    # the server args keep the backend set even when fusion was skipped: only the log says what is in effect
    fusion = logged or ("unverified" if requested and tp > 1 else "off")
    spec = args.get("speculative_algorithm")
    reasons = []
    if variant.fusion:
        if tp == 1:
            reasons.append("TP 1: there is no all-reduce to fuse")
        elif fusion == "skipped":
            reasons.append("SGLang skipped fusion (workspace preflight or workspace creation failed; log says why)")
        elif fusion == "unverified":
            reasons.append("requested, but SGLang logged no initialized fusion workspace: not shown to be in effect")
        elif fusion == "off":
            reasons.append("fusion not enabled in the running server")
    elif fusion == "enabled" and tp > 1:
        reasons.append("baseline is fused (auto-enabled): not a fusion-off baseline")
    if variant.speculative and not spec:
        reasons.append("speculation is off in the running server")
    return EffectiveState(
        variant.name,
        args,
        fusion,
        spec,
        tp,
        active=not reasons,
        inactive_reasons=reasons,
        multicast_guard=GUARD_LOG in log_text,
    )


class Server:
    """A running server process in its own process group. It logs into a private temporary file; ``log_path``
    (usually inside a run) receives a copy with credentials redacted when the server stops or fails to start."""

    def __init__(
        self, cmd: list[str], host: str, port: int, log_path: Path, simulate_no_multicast: bool = False
    ) -> None:
        self.cmd, self.host, self.port, self.log_path = cmd, host, port, log_path
        self.simulate_no_multicast = simulate_no_multicast
        self.proc: subprocess.Popen | None = None
        self.raw_log: Path | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_text(self) -> str:
        """The server's log so far (unredacted: for reading the state in effect, never for storing)."""
        source = self.raw_log if self.raw_log is not None and self.raw_log.exists() else self.log_path
        return source.read_text(encoding="utf-8", errors="replace") if source.exists() else ""

    def publish_log(self) -> None:
        """Write the log, credentials redacted (SGLang logs its api_key), to ``log_path``; drop the raw copy."""
        if self.raw_log is None or not self.raw_log.exists():
            return
        atomic_write_text(self.log_path, redact_text(self.raw_log.read_text(encoding="utf-8", errors="replace")))
        shutil.rmtree(self.raw_log.parent, ignore_errors=True)
        self.raw_log = None

    def start(self, health_timeout_s: float = 900.0, on_wait: Callable[[float, str], None] | None = None) -> None:
        """Start the server and wait for /health_generate; ``on_wait(seconds, last log line)`` hears the wait."""
        if not port_free(self.host, self.port):
            raise ServerError(f"port {self.port} on {self.host} is in use: stop what holds it or pick --port")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.raw_log = Path(tempfile.mkdtemp(prefix="verifylab-server-")) / self.log_path.name  # private (0700)
        log = open(self.raw_log, "wb")  # noqa: SIM115 - the child writes to it for its whole life
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**guarded_env(simulate_no_multicast=self.simulate_no_multicast), "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        started = time.monotonic()
        deadline = started + health_timeout_s
        while time.monotonic() < deadline:
            if on_wait is not None:
                on_wait(time.monotonic() - started, last_log_line(self.raw_log))
            code = self.proc.poll()
            if code is not None:
                log_text = self.log_text()
                name, advice = classify_failure(log_text)
                cause = last_error_line(log_text)
                self.publish_log()
                raise ServerError(
                    f"server exited with code {code} during start-up [{name}]: {advice}"
                    + (f"; last error: {cause}" if cause else "")
                    + f" (log: {self.log_path})"
                )
            try:
                if httpx.get(self.url + "/health_generate", timeout=5.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"server not healthy after {health_timeout_s:.0f} s (log: {self.log_path})")

    def server_info(self) -> dict:
        for path in ("/server_info", "/get_server_info"):
            with contextlib.suppress(httpx.HTTPError):
                resp = httpx.get(self.url + path, timeout=10.0)
                if resp.status_code == 200:
                    return resp.json()
        return {}

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the whole process group, then SIGKILL after ``grace_s``; publish the redacted log."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        finally:
            self.publish_log()


def last_log_line(path: Path | None, tail_bytes: int = 4096) -> str:
    """The last non-empty line of a log being written (what a start-up is doing now), or ''."""
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - tail_bytes))
        lines = fh.read().decode("utf-8", errors="replace").strip().splitlines()
    return redact_text(lines[-1].strip()) if lines else ""


@contextlib.contextmanager
def serve(
    base: BaseConfig,
    variant: Variant,
    log_dir: Path,
    health_timeout_s: float = 900.0,
    help_text: str | None = None,
    on_wait: Callable[[float, str], None] | None = None,
) -> Iterator[tuple[Server, EffectiveState]]:
    """Start ``variant`` (flags and port checked first), yield it with its effective state, always tear down."""
    help_text = help_text if help_text is not None else launcher_help(base.launcher)
    args = variant_args(base, variant, help_text)
    check_flags(args, help_text)
    server = Server(
        [*base.launcher, *args],
        base.host,
        base.port,
        log_dir / f"server-{variant.name}.log",
        simulate_no_multicast=base.simulate_no_multicast,
    )
    try:
        server.start(health_timeout_s, on_wait)
        yield server, effective_state(variant, server.server_info(), server.log_text())
    finally:
        server.stop()
