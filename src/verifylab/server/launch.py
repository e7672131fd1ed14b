"""Launch and stop an SGLang server for one variant: flags checked against its --help, wait for health (with
what the log says meanwhile), keep the log (redacted), and record the state in effect (``server_log``).

The launcher is a command (default ``python -m sglang.launch_server``); tests pass the test double's
command through the very same code path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from verifylab.errors import ServerError
from verifylab.guard import guarded_env
from verifylab.iorw import atomic_write_text
from verifylab.lifetime import die_with_parent
from verifylab.redact import redact_text
from verifylab.server import http
from verifylab.server.server_log import (
    EffectiveState,
    classify_failure,
    effective_state,
    last_error_line,
    last_log_line,
)
from verifylab.server.variants import BaseConfig, Variant, variant_command

__all__ = [  # what callers import from here (the log readers and the variants live in their own modules)
    "EffectiveState",
    "Server",
    "classify_failure",
    "effective_state",
    "last_error_line",
    "launcher_help",
    "serve",
]


def launcher_help(launcher: list[str], timeout: float = 120.0) -> str:
    """The launcher's ``--help`` text (the installed SGLang's flags)."""
    try:
        proc = subprocess.run([*launcher, "--help"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"cannot run {shlex.join(launcher)} --help: {exc}") from None
    if proc.returncode != 0:
        raise ServerError(f"{shlex.join(launcher)} --help failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    return proc.stdout


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def server_environment(environ: Mapping[str, str], unset: set[str]) -> dict[str, str]:
    """The environment a server inherits: this process's, less the variables a policy unsets."""
    return {name: value for name, value in environ.items() if name not in unset}


class Server:
    """A running server process in its own process group. It logs into a private temporary file; ``log_path``
    (usually inside a run) receives a copy with credentials redacted when the server stops or fails to start."""

    def __init__(
        self,
        cmd: list[str],
        host: str,
        port: int,
        log_path: Path,
        simulate_no_multicast: bool = False,
        env: dict[str, str] | None = None,
        unset_env: list[str] | None = None,
    ) -> None:
        self.cmd, self.host, self.port, self.log_path = cmd, host, port, log_path
        self.simulate_no_multicast = simulate_no_multicast
        self.env = dict(env or {})  # set on top of the guarded environment (the guard's variables win)
        self.unset_env = set(unset_env or ())  # removed from this process's environment first
        self.proc: subprocess.Popen | None = None
        self.raw_log: Path | None = None
        self.command_line = ""  # the command as a reader would type it (set by :func:`serve`, from the builder)

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
            preexec_fn=die_with_parent,  # killed with verifylab, whatever signal ends it (kill -9 included)
            env=guarded_env(
                {**server_environment(os.environ, self.unset_env), **self.env, "PYTHONUNBUFFERED": "1"},
                simulate_no_multicast=self.simulate_no_multicast,
            ),
        )
        log.close()
        started = time.monotonic()
        deadline = started + health_timeout_s
        # poll /health_generate until it answers 200, the process exits, or the deadline passes
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
                if http.request(self.url + "/health_generate", 5.0)[0] == 200:
                    return
            except http.HttpError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServerError(f"server not healthy after {health_timeout_s:.0f} s (log: {self.log_path})")

    def server_info(self) -> dict:
        for path in ("/server_info", "/get_server_info"):
            with contextlib.suppress(http.HttpError, ValueError):
                status, body = http.request(self.url + path, 10.0)
                if status == 200:
                    return json.loads(body)
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
    command = variant_command(base, variant, help_text)
    server = Server(
        command.argv(base.launcher),
        base.host,
        base.port,
        log_dir / f"server-{variant.name}.log",
        simulate_no_multicast=base.simulate_no_multicast,
        env=dict(command.env),
        unset_env=list(command.unset),
    )
    server.command_line = command.shell(base.launcher)
    try:
        server.start(health_timeout_s, on_wait)
        yield server, effective_state(variant, server.server_info(), server.log_text())
    finally:
        server.stop()
