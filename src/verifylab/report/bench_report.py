"""Tables and charts for chapter 02: reported case-study figures and stored benchmark runs."""

from __future__ import annotations

import altair as alt
import pandas as pd

from verifylab.bench.stats import compare, crossover
from verifylab.report.charts import Figure, provenance_color
from verifylab.report.section import Section
from verifylab.store.evidence import Evidence
from verifylab.store.reference import figure_label

SPECULATIVE_TWINS = {"eagle3": "baseline", "eagle3_fusion": "fusion", "ngram": "baseline"}


def reported_single_stream(ev: Evidence) -> pd.DataFrame:
    """Single-stream tok/s per variant as the case study reports them (each with stack and seed)."""
    figures = ev.figures
    tput = figures[(figures.quantity == "decode throughput") & (figures.unit == "tok/s")]
    return tput[
        ["figure_id", "configuration", "stack", "conditions", "value", "seed_file", "quote", "provenance"]
    ].rename(columns={"configuration": "variant", "value": "tokens_per_s"})


def reported_comparisons(ev: Evidence) -> pd.DataFrame:
    """Statistics on reported figures: what the numbers resolve, and what they cannot (confounded stacks)."""
    tput = reported_single_stream(ev)
    fusion_runs = tput[tput.figure_id.str.startswith("fusion_run_")].tokens_per_s.tolist()
    baseline = tput[tput.figure_id == "baseline_92_6"].tokens_per_s.tolist()
    eagle = tput[tput.figure_id == "eagle3_54_1"].tokens_per_s.tolist()
    eagle_fused = tput[tput.figure_id == "eagle3_fusion_96_1"].tokens_per_s.tolist()
    rows = []
    same = compare(baseline, fusion_runs)
    rows.append(
        {
            "comparison": "fusion (5 runs) vs baseline 92.6, same CUDA 13 stack",
            "ratio": same["ratio"],
            "verdict": same["verdict"],
            "caveat": "the baseline may itself have been fused (auto-enable)",
        }
    )
    jump = compare(eagle, eagle_fused)
    rows.append(
        {
            "comparison": "EAGLE-3 + fusion 96.1 vs EAGLE-3 54.1",
            "ratio": jump["ratio"],
            "verdict": "single figures: no interval possible",
            "caveat": "different stacks (CUDA 12.8 vs 13 + patches): not a controlled comparison",
        }
    )
    return pd.DataFrame(rows).assign(provenance="statistic on reported figures")


def stored_benchmarks(ev: Evidence) -> dict[str, pd.DataFrame]:
    """Every stored run's single-stream table, sweep cells, per-request rows and variant states."""
    store = ev.runs
    out: dict[str, list[pd.DataFrame]] = {"single": [], "cells": [], "requests": [], "states": []}
    for m in store.manifests():
        for key, table in (("single", "single_stream"), ("cells", "sweep_cells"), ("states", "variant_state")):
            if table in m.tables:
                out[key].append(store.read_table(m.run_id, table).assign(run_id=m.run_id, label=m.label))
        for table in m.tables:
            if table.startswith("sweep-"):
                out["requests"].append(store.read_table(m.run_id, table).assign(run_id=m.run_id, label=m.label))
    return {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in out.items()}


def active_only(frame: pd.DataFrame, states: pd.DataFrame) -> pd.DataFrame:
    """Drop rows of variants whose mechanism could not act (never charted as if active)."""
    if frame.empty or states.empty:
        return frame
    inactive = set(
        zip(
            states.loc[~states.active.astype(bool), "run_id"],
            states.loc[~states.active.astype(bool), "variant"],
            strict=False,
        )
    )
    keep = [(r, v.split("-r")[0]) not in inactive for r, v in zip(frame.run_id, frame.variant, strict=False)]
    return frame[keep]


def crossovers(requests: pd.DataFrame) -> pd.DataFrame:
    """Crossover concurrency of each speculative variant against its non-speculative twin, per run."""
    rows = []
    if requests.empty:
        return pd.DataFrame(rows)
    frame = requests.rename(columns={"output_tokens_per_s": "per_request_tokens_per_s"})
    for run_id, part in frame.groupby("run_id"):
        for spec, twin in SPECULATIVE_TWINS.items():
            if {spec, twin} <= set(part.variant):
                result = crossover(part, spec, twin)
                rows.append(
                    {
                        "run_id": run_id,
                        "speculative": spec,
                        "twin": twin,
                        "status": result["status"],
                        "estimate": result["estimate"],
                        "bracket": result["bracket"],
                    }
                )
    return pd.DataFrame(rows)


def single_stream_chart(reported: pd.DataFrame, measured: pd.DataFrame | None = None) -> Figure:
    """Tok/s per variant, one stream: reported bars; measured points with 95 % intervals when stored."""
    bars = reported.assign(
        label=[
            figure_label(*row)
            for row in reported[["variant", "stack", "conditions", "seed_file"]].itertuples(index=False)
        ]
    )
    kinds = {"reported"} | ({"measured"} if measured is not None and not measured.empty else set())
    layers = [
        alt.Chart(bars)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=320)),
            x=alt.X("tokens_per_s:Q", title="output tokens/s, one stream"),
            color=provenance_color(kinds),
            tooltip=["figure_id", "variant", "stack", "tokens_per_s", "seed_file", "quote"],
        )
    ]
    provenance = [f"reported: {s}" for s in sorted(set(reported.seed_file))]
    if measured is not None and not measured.empty:
        m = measured.assign(label=measured["variant"] + " · " + measured["label"], provenance="measured")
        layers.append(alt.Chart(m).mark_rule().encode(y="label:N", x="ci95_low:Q", x2="ci95_high:Q"))
        layers.append(
            alt.Chart(m)
            .mark_point(filled=True)
            .encode(
                y="label:N",
                x="median_output_tokens_per_s:Q",
                color=provenance_color(kinds),
                tooltip=["variant", "label", "median_output_tokens_per_s", "ci95_low", "ci95_high", "run_id"],
            )
        )
        provenance += [f"measured: run {r}" for r in sorted(set(m.run_id))]
    chart = alt.layer(*layers).properties(width=460, height=alt.Step(18))
    return Figure(
        chart,
        caption="Single-stream throughput per variant (bars reported by the case study; points "
        "with 95 % intervals measured, when stored)",
        provenance=provenance,
        name="single_stream",
    )


