"""Chapter 02, the benchmarks: reported single-stream figures, what they resolve, every stored measured run, the
live TP-2 runs (mechanics), and ``live``: run every variant on the box, one stream and the sweep."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis import benchmarks, grid_agreement, live_tp2, speculation_load
from verifylab.analysis.benchmarks import benchmark_section
from verifylab.analysis.live_smoke import live_smoke_benchmarks
from verifylab.bench.campaign import run_campaign
from verifylab.bench.method import SingleStreamConfig
from verifylab.bench.runner import RunPlace
from verifylab.bench.speculation import run_speculation_grid
from verifylab.chapters._base import live_section, nothing_stored, shown_as_table
from verifylab.chapters.params import Benchmarks as Params
from verifylab.derived import derived
from verifylab.errors import ParameterError
from verifylab.report.charts import Figure
from verifylab.report.intervals import single_stream_intervals
from verifylab.report.section import Prose, Section
from verifylab.report.tables import Table, as_table
from verifylab.reported import reported_text
from verifylab.server.variants import BaseConfig
from verifylab.store.evidence import Evidence

__all__ = ["Params", "benchmark_section", "live_smoke_benchmarks"]  # shown as the analysis builds them

DEFAULT_RUN_ID = "live-benchmarks"


def reported_liability(ev: Evidence) -> Prose:
    """Where the case study says speculation turns into a liability, formatted from its reported figure."""
    return Prose(
        "Concurrency: the case study reports speculation turning into a liability from about "
        f"{reported_text(ev.figures, 'spec_liability_concurrency')} concurrent requests (reported, seed 002)."
    )


def case_method(ev: Evidence) -> Prose:
    """How the case study compared its variants, each number formatted from its reported figure."""
    warmups, runs, tokens, liability = (
        reported_text(ev.figures, f)
        for f in ("bench_warmups", "bench_runs", "bench_tokens", "spec_liability_concurrency")
    )
    return Prose(
        f"The case study compared variants with a one-off script ({warmups} warm-ups, {runs} runs x {tokens} tokens, "
        f"one stream) and noted that from about {liability} concurrent requests speculation becomes a liability."
    )


def deployer_finding(ev: Evidence) -> Prose:
    """Finding: what a deployer can take from the benchmarks (reported figures, crossover), formatted from them."""
    single = benchmarks.reported_single_stream(ev).set_index("figure_id")["tokens_per_s"]
    fusion = single[single.index.str.startswith("fusion_run_")]
    liability = ev.figures.set_index("figure_id").loc["spec_liability_concurrency", "value"]
    return Prose(
        f"For a deployer: on the case study's own stack fusion did not move one stream ({fusion.min():.1f}-"
        f"{fusion.max():.1f} tok/s in five runs against the baseline's {single['baseline_92_6']:.1f}); EAGLE-3's "
        f"{single['eagle3_54_1']:.1f} -> {single['eagle3_fusion_96_1']:.1f} tok/s spans two software stacks and "
        f"cannot be credited to fusion (chapter 4 prices it); and the case study turns speculation off from about "
        f"{liability:.0f} concurrent requests (reported, seed 002). The sweeps stored here (the Pareto chart and "
        "load curves below) are of tiny random-weight models: they show the harness finds a crossover and prices "
        "goodput, not where a Kimi-K2.5 box crosses."
    )


def sweep_views(ev: Evidence) -> tuple[pd.DataFrame, pd.DataFrame, str, float]:
    return benchmarks.sweep_views(ev)


NO_SWEEP = "a load sweep (table sweep_cells)", "chapter 02 live measures one"
NO_GRID = "a speculation grid (table speculation_points)", "chapter 02 live with its `speculation` grid measures one"


def pareto_figure(ev: Evidence) -> Figure | Prose:
    """Figure: per-user vs per-GPU tok/s of every stored sweep (measured; mechanics)."""
    _, pareto, slo, _ = sweep_views(ev)
    return benchmarks.pareto_chart(pareto, slo) if not pareto.empty else nothing_stored(ev, *NO_SWEEP)


def load_curves_figure(ev: Evidence) -> Figure | Prose:
    """Figure: per-user tok/s vs concurrency with the TPOT SLO drawn (measured; mechanics)."""
    cells, _, _, tpot = sweep_views(ev)
    return benchmarks.load_curves_chart(cells, tpot) if not cells.empty else nothing_stored(ev, *NO_SWEEP)


def speculation_finding(ev: Evidence) -> Prose:
    """Finding: where speculation stops paying under load on one H200 (measured, on the grid whose plain and
    speculative servers routed alike), and how well the model predicts every grid out of sample; formatted from the
    stored runs."""
    view = speculation_load.speculation_view(ev)
    if view.empty:
        return Prose("No speculation-under-load run is stored: run chapter 02 live with its `speculation` grid.")
    key = ["drafter", "draft_tokens", "accept_length"]
    alike = view[view["plain_routing"] == view["routing"]]
    like_run = str(alike["run_id"].iloc[0]) if not alike.empty else str(view["run_id"].iloc[0])
    table = speculation_load.crossover_table(view)
    words = table[table["run"] == like_run].drop_duplicates(subset=key, keep="last").set_index(key)
    agree, total, worst = speculation_load.agreement(view)
    eagle = [k for k in words.index if k[0] == "EAGLE-3" and k[1] == max(i[1] for i in words.index)]
    fits = grid_agreement.grid_fit_summary(view)
    out = fits[fits["role"] == "out of sample"]

    def at(key: tuple) -> str:
        where = words.loc[key, "measured_streams"]
        if where == "never":
            return f"never pays at accept length {key[2]:g}"
        interval = words.loc[key, "measured_interval_streams"]
        return f"pays up to {where} streams at accept length {key[2]:g} (interval {interval})"

    calibrated = ""
    for r in grid_agreement.calibration_effect(ev.measured).itertuples():
        calibrated += (
            f" Calibrated to run {r.run}'s own one-stream plain rate, as `verifylab box` calibrates to a box's, the "
            f"model's median error on that run's speculative rates goes from {r.fitted_median_error:.1%} to "
            f"{r.calibrated_median_error:.1%}."
        )
    return Prose(
        "Under load, speculation's gain falls as streams are added, and the accept length sets where it falls "
        f"below 1: EAGLE-3 with {eagle[0][1]} draft tokens on one H200 (a Qwen3-30B-A3B-shaped MoE, run {like_run}) "
        + "; ".join(at(k) for k in sorted(eagle, key=lambda k: k[2]))
        + f". The model, fitted on that run's plain decoding and each drafter's sweep at accept length "
        f"{speculation_load.FIT_ACCEPT:g}, meets {agree} of {total} out-of-sample cells within "
        f"{speculation_load.AGREEMENT:.0%} (the worst misses by {worst:.0%}); out of sample the median cell misses by "
        f"{out['median_error'].min():.0%} to {out['median_error'].max():.0%} across the {len(out)} grids, and the "
        "table gives every crossover measured beside predicted." + calibrated
    )


def speculation_figure(ev: Evidence) -> Figure | Prose:
    """Figure: gain over plain decoding against streams per drafter, chain and accept length (measured, modelled)."""
    view = speculation_load.speculation_view(ev)
    return speculation_load.gain_chart(view) if not view.empty else nothing_stored(ev, *NO_GRID)


def speculation_crossovers(ev: Evidence) -> Table | Prose:
    """Table: where speculation stops paying, per drafter, chain and accept length, measured beside predicted."""
    view = speculation_load.speculation_view(ev)
    return as_table(speculation_load.crossover_table(view)) if not view.empty else nothing_stored(ev, *NO_GRID)


def speculation_cells(ev: Evidence) -> Table | Prose:
    """Table: every measured cell (gain and interval) with the model's range beside it."""
    view = speculation_load.speculation_view(ev)
    return as_table(speculation_load.cells_table(view)) if not view.empty else nothing_stored(ev, *NO_GRID)


