"""The bytes-read model of a pass's compute checked on the measured H200 passes it was not fitted on: layer time as a
line in the bytes a pass reads, fitted on two token counts, predicting the others."""

from __future__ import annotations

import numpy as np
import pandas as pd

from verifylab.shapes import KIMI_K2, ShardShape, weight_bytes_per_layer


def compute_validation(
    shard_compute: pd.DataFrame, calibrate_on: tuple[int, int] = (1, 16), norm: str = "unfused"
) -> pd.DataFrame:
    """Fit layer time = a + b x bytes read on two token counts, predict the others, report the error.

    Not circular: the predicted rows were not used to fit. Bytes read follow from the shard shape and the
    experts each pass touched (the run records them)."""
    frame = shard_compute[shard_compute["norm"] == norm].copy()
    shard = ShardShape(KIMI_K2, 8)
    frame["model_bytes"] = [weight_bytes_per_layer(shard, e) for e in frame["experts_touched"]]
    fit = frame[frame["tokens"].isin(calibrate_on)]
    if len(fit) != 2:
        raise ValueError(f"calibration needs rows for tokens {calibrate_on}")
    b, a = np.polyfit(fit["model_bytes"], fit["layer_ms"], 1)
    frame["predicted_layer_ms"] = a + b * frame["model_bytes"]
    frame["error_pct"] = (frame["predicted_layer_ms"] / frame["layer_ms"] - 1) * 100
    frame["role"] = np.where(frame["tokens"].isin(calibrate_on), "calibration", "prediction")
    return frame[["tokens", "experts_touched", "layer_ms", "predicted_layer_ms", "error_pct", "role"]]


def compute_validation_finding(check: pd.DataFrame, tolerance_pct: float = 5.0) -> str:
    """What the compute check shows, from its rows: the token counts where the bytes-read model holds (within
    ``tolerance_pct``) and those where it misses, with the experts each pass touched."""
    predicted = check[check["role"] == "prediction"]
    holds = predicted[predicted["error_pct"].abs() <= tolerance_pct]
    misses = predicted[predicted["error_pct"].abs() > tolerance_pct]
    text = (
        f"**Time per layer follows the bytes a pass reads within {holds['error_pct'].abs().max():.1f} %** at "
        f"{_counts(holds['tokens'])} tokens per pass, none of them used to fit it"
    )
    if misses.empty:
        return text + "."
    missed = "; ".join(
        f"{int(r.tokens)} tokens ({int(r.experts_touched)} of {KIMI_K2.experts} experts read): {r.error_pct:+.1f} %"
        for r in misses.itertuples()
    )
    return (
        f"{text}. It falls short where nearly every expert is read already and a pass grows with its arithmetic, "
        f"not its bytes: {missed}. The pricer, not this fit, prices every option: a pass's bytes over the card's "
        "effective bandwidth plus its arithmetic over the matrix rate, the term this bytes-only fit lacks."
    )


def _counts(tokens: pd.Series) -> str:
    """1, 2 and 4 (a reader's list of token counts)."""
    values = [str(int(t)) for t in sorted(tokens)]
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} and {values[-1]}"
