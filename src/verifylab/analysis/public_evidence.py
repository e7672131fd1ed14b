"""The public measurements the book prices with, as a reader checks them: one row per public figure, grouped by
regime, with its source as a link, the verbatim quote that carries the number and what it prices (read from the
model's own curves and bands: a row that prices nothing is shown as context)."""

from __future__ import annotations

import pandas as pd

from verifylab.comm.bands import Band

REGIME_ORDER = ("healthy P2P", "NCCL slow, P2P works", "degraded", "host-memory fallback", "socket")
CONTEXT = "context only (prices nothing)"


def _size(message_bytes: float) -> str:
    if pd.isna(message_bytes):
        return ""
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if message_bytes >= scale:
            return f", {message_bytes / scale:g} {unit}"
    return f", {message_bytes:g} B"


def public_evidence(public: pd.DataFrame, uses: dict[str, list[str]], bands: list[Band]) -> pd.DataFrame:
    """Every public row: regime, id, the figure (value, unit, ranks, message size), implementation, hardware,
    date, what it prices (the model's curves and values; the regime bands), and its source URL with the quote."""
    prices = {row_id: list(found) for row_id, found in uses.items()}
    for band in bands:
        for row_id in band.evidence:
            prices.setdefault(row_id, []).append(f"the {band.regime.value} band at {band.world} ranks")
    order = {regime: n for n, regime in enumerate(REGIME_ORDER)}
    rows = public.assign(_order=public["regime"].map(order).fillna(len(order))).sort_values(["_order", "id"])
    return pd.DataFrame(
        {
            "regime": rows["regime"],
            "id": rows["id"],
            "figure": [
                f"{r.value:g} {r.unit} at {int(r.world_size)} ranks{_size(r.message_bytes)}" for r in rows.itertuples()
            ],
            "implementation": rows["implementation"],
            "prices": ["; ".join(dict.fromkeys(prices.get(i, []))) or CONTEXT for i in rows["id"]],
            "hardware": rows["hardware"],
            "published": rows["published"],
            "source_and_quote": [f"{url} “{quote}”" for url, quote in zip(rows["url"], rows["quote"], strict=True)],
        }
    ).reset_index(drop=True)
