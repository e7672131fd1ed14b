"""Design-review exports: every key chart as SVG and PNG, every key table as CSV, each with the edition id."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.iorw import atomic_write_json, atomic_write_text


def key_figures(data_dir: Path):
    """The charts a design review cites, built by the same functions as the chapters."""
    from verifylab.model.case import whatif_table
    from verifylab.model.costmodel import components_long
    from verifylab.reference import load_reported_figures, reported_throughput
    from verifylab.report.bench_report import reported_single_stream, single_stream_chart
    from verifylab.report.breakdown import chapter3_tables
    from verifylab.report.charts import (
        norm_fusion_chart,
        reported_throughput_chart,
        shard_compute_chart,
        step_breakdown_chart,
        verify_components_chart,
    )
    from verifylab.runs import RunStore

    figures = [
        reported_throughput_chart(reported_throughput(load_reported_figures(data_dir))),
        verify_components_chart(components_long(whatif_table(data_dir))),
        step_breakdown_chart(chapter3_tables(data_dir)["breakdown"]),
        single_stream_chart(reported_single_stream(data_dir)),
    ]
    store = RunStore(Path(data_dir) / "runs")
    for table, chart in (("shard_compute", shard_compute_chart), ("norm_fusion", norm_fusion_chart)):
        runs = store.runs_with_table(table)
        if runs:
            figures.append(chart(store.read_table(runs[-1], table), store.manifest(runs[-1]).label, runs[-1]))
    return figures


def key_tables(data_dir: Path) -> dict[str, tuple[str, pd.DataFrame]]:
    """name -> (caption, table)."""
    from verifylab.model.case import reconcile_table, whatif_table
    from verifylab.reference import load_reported_figures
    from verifylab.report.gates_report import load_matrix, matrix_overview
    from verifylab.report.recommend import case_study_evidence, recommend, recommendations_frame

    return {
        "reported_figures": (
            "Figures reported by the case study, with seed file and quote",
            load_reported_figures(data_dir),
        ),
        "whatif": ("Verify pass under each mechanism (modelled)", whatif_table(data_dir)),
        "reconciliation": ("Reconciliation of the reported figures (arithmetic)", reconcile_table(data_dir)),
        "gate_matrix": (
            "SGLang/FlashInfer gates by version for SM120 (audited wheels)",
            matrix_overview(load_matrix(data_dir)),
        ),
        "recommendations": (
            "Recommendations with evidence and confidence (case-study box)",
            recommendations_frame(recommend(case_study_evidence(data_dir))),
        ),
    }


def write_exports(data_dir: Path, folder: Path, edition: str) -> list[dict]:
    """Write the exports and an ``exports.json`` index (name, caption, edition, files)."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for fig in key_figures(data_dir):
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
    for name, (caption, table) in key_tables(data_dir).items():
        atomic_write_text(folder / f"{name}.csv", table.to_csv(index=False))
        index.append({"name": name, "caption": caption, "edition": edition, "files": [f"{name}.csv"]})
    atomic_write_json(folder / "exports.json", index)
    return index