def sweep_chart(cells: pd.DataFrame, crossing: pd.DataFrame) -> Figure:
    """Aggregate throughput vs concurrency per variant, crossover concurrencies marked."""
    base = (
        alt.Chart(cells)
        .mark_line(point=True)
        .encode(
            x=alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2)),
            y=alt.Y("output_tokens_per_s:Q", title="aggregate output tokens/s"),
            color="variant:N",
            tooltip=["variant", "concurrency", "output_tokens_per_s", "median_itl_ms", "accept_length", "run_id"],
        )
    )
    layers = [base]
    marks = crossing.dropna(subset=["estimate"]) if not crossing.empty else crossing
    if not marks.empty:
        layers.append(
            alt.Chart(marks).mark_rule(strokeDash=[4, 3]).encode(x="estimate:Q", tooltip=["speculative", "bracket"])
        )
    return Figure(
        alt.layer(*layers).properties(width=460, height=260),
        caption="Throughput vs concurrency (measured); dashed: where speculation stops paying",
        provenance=[f"measured: run {r}" for r in sorted(set(cells.run_id))],
        name="sweep",
    )


STATE_COLUMNS = [
    "variant",
    "fusion",
    "speculative_algorithm",
    "tp_size",
    "active",
    "inactive_reasons",
    "failure",
    "run_id",
]
CELL_COLUMNS = [
    "variant",
    "concurrency",
    "requests",
    "failed",
    "output_tokens_per_s",
    "median_itl_ms",
    "p99_itl_ms",
    "median_ttft_ms",
    "median_tpot_ms",
    "accept_length",
    "run_id",
]


def _shown(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns a page has room for (those the frame has)."""
    return frame[[c for c in columns if c in frame.columns]]


def benchmark_section(ev: Evidence) -> Section:
    """What is stored: single-stream results (active variants only), sweeps, crossovers — or that none is."""
    stored = stored_benchmarks(ev)
    section = Section("Measured benchmark runs")
    if stored["single"].empty and stored["cells"].empty:
        return section.add(
            "No benchmark of a real SGLang server is stored in this edition's data: every "
            "throughput figure in this chapter is reported. Run this chapter in live mode on the "
            "GPU box to measure.",
            "",
        )
    if not stored["states"].empty:
        section.add("Variant states (requested vs in effect)", _shown(stored["states"], STATE_COLUMNS))
    single = active_only(stored["single"], stored["states"])
    if not single.empty:
        section.add("Single stream (active variants only)", single)
    if not stored["cells"].empty:
        cells = active_only(stored["cells"], stored["states"])
        section.add("Sweep cells (the full table is in the run's sweep_cells)", _shown(cells, CELL_COLUMNS))
        section.add("Crossover concurrency", crossovers(active_only(stored["requests"], stored["states"])))
        section.add("Pareto view and goodput under the SLOs", pareto_frame(cells, stored["states"]))
        section.add("Accept length per prompt category", accept_by_category(stored["requests"]))
    greedy = greedy_equivalence(ev)
    if not greedy.empty:
        section.add("Greedy outputs vs the baseline (fusion must not change answers)", greedy)
    return section


def accept_by_category(requests: pd.DataFrame) -> pd.DataFrame:
    """Token-weighted accept length per prompt category (acceptance depends on the text)."""
    spec = requests.dropna(subset=["spec_verify_ct"])
    if spec.empty:
        return pd.DataFrame(columns=["run_id", "variant", "category", "accept_length"])
    grouped = spec.groupby(["run_id", "variant", "category"])
    return (grouped["output_tokens"].sum() / grouped["spec_verify_ct"].sum()).rename("accept_length").reset_index()


def pareto_frame(cells: pd.DataFrame, states: pd.DataFrame) -> pd.DataFrame:
    """Tokens/s per user vs tokens/s per GPU for each cell (GPUs = TP size in effect)."""
    if cells.empty:
        return cells
    tp = (
        {}
        if states.empty
        else dict(zip(zip(states.run_id, states.variant, strict=False), states.tp_size, strict=False))
    )
    frame = cells.copy()
    gpus = [tp.get((r, v.split("-r")[0]), 1) or 1 for r, v in zip(frame.run_id, frame.variant, strict=False)]
    frame["tokens_per_s_per_gpu"] = frame["output_tokens_per_s"] / pd.Series(gpus, index=frame.index)
    return frame[
        ["run_id", "variant", "concurrency", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "goodput_tokens_per_s"]
    ]


def greedy_equivalence(ev: Evidence) -> pd.DataFrame:
    """Each variant's greedy outputs against the baseline's of the same run, token by token."""
    from verifylab.bench.method import compare_greedy_outputs

    store = ev.runs
    rows = []
    for m in store.manifests():
        if "single-baseline" not in m.tables:
            continue
        base = store.read_table(m.run_id, "single-baseline")
        for table in m.tables:
            if table.startswith("single-") and table != "single-baseline":
                cmp = compare_greedy_outputs(base, store.read_table(m.run_id, table))
                rows.append(cmp.assign(run_id=m.run_id, variant=table.removeprefix("single-")))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
