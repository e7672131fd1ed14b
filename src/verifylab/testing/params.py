"""Parameters for a live chapter 02 against the test double (``verifylab.testing.server``, which the chapter starts
itself): what the fleet's tests, its benchmark and its local demo run on each "box". Mechanics only, never data."""

from __future__ import annotations

import sys
from typing import Any


def chapter02_on_test_double(
    run_id: str,
    port: int,
    *,
    label: str = "test double (not data)",
    campaign: str = "fleet-test",
    variants: tuple[str, ...] = ("ngram",),
    step_ms: float = 2,
    max_tokens: int = 16,
    runs: int = 1,
    **parameters: Any,
) -> dict[str, Any]:
    """A parameters file's content: live mode, one short single-stream run per variant and a one-stream sweep;
    ``parameters``: more settings every chapter gets (e.g. ``mechanics_only=True``)."""
    return {
        "mode": "live",
        "run_id": run_id,
        "parameters": {"label": label, "campaign": campaign, **parameters},
        "chapters": {
            "02_benchmarks": {
                "model_path": "tiny",
                "draft_model_path": None,
                "tp_size": 1,
                "port": port,
                "launcher": [sys.executable, "-m", "verifylab.testing.server"],
                "extra_args": ["--step-ms", f"{step_ms:g}"],
                "variants": list(variants),
                "runs": runs,
                "warmup": 0,
                "max_tokens": max_tokens,
                "concurrency": [1],
                "sweep_tokens": 16,
            }
        },
    }
