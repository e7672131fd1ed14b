"""#50: the routing overlap is fitted on public end-to-end speculation curves of other models, never on the case-study
family's (which only checks the model), and chapter 4 shows every curve with its role, source and predicted beside
reported; a malformed public row is refused naming its line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from verifylab.chapters import ch04_fusion_vs_elimination as ch04
from verifylab.errors import ReferenceDataError
from verifylab.model.case.speculation import case_overlap
from verifylab.model.fits.overlap import check_summary, fitted_overlap, public_check
from verifylab.model.inputs.stored import stored_inputs
from verifylab.sources import SourcesInMemory
from verifylab.store.evidence import Evidence
from verifylab.store.public_speculation import PUBLIC_SPECULATION_FILE, load_public_speculation


def _with(ev: Evidence, table: pd.DataFrame) -> SourcesInMemory:
    return SourcesInMemory(ev.figures, ev.public, ev.measured, ev.fusion_forensics, public_speculation=table)


def test_the_family_check_never_moves_the_fit_and_the_fit_follows_its_curves(shipped):
    ev = shipped
    stored = ev.public_speculation
    fit = fitted_overlap(stored_inputs(ev))
    assert fit is not None and 0.0 <= fit.span.low <= fit.best <= fit.span.high <= 1.0
    family = stored["role"] == "family check"
    assert family.any() and set(stored.loc[family, "config"]) == {"kimi-k2.5"}
    doubled = stored.assign(spec_tok_s=stored["spec_tok_s"].where(~family, stored["spec_tok_s"] * 2))
    assert fitted_overlap(stored_inputs(_with(ev, doubled))) == fit  # the check's numbers are never read by the fit
    fit_rows = stored["role"] == "fit"
    faster = stored.assign(spec_tok_s=stored["spec_tok_s"].where(~fit_rows, stored["spec_tok_s"] * 1.4))
    assert (
        fitted_overlap(stored_inputs(_with(ev, faster))).best > fit.best
    )  # gains the model underprices ask for shared experts
    assert case_overlap(stored_inputs(ev)) == fit.span


def test_the_case_study_family_is_predicted_out_of_sample_within_its_range(shipped):
    """The family's public curve (Kimi-K2.6, 8 x RTX PRO 6000), never fitted on: median error at most 10 % and its
    reported crossover inside the predicted range's ends."""
    summary = check_summary(public_check(stored_inputs(shipped))).set_index("role")
    family = summary.loc["family check"]
    assert family["median_error"] <= 0.10
    assert family["predicted_low_stops"] <= family["reported_stops"]
    assert pd.isna(family["predicted_high_stops"]) or family["reported_stops"] <= family["predicted_high_stops"]
    assert set(summary.index) == {"fit", "held out", "family check"}


def test_chapter_4_shows_each_curve_with_its_role_source_and_the_overlap_it_gave(shipped):
    ev = shipped
    curves = ch04.public_speculation_curves(ev).frame
    assert list(curves["role"]) == sorted(curves["role"], key=["fit", "held out", "family check"].index)
    assert set(curves["role"]) == {"fit", "held out", "family check"}
    assert curves["how_read"].str.match(r"engine: .*; accept length: .*; published \d{4}-\d\d-\d\d: https://").all()
    table = ch04.public_speculation_curves(ev)
    key = table.html(table.cells())
    family = next(r for r in key.split("<tr") if "family check" in r)
    assert "note" not in family and "Kimi-K2.6" in family  # #71: the key row shows its model, box and prediction
    cells = ch04.public_speculation_cells(ev).frame
    assert len(cells) == ev.public_speculation["spec_tok_s"].notna().sum()
    by_overlap = ch04.speculation_by_routing_overlap(ev).frame
    fitted = by_overlap[by_overlap["overlap_source"].str.contains("fitted on the public curves")]
    assert set(fitted["routing_overlap"]) == {fitted_overlap(stored_inputs(ev)).span.text(2)}
    words = str(ch04.public_speculation_finding(ev))
    assert "never in a fit" in words and fitted_overlap(stored_inputs(ev)).span.text(2) in words


def _write(tmp_path: Path, frame: pd.DataFrame) -> Path:
    (tmp_path / PUBLIC_SPECULATION_FILE).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(tmp_path / PUBLIC_SPECULATION_FILE, index=False)
    return tmp_path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.assign(role=f["role"].replace("family check", "fit")), "never in a fit"),
        (lambda f: f.assign(quote_plain=f["quote_plain"].where(f.index != 0, "no number here")), "line 2"),
        (lambda f: f.assign(accept_high=f["accept_high"].where(f.index != 3, "9")), "accept_low <= accept_high"),
        (lambda f: f.drop(columns=["quote_accept"]), "missing column(s) quote_accept"),
        (lambda f: f.assign(gpus=f["gpus"].where(f.index != 1, "4")), "changes gpus"),
        (lambda f: f.assign(streams=f["streams"].where(f.index != 1, "1")), "one stream count twice"),
        (lambda f: f.assign(interconnect=f["interconnect"].where(f.index != 0, "ethernet")), "interconnect"),
    ],
)
def test_a_malformed_public_curve_is_refused_by_name(repo_root, tmp_path, change, message):
    frame = pd.read_csv(repo_root / "data" / PUBLIC_SPECULATION_FILE, dtype=str, keep_default_na=False)
    with pytest.raises(ReferenceDataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_public_speculation(_write(tmp_path, change(frame)))


def test_the_decision_cites_the_family_check_with_the_chapters_numbers(shipped):
    from verifylab.publish.decision import family_check_words

    summary = check_summary(public_check(stored_inputs(shipped))).set_index("role").loc["family check"]
    words = family_check_words(shipped)
    assert f"within a median {summary['median_error']:.0%}" in words and "{numref}`tbl-public-speculation`" in words
    assert family_check_words(_with(shipped, shipped.public_speculation.iloc[0:0])) == ""
