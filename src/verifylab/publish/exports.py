"""Design-review exports: every key chart as SVG and PNG, every key table as CSV, each with the edition id.
The charts and tables are the chapters' own (same functions), so an export never disagrees with its page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.chapters import ch00_introduction, ch01_environment_and_gates, ch02_benchmarks, ch03_verify_breakdown
from verifylab.chapters.ch04_fusion_vs_elimination import Params as FusionParams
from verifylab.chapters.ch04_fusion_vs_elimination import whatif_figure
from verifylab.iorw import atomic_write_json, atomic_write_text
from verifylab.model.case import reconcile_table, whatif_table
from verifylab.report.charts import Figure, norm_fusion_chart, shard_compute_chart
from verifylab.report.recommend import case_study_facts, recommend, recommendations_frame
from verifylab.store.evidence import Evidence


def key_figures(ev: Evidence) -> list[Figure]:
    """The charts a design review cites, built by the same functions as the chapters."""
    defaults = FusionParams(data_dir=ev.data_dir)
    figures = [
        ch00_introduction.reported_throughput_figure(ev),
        whatif_figure(ev, defaults),
        ch03_verify_breakdown.breakdown_figure(ev),
        ch02_benchmarks.reported_single_stream_figure(ev),
    ]
    for table, chart in (("shard_compute", shard_compute_chart), ("norm_fusion", norm_fusion_chart)):
        run_id = ev.newest_with(table)
        if run_id:
            figures.append(chart(ev.runs.read_table(run_id, table), ev.runs.manifest(run_id).label, run_id))
    return figures


def key_tables(ev: Evidence) -> dict[str, tuple[str, pd.DataFrame]]:
    """name -> (caption, table)."""
    return {
        "reported_figures": ("Figures reported by the case study, with seed file and quote", ev.figures),
        "whatif": ("Verify pass under each mechanism (modelled)", whatif_table(ev)),
        "reconciliation": ("Reconciliation of the reported figures (arithmetic)", reconcile_table(ev)),
        "gate_matrix": (
            "SGLang/FlashInfer gates by version for SM120 (audited wheels)",
            ch01_environment_and_gates.gate_matrix(ev),
        ),
        "recommendations": (
            "Recommendations with evidence and confidence (case-study box)",
            recommendations_frame(recommend(case_study_facts(ev))),
        ),
    }


def write_exports(ev: Evidence, folder: Path, edition: str) -> list[dict]:
    """Write the exports and an ``exports.json`` index (name, caption, edition, files)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for fig in key_figures(ev):
        paths = fig.save(folder, edition)
        index.append(
            {
                "name": fig.name,
                "caption": fig.caption,
                "edition": edition,
                "provenance": fig.provenance,
                "files": sorted(p.name for p in paths.values()),
            }
        )
    for name, (caption, table) in key_tables(ev).items():
        atomic_write_text(folder / f"{name}.csv", table.to_csv(index=False))
        index.append({"name": name, "caption": caption, "edition": edition, "files": [f"{name}.csv"]})
    atomic_write_json(folder / "exports.json", index)
    return index
