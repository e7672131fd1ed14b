"""Tables and charts for chapter 02: reported case-study figures and stored benchmark runs."""

from __future__ import annotations

import altair as alt
import pandas as pd

from verifylab.derived import derived
from verifylab.report.charts import Figure
from verifylab.report.intervals import between_run_variation, single_stream_intervals, sweep_intervals
from verifylab.report.section import Section
from verifylab.selection import newest_of_each_experiment
from verifylab.stats import DEFAULT_SLO, compare, compare_greedy_outputs, crossover
from verifylab.store.evidence import Evidence
from verifylab.vocab import BOX_VERIFY_POINTS_TABLE, SPECULATION_POINTS_TABLE

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
    liability = reported_liability_concurrency(ev)
    if liability is not None:
        rows.append(
            {
                "comparison": f"EAGLE-3 + fusion under load: a liability from {liability:g} concurrent requests",
                "ratio": None,
                "verdict": "a threshold as reported: no sweep behind it is reported",
                "caveat": "one stack (CUDA 13 + patches), its accept length and context not reported",
            }
        )
    return pd.DataFrame(rows).assign(provenance="statistic on reported figures")


def reported_liability_concurrency(ev: Evidence) -> float | None:
    """The concurrency from which the case study reports speculation to be a liability (None: not in the table)."""
    rows = ev.figures[ev.figures.figure_id == "spec_liability_concurrency"]
    return float(rows["value"].iloc[0]) if not rows.empty else None


def stored_benchmarks(ev: Evidence) -> dict[str, pd.DataFrame]:
    """The single-stream table, sweep cells, per-request rows and variant states of the newest run of each stored
    experiment (:mod:`verifylab.selection`; speculation grids aside: chapter 02 shows them with the model
    beside them; box checks too: chapter 05 shows them)."""
    store = ev.runs
    out: dict[str, list[pd.DataFrame]] = {"single": [], "cells": [], "requests": [], "states": []}
    for m in newest_of_each_experiment(store.manifests()):  # a repeated experiment: its newest run
        if SPECULATION_POINTS_TABLE in m.tables or BOX_VERIFY_POINTS_TABLE in m.tables:  # shown in their own sections
            continue
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
    rows: list[dict] = []
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


def _configuration(frame: pd.DataFrame) -> pd.Series:
    """A short name for the configuration a sweep ran on (its run label up to the first colon)."""
    return frame["label"].fillna(frame["run_id"]).astype(str).str.split(":").str[0]


def pareto_chart(pareto: pd.DataFrame, slo: str) -> Figure:
    """Per-user vs per-GPU tok/s of every sweep cell, one line per variant and run through its concurrencies
    (runs of one configuration are not joined), one panel per configuration: up and right is better, and a
    variant below another's line is dominated."""
    frame = pareto.assign(configuration=_configuration(pareto))
    enc = {
        "x": alt.X("tokens_per_s_per_gpu:Q", title="tok/s per GPU (all streams)", axis=alt.Axis(tickCount=5)),
        "y": alt.Y("tokens_per_s_per_user:Q", title="tok/s per user (median stream)"),
        "color": alt.Color("variant:N", title="variant", legend=alt.Legend(orient="bottom")),
    }
    tooltip = ["configuration", "variant", "concurrency", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "run_id"]
    chart = (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(**enc, detail="run_id:N", order="concurrency:Q", tooltip=tooltip)
        .properties(width=280, height=220)
        .facet(column=alt.Column("configuration:N", title=None))
        .resolve_scale(x="independent", y="independent")
    )
    return Figure(
        chart,
        caption="Pareto view of the stored sweeps: each point a concurrency, one line per variant and run, up and "
        f"right is better; each panel its own scales (different machines). Goodput in the table is counted under "
        f"the {slo}. Measured; the stored sweeps are of tiny random-weight models: mechanics, not performance.",
        provenance=[f"measured: run {r}" for r in sorted(set(frame["run_id"]))],
        name="pareto",
    )


