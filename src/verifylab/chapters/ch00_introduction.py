"""Chapter 00, the introduction: the case study's reported figures, charted and listed with seed and quote."""

from __future__ import annotations

import pandas as pd

from verifylab.chapters._base import shown_as_table
from verifylab.chapters.params import Introduction as Params
from verifylab.report.charts import Figure, reported_throughput_chart
from verifylab.store.evidence import Evidence
from verifylab.store.reference import reported_throughput

__all__ = ["Params"]


def reported_throughput_figure(ev: Evidence) -> Figure:
    """Figure: decode throughput per configuration, as reported."""
    return reported_throughput_chart(reported_throughput(ev.figures))


@shown_as_table
def reported_figures_table(ev: Evidence) -> pd.DataFrame:
    """Table: every reported figure with its seed file and quote (all reported: the caption says so)."""
    f = ev.figures
    value = [
        text if text else f"{number:g} {unit}".strip()
        for number, text, unit in zip(f["value"], f["value_text"], f["unit"], strict=True)
    ]
    return pd.DataFrame(
        {
            "figure": f["figure_id"],
            "quantity": f["quantity"],
            "value": value,
            "configuration": f["configuration"],
            "stack": f["stack"].replace("", "unspecified"),
            "seed": f["seed_file"],
            "quote": f["quote"],
        }
    )
