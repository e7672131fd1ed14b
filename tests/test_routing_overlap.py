"""#50: routing overlap is a named input of the case study's speculation answer — priced from independent draws (0)
to a chain that reads one token's experts (1), the range fitted on public curves marked with its source, and the
answer moving the way the physics says (more overlap: fewer expert bytes per verify, a gain at least as large)."""

from __future__ import annotations

from verifylab.chapters import ch04_fusion_vs_elimination as ch04
from verifylab.model.answers.routing_overlap import OVERLAP_POINTS, speculation_by_overlap
from verifylab.model.fits.overlap import fitted_overlap
from verifylab.model.inputs.stored import stored_inputs


def test_the_answer_by_overlap_names_its_sources_and_follows_the_bytes(shipped):
    ev = shipped
    table = speculation_by_overlap(ev)
    fit = fitted_overlap(stored_inputs(ev))
    assert fit is not None
    points = {f"{o:.2f}" for o in OVERLAP_POINTS}
    for _, rows in table.groupby("regime"):
        single = rows[rows["routing_overlap"].isin(points)].sort_values("routing_overlap")
        lows = [float(g.split("-")[0]) for g in single["gain_one_stream"]]
        assert lows == sorted(lows)  # more shared experts never make a verify dearer
        assert rows["overlap_source"].str.contains("bound:").sum() == 2
        assert rows["overlap_source"].str.contains(fit.curves[0]).sum() == 1
    assert "routing_overlap" in ch04.speculation_by_routing_overlap(ev).frame.columns
