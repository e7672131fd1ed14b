"""Capture a profile from a running SGLang server: ``/start_profile`` with a step count and an output folder,
drive a few requests, wait for the per-rank traces, ``/stop_profile``. ``with_stack`` and ``record_shapes``
stay off unless asked: SGLang's defaults make traces huge."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from verifylab.errors import TraceError


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
    resp = httpx.post(url.rstrip("/") + "/start_profile", json=body, timeout=60.0)
    if resp.status_code != 200:
        raise TraceError(f"{url}/start_profile answered {resp.status_code}: {resp.text[:200]}")


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
    httpx.post(url.rstrip("/") + "/stop_profile", timeout=60.0)  # a no-op once num_steps were profiled
    return traces


def _generate(url: str, prompt: str, max_tokens: int, timeout_s: float) -> None:
    """One greedy request to SGLang's native /generate: load for the profiler, its answer is not used."""
    body = {"text": prompt, "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}}
    response = httpx.post(url.rstrip("/") + "/generate", json=body, timeout=timeout_s)
    if response.status_code != 200:
        raise TraceError(f"{url}/generate answered {response.status_code} while profiling: {response.text[:200]}")


def _stable(path: Path, wait_s: float = 0.5) -> bool:
    size = path.stat().st_size
    time.sleep(wait_s)
    return size > 0 and path.stat().st_size == size
