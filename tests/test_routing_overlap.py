"""#50: routing overlap is a named input of the case study's speculation answer — priced from independent draws (0)
to a chain that reads one token's experts (1), the overlap measured here marked with its run, and the answer moving
the way the physics says (more overlap: fewer expert bytes per verify, a gain at least as large)."""

from __future__ import annotations

from verifylab.chapters import ch04_fusion_vs_elimination as ch04
from verifylab.model.routing_overlap import OVERLAP_POINTS, measured_overlap, speculation_by_overlap
from verifylab.store.evidence import Evidence


def test_the_answer_by_overlap_names_its_sources_and_follows_the_bytes(repo_root):
    ev = Evidence(repo_root / "data")
    table = speculation_by_overlap(ev)
    assert sorted(set(table["routing_overlap"])) == list(OVERLAP_POINTS)
    for _, rows in table.groupby("regime"):
        lows = [float(g.split("-")[0]) for g in rows.sort_values("routing_overlap")["gain_one_stream"]]
        assert lows == sorted(lows)  # more shared experts never make a verify dearer
        assert rows["overlap_source"].str.startswith("bound").sum() == 2
    measured = measured_overlap(ev.measured)
    assert measured is not None and table["overlap_source"].str.contains(measured[1]).any()
    assert "routing_overlap" in ch04.speculation_by_routing_overlap(ev).frame.columns
