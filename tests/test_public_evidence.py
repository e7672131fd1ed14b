"""Public measurements as evidence: every row well formed, its number in its verbatim quote, and the table covers
what the decision needs (TP 2, 4 and 8 on SM120 PCIe, P2P on and off, NCCL and one-shot/fused)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from verifylab.errors import ReferenceDataError
from verifylab.model.inputs.stored import stored_inputs
from verifylab.store.public import PUBLIC_FILE, load_public_measurements, quote_carries

ROOT = Path(__file__).resolve().parents[1]


def test_every_row_is_well_formed_and_carries_its_number():
    table = load_public_measurements(ROOT / "data")
    assert len(table) >= 30
    assert all(quote_carries(q, v) for q, v in zip(table["quote"], table["value"], strict=True))
    assert set(table["provenance"]) == {"reported (public)"}


def test_the_table_covers_the_decision():
    table = load_public_measurements(ROOT / "data")
    sm120 = table[table["hardware"].str.contains("RTX PRO 6000")]
    assert {2, 4, 8} <= set(sm120["world_size"])
    assert {"P2P", "SHM"} <= set(sm120["transport"])
    impls = set(sm120["implementation"])
    assert any(i.startswith("nccl") for i in impls) and any(i.startswith("oneshot") for i in impls)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("quote", "| 1 KB | 6.0 | 13.5 |", "does not carry the value 6.1"),
        ("quote", " ".join(["word"] * 31) + " 6.1", "more than 30 words"),
        ("regime", "fine", "regime 'fine' is not one of"),
        ("url", "ftp://x", "not an http(s) address"),
        ("published", "", "empty field(s) published"),
        ("value", "inf", "value inf is not a finite number"),  # #41: inf passed 'the quote carries the number'
        ("value", "-6.1", "value -6.1 is not a finite number"),
        ("world_size", "0", "world_size 0.0 is not a finite number"),
        ("world_size", "1000000000000", "world_size 1000000000000.0 is not a finite number"),
        ("message_bytes", "nan", "message_bytes nan is not a finite number"),
    ],
)
def test_a_bad_row_is_named(tmp_path: Path, column: str, value: str, message: str):
    data = tmp_path / "data"
    (data / "reference").mkdir(parents=True)
    shutil.copy(ROOT / "data" / PUBLIC_FILE, data / PUBLIC_FILE)
    frame = pd.read_csv(data / PUBLIC_FILE, keep_default_na=False, dtype=str)
    frame.loc[0, column] = value
    frame.to_csv(data / PUBLIC_FILE, index=False)
    with pytest.raises(ReferenceDataError, match=rf"line 2 \(pub-01\).*{message.replace('(', '.').replace(')', '.')}"):
        load_public_measurements(data)


def test_quote_carries_formats_and_ranges():
    assert quote_carries("| 32 KB | 48.16 us | 26.20 us |", 26.2)
    assert quote_carries("| P2P Enabled (same NUMA) | 0.36-0.45 us |", 0.45)
    assert not quote_carries("| 1 KB | 6.12 |", 6.1)


def test_misdetected_and_superseded_rows_never_price_healthy_p2p(shipped):
    """An NCCL path slowed by topology misdetection (48-56 µs on a dual-socket box) and rows cited from a revision
    its authors replaced are not healthy P2P: the healthy band at 8 ranks and one stream's verify message stays
    where healthy boxes measured it."""
    from verifylab.model.case.speculation import inputs
    from verifylab.model.pricing.regimes import Collective
    from verifylab.vocab import Regime

    ev = shipped
    public = ev.public
    flagged = public[
        public["implementation"].astype(str).str.contains("misdetected")
        | public["note"].astype(str).str.startswith("superseded")
    ]
    assert set(flagged["id"]) >= {"pub-21", "pub-23", "pub-25", "pub-27", "pub-52", "pub-53"}
    misdetected = flagged[flagged["implementation"].astype(str).str.contains("misdetected")]
    assert (misdetected["regime"] != Regime.HEALTHY_P2P.value).all()
    price = inputs(stored_inputs(ev)).curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, 4 * 7168 * 2)
    assert price.high_us < 40 and not any(i in price.basis for i in flagged["id"])


def test_the_rows_issue_51_corrected(shipped):
    """pub-45 (22.2 GB/s, NCCL's defaults on the untuned dual-socket box of pub-21/23/25/27) is no healthy row and
    no longer sets the healthy bus bandwidth; pub-52/53 are healthy P2P (that box's P2P worked), superseded and
    priced nowhere; pub-53/55 name the one-shot all-reduce their source names, not a fused one; pub-21/22 quote the
    source's 26.20. Each change is recorded in the row's note."""
    from verifylab.model.case.speculation import inputs
    from verifylab.vocab import Regime

    ev = shipped
    rows = ev.public.set_index("id")
    assert rows.loc["pub-45", "regime"] != Regime.HEALTHY_P2P.value
    assert 22.2 not in inputs(stored_inputs(ev)).curves.bus_bandwidth_gbs
    for row in ("pub-52", "pub-53"):
        assert rows.loc[row, "regime"] == Regime.HEALTHY_P2P.value and rows.loc[row, "note"].startswith("superseded")
    uses = inputs(stored_inputs(ev)).curves.public_uses()
    assert "pub-52" not in uses and "pub-53" not in uses and "pub-45" not in uses
    assert not rows["implementation"].astype(str).str.contains("fused").loc[["pub-53", "pub-55"]].any()
    for row in ("pub-21", "pub-22"):
        assert "| 26.20 us |" in rows.loc[row, "quote"]
    for row in ("pub-21", "pub-22", "pub-45", "pub-52", "pub-53", "pub-55"):
        assert "2026-12-03" in rows.loc[row, "note"] and "issue 51" in rows.loc[row, "note"]


def test_the_host_memory_price_uses_the_sm120_figure(shipped):
    """#51: through host memory, SM120's NCCL (2 x RTX 5070 Ti, 39 µs at 10 KB and 1.9 GB/s at 20 MB, SGLang PR
    39605) is far slower than the 2 x H200 SHM probe; the price's high end follows those rows, and moves with them."""
    from dataclasses import replace

    from verifylab.model.case.speculation import inputs
    from verifylab.model.pricing.regimes import Collective
    from verifylab.vocab import Regime

    curves = inputs(stored_inputs(shipped)).curves
    message = 4 * 7168 * 2
    price = curves.price(Regime.HOST_MEMORY, Collective.NCCL, 8, message)
    assert "pub-63" in price.basis and curves.sm120_host_gbs == pytest.approx(1.9)
    assert price.high_us >= 7 * 39  # seven ring steps, each at least the SM120 10 KB all-reduce
    public = curves.public.copy()
    public.loc[public["id"].isin(["pub-63", "pub-64"]), "value"] *= 2
    slower = replace(curves, public=public).price(Regime.HOST_MEMORY, Collective.NCCL, 8, message)
    assert slower.high_us == pytest.approx(2 * price.high_us, rel=0.05) and slower.low_us == price.low_us
    uses = curves.public_uses()
    assert {"pub-63", "pub-64", "pub-65"} <= set(uses)


def test_every_quote_links_to_the_file_that_holds_it():
    """#68: a row's link is the pinned file (or thread) its quote is read from, never a package index page, whose
    text does not carry the quote."""
    table = load_public_measurements(ROOT / "data")
    index_pages = table[table["url"].str.contains(r"pypi\.org/project|files\.pythonhosted", regex=True)]
    assert index_pages.empty, index_pages["id"].tolist()


def test_the_b12x_calibration_and_pr_34528_are_entered_and_price_nothing(shipped):
    """#68 item 6: b12x's NCCL calibration on 8 x RTX PRO 6000 (12 KB to 1.5 MB) and SGLang PR 34528's TPOT at 4
    ranks (its first version's regression at 8 streams superseded) are rows with quotes; they are context: the
    collectives are priced from the curves they were priced from before."""
    from verifylab.model.case.speculation import inputs

    rows = shipped.public.set_index("id")
    calibration = rows[rows["url"].str.contains("b12x/blob/") & rows["url"].str.endswith(".json")]
    assert sorted(calibration["message_bytes"]) == [12288, 98304, 393216, 1572864]
    assert (calibration["world_size"] == 8).all() and (calibration["unit"] == "ms").all()
    pr = rows[rows["url"].str.endswith("sglang/pull/34528")]
    assert (pr["world_size"] == 4).all() and len(pr) == 6
    first_version = pr[pr["software"].str.contains("first submitted")]
    assert first_version["note"].str.startswith("superseded").all()
    at_eight = pr[pr["method"].str.contains("8 streams")].set_index("implementation", append=True)["value"]
    assert at_eight.xs("pcie_ipc", level=1).max() > at_eight.xs("nccl", level=1).max()  # the regression it names
    uses = inputs(stored_inputs(shipped)).curves.public_uses()
    assert not set(calibration.index) & set(uses) and not set(pr.index) & set(uses)