def load_curves_chart(cells: pd.DataFrame, tpot_slo_ms: float) -> Figure:
    """Per-user tok/s vs concurrency per variant (the load curve), one panel per configuration, with the TPOT
    SLO drawn as the per-user rate it implies (1000 / TPOT ms)."""
    frame = cells.assign(configuration=_configuration(cells))
    line = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2), title="concurrent streams"),
            y=alt.Y("tokens_per_s_per_user:Q", title="tok/s per user (median stream)"),
            color=alt.Color("variant:N", title="variant", legend=alt.Legend(orient="bottom")),
            detail="run_id:N",  # one line per run: runs of one configuration are not joined
            tooltip=["configuration", "variant", "concurrency", "tokens_per_s_per_user", "output_tokens_per_s"],
        )
    )
    floor = 1000.0 / tpot_slo_ms
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="black").encode(y=alt.datum(floor))
    chart = (
        alt.layer(line, rule, data=frame)
        .properties(width=280, height=220)
        .facet(column=alt.Column("configuration:N", title=None))
        .resolve_scale(y="independent")
    )
    return Figure(
        chart,
        caption=f"Load curves: what one user gets as streams are added; dashed, the {floor:g} tok/s per user that the "
        f"time-per-output-token SLO ({tpot_slo_ms:g} ms) implies. Measured; tiny random-weight models: mechanics.",
        provenance=[f"measured: run {r}" for r in sorted(set(frame["run_id"]))],
        name="load_curves",
    )


@derived
def sweep_views(ev: Evidence) -> tuple[pd.DataFrame, pd.DataFrame, str, float]:
    """The active sweep cells, their Pareto frame, the SLO text and the TPOT SLO (ms) the charts draw."""
    stored = stored_benchmarks(ev)
    cells = active_only(stored["cells"], stored["states"])
    if cells.empty:
        return cells, cells, slo_text(cells), DEFAULT_SLO["tpot_s"] * 1e3
    pareto = pareto_frame(cells, stored["states"]).assign(label=cells["label"].values)
    tpot = cells["slo_tpot_s"].dropna() if "slo_tpot_s" in cells else pd.Series(dtype=float)
    return cells, pareto, slo_text(cells), float(tpot.max() * 1e3) if not tpot.empty else DEFAULT_SLO["tpot_s"] * 1e3


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
CELL_COLUMNS = [  # what fits the text column beside the two interval bounds (requests: in the run's own table)
    "variant",
    "concurrency",
    "failed",
    "output_tokens_per_s",
    "per_request_tokens_per_s_ci95",
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
        section.add("Single stream (active variants only)", single_stream_intervals(single))
        variation = between_run_variation(single)
        if not variation.empty:
            section.add(
                "Between runs: one configuration's medians in different runs (wider than any one run's interval)",
                variation,
            )
    if not stored["cells"].empty:
        cells = active_only(stored["cells"], stored["states"])
        section.add(
            "Sweep cells (the full table is in the run's sweep_cells)", sweep_intervals(_shown(cells, CELL_COLUMNS))
        )
        section.add("Crossover concurrency", crossovers(active_only(stored["requests"], stored["states"])))
        pareto = pareto_frame(cells, stored["states"])
        section.add(f"Pareto view and goodput under the SLOs ({slo_text(cells)})", pareto)
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


def slo_text(cells: pd.DataFrame) -> str:
    """The service-level objectives goodput was counted under, as the cells stored them (``TTFT <= 2 s, TPOT <=
    50 ms``); the defaults where a cell has none."""
    ttft = cells["slo_ttft_s"].dropna() if "slo_ttft_s" in cells else pd.Series(dtype=float)
    tpot = cells["slo_tpot_s"].dropna() if "slo_tpot_s" in cells else pd.Series(dtype=float)
    ttft_s = sorted(set(ttft)) or [DEFAULT_SLO["ttft_s"]]
    tpot_s = sorted(set(tpot)) or [DEFAULT_SLO["tpot_s"]]
    return f"SLOs: {slo_limits(ttft_s, tpot_s)}"


def slo_limits(ttft_s: list[float], tpot_s: list[float]) -> str:
    """The SLO limits in words: ``time to first token <= 2 s, time per output token <= 50 ms`` (several values of
    one limit joined by ``/``)."""
    return (
        f"time to first token <= {'/'.join(f'{v:g}' for v in ttft_s)} s, time per output token <= "
        f"{'/'.join(f'{v * 1e3:g}' for v in tpot_s)} ms"
    )


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
    """Each variant's greedy outputs against the baseline's of the same run, token by token (a repeated experiment:
    its newest run)."""
    store = ev.runs
    rows = []
    for m in newest_of_each_experiment(store.manifests()):
        if "single-baseline" not in m.tables:
            continue
        base = store.read_table(m.run_id, "single-baseline")
        for table in m.tables:
            if table.startswith("single-") and table != "single-baseline":
                cmp = compare_greedy_outputs(base, store.read_table(m.run_id, table))
                rows.append(cmp.assign(run_id=m.run_id, variant=table.removeprefix("single-")))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
