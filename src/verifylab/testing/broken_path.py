"""A test double of a broken peer path: the probe's ranks read ``VERIFYLAB_TESTING_BROKEN_PATHS`` (comma-separated
implementation names: ``nccl``, ``flashinfer_oneshot``, ``flashinfer_twoshot``, ``fused``) and make those paths
return what a peer path that never delivered the peers' data returns: this rank's own contribution. The probe's
correctness check must then refuse to time them. A run made with it says so in its manifest; its numbers are never
evidence."""

from __future__ import annotations

import os

VARIABLE = "VERIFYLAB_TESTING_BROKEN_PATHS"


def broken_paths(env: dict[str, str] | None = None) -> frozenset[str]:
    """The implementations this process is told to break (empty: none, the normal case)."""
    text = (os.environ if env is None else env).get(VARIABLE, "")
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def break_result(result, own_contribution) -> None:
    """Overwrite ``result`` in place with this rank's own contribution: the sum lost every peer's part."""
    result.copy_(own_contribution)