@shown_as_table
def speculation_fits(ev: Evidence) -> pd.DataFrame:
    """Table: per grid run, the fit that prices it (run; how plain and speculative servers routed) and its error,
    fitted beside out of sample."""
    return grid_agreement.grid_fit_summary(speculation_load.speculation_view(ev))


@shown_as_table
def speculation_before_run(ev: Evidence) -> pd.DataFrame:
    """Table: the spread-forced grid's cells, the prediction committed before it ran and the refit's beside them."""
    table = grid_agreement.prediction_before_run(ev.measured, speculation_load.speculation_view(ev))
    return grid_agreement.before_run_view(table)


def spread_finding(ev: Evidence) -> Prose:
    """Finding: what the spread-forced grid showed against the prediction made before it ran (formatted from the
    stored run and its stored prediction)."""
    table = grid_agreement.prediction_before_run(ev.measured, speculation_load.speculation_view(ev))
    if table.empty:
        return Prose("No grid stored the model's prediction before it ran.")
    view = speculation_load.speculation_view(ev)
    fits = grid_agreement.grid_fit_summary(view).set_index(["run", "role"])
    run = str(table["run"].iloc[-1])
    out = fits.loc[(run, "out of sample")] if (run, "out of sample") in fits.index else None
    missed = table[table["before_miss"] > speculation_load.AGREEMENT]
    top = table[table["streams"] == table["streams"].max()].iloc[0]
    plain_miss = table.groupby("streams")["plain_before_miss"].first()
    words = (
        f"The spread-forced grid (run {run}) was predicted before it ran: {len(missed)} of {len(table)} gain cells "
        f"missed that prediction by more than {speculation_load.AGREEMENT:.0%} (the worst by "
        f"{table['before_miss'].max():.0%}). Plain decoding missed it by at most {plain_miss.max():.0%} (at "
        f"{int(plain_miss.idxmax())} streams) and at {int(top['streams'])} streams took {top['plain_ms']:.1f} ms a "
        f"step, {'at or above' if top['plain_ms'] >= top['spread_floor_ms'] else 'below'} the "
        f"{top['spread_floor_ms']:.1f} ms the experts' bytes allow when every token draws its own"
        f"{': the router spread' if top['plain_ms'] >= top['spread_floor_ms'] else ': the router did not spread'}. "
        "EAGLE-3 gained more than predicted because only plain decoding spread: the speculative servers' tokens are "
        "the random draft's greedy picks, kept by the simulated acceptance whatever the sampling, so their experts "
        "stayed collapsed"
    )
    alike = grid_agreement.speculative_time_beside_fit(view)
    alike = alike[alike["run"] == run]
    if not alike.empty:
        a = alike.iloc[0]
        words += (
            f" (their time per token sits at a median {a['median_ratio']:.2f} of the collapsed grid's, run "
            f"{a['fitted_run']}, {a['within_10_pct']} of {a['cells']} cells within 10 %)"
        )
    if out is not None:
        words += (
            f". Priced that way by the collapsed grid's fit, over this run's own plain decoding, the grid is predicted "
            f"with a median error of {out['median_error']:.0%} ({out['agreeing_share']:.0%} of its cells within "
            f"{speculation_load.AGREEMENT:.0%}), never fitted on"
        )
    return Prose(words + ".")


