"""Capture a profile from a running SGLang server: ``/start_profile`` with a step count and an output folder,
drive a few requests, wait for the per-rank traces, ``/stop_profile``. ``with_stack`` and ``record_shapes``
stay off unless asked: SGLang's defaults make traces huge."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verifylab.errors import TraceError
from verifylab.server import http


def start_profile(
    url: str, output_dir: Path, num_steps: int, with_stack: bool = False, record_shapes: bool = False
) -> None:
    body = {
        "output_dir": str(output_dir),
        "num_steps": num_steps,
        "activities": ["CPU", "GPU"],
        "with_stack": with_stack,
        "record_shapes": record_shapes,
    }
    status, answer = _post(url.rstrip("/") + "/start_profile", body, 60.0)
    if status != 200:
        raise TraceError(f"{url}/start_profile answered {status}: {answer[:200]!r}")


def capture_profile(
    url: str,
    output_dir: Path,
    num_steps: int = 5,
    prompt: str = "Explain tensor parallelism.",
    max_tokens: int = 64,
    timeout_s: float = 300.0,
) -> list[Path]:
    """Profile ``num_steps`` forward steps while requests run; returns the per-rank trace files."""
    output_dir = Path(output_dir).resolve()  # the server has its own working directory
    output_dir.mkdir(parents=True, exist_ok=True)
    started = time.time() - 1.0  # traces written from now on are this capture's (names may repeat)
    start_profile(url, output_dir, num_steps)
    with ThreadPoolExecutor(max_workers=2) as pool:  # two requests in flight: a batch of two to profile
        list(pool.map(lambda _: _generate(url, prompt, max_tokens, timeout_s), range(2)))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        traces = sorted(p for p in output_dir.glob("*.trace.json*") if p.stat().st_mtime >= started)
        if traces and all(_stable(t) for t in traces):
            break
        time.sleep(1.0)
    else:
        raise TraceError(
            f"no trace file appeared in {output_dir} within {timeout_s:.0f} s after /start_profile "
            "(is SGLANG_TORCH_PROFILER_DIR writable by the server?)"
        )
    _post(url.rstrip("/") + "/stop_profile", {}, 60.0)  # a no-op once num_steps were profiled
    return traces


def _generate(url: str, prompt: str, max_tokens: int, timeout_s: float) -> None:
    """One greedy request to SGLang's native /generate: load for the profiler, its answer is not used."""
    body = {"text": prompt, "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}}
    status, answer = _post(url.rstrip("/") + "/generate", body, timeout_s)
    if status != 200:
        raise TraceError(f"{url}/generate answered {status} while profiling: {answer[:200]!r}")


def _post(url: str, body: dict, timeout_s: float) -> tuple[int, bytes]:
    try:
        return http.request(url, timeout_s, body)
    except http.HttpError as exc:
        raise TraceError(f"cannot reach the server ({exc})") from None


def _stable(path: Path, wait_s: float = 0.5) -> bool:
    size = path.stat().st_size
    time.sleep(wait_s)
    return size > 0 and path.stat().st_size == size
