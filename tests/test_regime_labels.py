"""#81: every public NCCL all-reduce row's regime label agrees with the book's own rules: healthy P2P no slower than
the healthy limit other sources give at its world size, degraded never where the same source ran a P2P kernel."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.comm.bands import regime_label_problems
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]


def _public() -> pd.DataFrame:
    return Evidence(ROOT / "data").public.copy()


def test_the_shipped_table_agrees_with_the_rules():
    assert regime_label_problems(_public()) == []


def test_a_slow_healthy_row_and_a_degraded_row_beside_a_p2p_kernel_are_caught():
    public = _public()
    slow = public[public["id"] == "pub-36"].assign(id="planted-slow", value=200.0, url="https://example.org/slow")
    assert regime_label_problems(pd.concat([public, slow], ignore_index=True))[0].startswith("planted-slow: labelled")
    degraded = public[public["id"] == "pub-60"].assign(id="planted-degraded", regime="degraded")
    found = regime_label_problems(pd.concat([public, degraded], ignore_index=True))
    assert found == [found[0]] and found[0].startswith("planted-degraded") and "P2P kernel" in found[0]


def test_the_b12x_calibration_rows_are_relabelled_and_dated_from_their_first_publication():
    public = _public().set_index("id")
    for row in ("pub-66", "pub-67", "pub-68", "pub-69"):
        assert public.loc[row, "regime"] == "NCCL slow, P2P works" and public.loc[row, "published"] == "2026-07-26"
    assert set(public.loc[["pub-60", "pub-61", "pub-62"], "regime"]) == {"NCCL slow, P2P works"}