@derived
def _serving(ev: Evidence) -> pd.DataFrame:
    return speculation_load.serving_metrics(ev.measured)


def serving_finding(ev: Evidence) -> Prose:
    """Finding: what the grid's servers deliver under the SLO as streams are added (measured)."""
    metrics = _serving(ev)
    if metrics.empty:
        return Prose("No speculation-under-load run is stored: no serving metrics to show.")
    best = metrics.loc[metrics.groupby("server")["goodput_tokens_per_s"].idxmax()]
    plain = best[best["server"] == "plain decoding"].iloc[0]
    within = metrics["within_slo_pct"].min()
    return Prose(
        f"Under the SLO ({speculation_load.slo_words()}), plain decoding peaks at {plain.goodput_tokens_per_s:.0f} "
        f"tok/s of goodput (decode phase, all streams) at {plain.streams} streams; at least {within:.0f} % of every "
        "cell's requests met the SLO, "
        f"and the worst p99 time to first token is {metrics['ttft_p99_ms'].max():.0f} ms. The table gives every "
        "server and stream count: time to first token and time per output token at p50 and p99, and goodput."
    )


def serving_figure(ev: Evidence) -> Figure | Prose:
    """Figure: goodput against streams per server of the speculation grid (measured)."""
    serving = _serving(ev)
    return speculation_load.goodput_chart(serving) if not serving.empty else nothing_stored(ev, *NO_GRID)


@shown_as_table
def serving_table(ev: Evidence) -> pd.DataFrame:
    """Table: TTFT and TPOT at p50 and p99, the share within the SLO and goodput, per server and streams (measured)."""
    return _serving(ev).round(1)


@shown_as_table
def reported_comparisons(ev: Evidence) -> pd.DataFrame:
    """Table: what the reported figures resolve, and what they cannot."""
    return benchmarks.reported_comparisons(ev)


@derived
def _live_tp2(ev: Evidence) -> pd.DataFrame:
    return live_tp2.live_single_stream(ev.runs)


def live_tp2_finding(ev: Evidence) -> Prose:
    """Finding: the four variants at TP 2 on 2 x H200 (mechanics, not performance)."""
    return live_tp2.live_single_stream_finding(_live_tp2(ev))


@shown_as_table
def live_tp2_table(ev: Evidence) -> pd.DataFrame:
    """Table: single-stream tok/s with the median's interval (method and coverage in the header) and accept
    length, per live TP-2 variant."""
    return single_stream_intervals(_live_tp2(ev).reset_index())


def live(params: Params, ev: Evidence) -> Section | None:
    """Live mode: run every variant on the box into ``params.run_id`` (default ``live-benchmarks``)."""
    return live_section(params, lambda: _campaign(params, ev))


def _campaign(params: Params, ev: Evidence) -> Section:
    if not params.model_path:
        raise ParameterError("02_benchmarks: parameter 'model_path' is needed in live mode (the model SGLang serves)")
    run_id = params.run_id or DEFAULT_RUN_ID
    base = BaseConfig(**params.server_settings())
    place = RunPlace(ev.data_dir, run_id, params.label, params.mechanics_only, params.campaign)
    section = Section("Live campaign")
    if params.variants:
        single = SingleStreamConfig(params.runs, params.warmup, params.max_tokens)
        states = run_campaign(base, params.variants, single, params.concurrency, params.sweep_tokens, place)
        section.add(f"Stored in run {run_id}", states)
    if params.speculation is not None:
        points = run_speculation_grid(base, params.speculation, place)
        section.add(f"Speculation under load, stored in run {run_id}", points)
    return section
