"""Chapter 00, the introduction: the case study's reported figures, charted and listed with seed and quote."""

from __future__ import annotations

import pandas as pd

from verifylab.chapters._base import shown_as_table
from verifylab.chapters.params import Introduction as Params
from verifylab.report.charts import Figure, reported_throughput_chart
from verifylab.report.section import Prose
from verifylab.reported import reported_text
from verifylab.store.evidence import Evidence
from verifylab.store.reference import reported_throughput

__all__ = ["Params"]


def case_claims(ev: Evidence) -> Prose:
    """The case study's claims this book checks, each number formatted from its reported figure."""

    def v(figure_id: str) -> str:
        return reported_text(ev.figures, figure_id)

    return Prose(
        f"The case study reports that EAGLE-3 first *lost* to plain decoding ({v('eagle3_54_1')} vs "
        f"{v('baseline_89_5')} tok/s), that a verify pass spent about {v('verify_allreduce_ms')} of its "
        f"{v('verify_total_ms')} ms in {v('allreduces_per_verify')} NCCL all-reduces, and that after opening "
        "FlashInfer's all-reduce fusion for SM120 — together with a CUDA upgrade and other patches — EAGLE-3 reached "
        f"{v('eagle3_fusion_96_1')} tok/s. This book checks those claims, separates what each change could have "
        "carried, and ends with what to deploy."
    )


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
