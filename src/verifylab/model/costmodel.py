"""FlashInfer's one-shot size rule and the long format of a pass's components for its stacked chart (a pass
itself is priced by :mod:`verifylab.model.pricer`)."""

from __future__ import annotations

import pandas as pd

ONESHOT_MAX_BYTES = {2: 512 << 20, 4: 64 << 20, 8: 42 << 20}  # FlashInfer _should_use_oneshot thresholds


def uses_oneshot(tokens: int, hidden: int, ranks: int, itemsize: int = 2) -> bool:
    """FlashInfer's size rule: one-shot while tokens x hidden x 2 x ranks x itemsize <= threshold."""
    threshold = ONESHOT_MAX_BYTES.get(ranks)
    if threshold is None:
        return False
    return tokens * hidden * 2 * ranks * itemsize <= threshold


def max_oneshot_tokens(hidden: int, ranks: int, itemsize: int = 2) -> int:
    """Largest token count that keeps FlashInfer on one-shot (TP 8, hidden 7168: 192)."""
    return ONESHOT_MAX_BYTES[ranks] // (hidden * 2 * ranks * itemsize)


def components_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Verify time by component, long format (for the stacked chart): one row per ``<component>_ms`` column that
    is above 0 (``all-reduce_ms`` -> ``all-reduce``)."""
    parts = frame.melt(
        id_vars=["name", "kind"],
        value_vars=[c for c in frame.columns if c.endswith("_ms")],
        var_name="component",
        value_name="ms",
    )
    parts["component"] = parts["component"].str.removesuffix("_ms")
    return parts[parts["ms"] > 0]
