"""Chapter 00, the introduction: the case study's reported figures, charted and listed with seed and quote."""

from __future__ import annotations

from verifylab.chapters._base import shown_as_table
from verifylab.chapters.params import Introduction as Params
from verifylab.report.charts import Figure, reported_throughput_chart
from verifylab.report.tables import Table
from verifylab.store.evidence import Evidence
from verifylab.store.reference import reported_throughput

__all__ = ["Params"]

FIGURE_COLUMNS = [
    "figure_id",
    "quantity",
    "value",
    "value_text",
    "unit",
    "configuration",
    "stack",
    "seed_file",
    "quote",
    "provenance",
]


def reported_throughput_figure(ev: Evidence) -> Figure:
    """Figure: decode throughput per configuration, as reported."""
    return reported_throughput_chart(reported_throughput(ev.figures))


@shown_as_table
def reported_figures_table(ev: Evidence) -> Table:
    """Table: every reported figure with its seed file and quote."""
    return ev.figures[FIGURE_COLUMNS]
