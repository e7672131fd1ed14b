"""The pass model checked on the synthetic passes it did not fit: each variant's pass predicted from a campaign
run's latency curves and its compute-only pass, and each variant's saving against NCCL beside the spread the
campaign runs measured."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.model.fits.in_pass import pass_factors
from verifylab.model.inputs.stored import StoredRuns
from verifylab.model.pricing.measured_pass import measured_passes, predict_pass
from verifylab.model.pricing.pass_cost import compare
from verifylab.vocab import COMM_CAMPAIGN_TABLES, allreduce_message_bytes


def validate_against_run(runs: StoredRuns, run_id: str | None = None) -> pd.DataFrame:
    """Predicted vs measured pass per path, variant and k of a ``verify_pass`` run, from that run's latency
    curves and its own ``compute_only`` pass (out of sample: no predicted pass is an input)."""
    run_id = run_id or runs.newest_with("verify_pass")
    if run_id is None:
        return pd.DataFrame()
    passes = runs.table(run_id, "verify_pass")
    curves = runs.curves(run_id)
    rows = []
    for (path, k), group in passes.groupby(["path", "tokens"]):
        measured = group.set_index("variant")["pass_ms"]
        if "compute_only" not in measured or pd.isna(measured["compute_only"]):
            continue
        norm = runs.norm_us(k)
        norm_us = norm[0] if norm else 0.0
        factors = pass_factors(runs, str(path), allreduce_message_bytes(float(k)))
        for p in predict_pass(float(measured["compute_only"]), float(k), curves, str(path), norm_us, factors=factors):
            if p["name"] == "compute_only" or p["name"] not in measured or p["pass_ms"] is None:
                continue
            actual = float(measured[p["name"]])
            if math.isnan(actual):
                continue
            rows.append(
                {
                    "path": path,
                    "tokens": int(k),
                    "variant": p["name"],
                    "predicted_ms": p["pass_ms"],
                    "measured_ms": actual,
                    "error_pct": 100 * (p["pass_ms"] - actual) / actual,
                    "provenance": "modelled",
                    "inputs_run": run_id,  # its latency curves and compute_only pass
                }
            )
    return pd.DataFrame(rows)


SAVING_VARIANTS = ("fused", "one_allreduce_per_layer")


def saving_check(runs: StoredRuns) -> pd.DataFrame:
    """Each variant's saving against NCCL per path and tokens, predicted by the pass model (the newest campaign's
    isolated curves times the in-pass factors of its traces) against the savings the campaign runs measured (their
    spread from run to run): the error is the distance to the measured range, 0 inside it."""
    campaigns = runs.runs_with_all(COMM_CAMPAIGN_TABLES)
    newest = runs.newest_with(*COMM_CAMPAIGN_TABLES)
    if newest is None:
        return pd.DataFrame()
    measured: dict[tuple[str, int, str], list[float]] = {}
    for run_id in campaigns:
        table = runs.table(run_id, "verify_pass").pivot_table(
            index=["path", "tokens"], columns="variant", values="pass_ms"
        )
        for (path, tokens), row in table.iterrows():
            for variant in SAVING_VARIANTS:
                if variant in row and not math.isnan(row[variant]) and not math.isnan(row["nccl"]):
                    measured.setdefault((str(path), int(tokens), variant), []).append(row["nccl"] - row[variant])
    curves = runs.curves(newest)
    base = runs.table(newest, "verify_pass").set_index(["path", "tokens", "variant"])["pass_ms"]
    rows = []
    for (path, tokens, variant), values in sorted(measured.items()):
        norm = runs.norm_us(tokens)
        compute = float(base[(path, tokens, "compute_only")])
        predicted = measured_passes(
            compute,
            tokens,
            curves,
            path,
            norm[0] if norm else 0.0,
            factors=pass_factors(runs, path, allreduce_message_bytes(tokens)),
        )
        nccl, other = predicted["nccl"], predicted[variant]
        if isinstance(nccl, str) or isinstance(other, str):
            continue
        saving = compare(nccl, other).saved_ms
        low, high = min(values), max(values)
        error = (
            0.0
            if low <= saving <= high
            else (saving - (high if saving > high else low)) / (high if saving > high else low)
        )
        rows.append(
            {
                "path": path,
                "tokens": tokens,
                "variant": variant,
                "predicted_saving_ms": saving,
                "measured_low_ms": low,
                "measured_high_ms": high,
                "runs": len(values),
                "error_pct": 100 * error,
                "provenance": "modelled vs measured",
            }
        )
    return pd.DataFrame(rows)
