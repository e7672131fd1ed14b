"""Speculation under load, measured and predicted: each grid run's gain over plain decoding per drafter, draft
tokens, accept length and stream count (with its interval), where it falls below 1, and the speculation model's
prediction beside it (fitted on the plain sweep and each drafter's sweep at accept length 2, predicting the rest).

The gain is decode-phase: a request's time per output token after its first (prefill excluded, the same prompts on
both sides); the measured gain is the ratio of the plain and speculative means at the same streams, with a 95 %
bootstrap interval over requests."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from verifylab.analysis.benchmarks import slo_limits
from verifylab.derived import derived
from verifylab.model.views import (
    FIT_ACCEPT,
    crossover_streams,
    fit_for,
    gain_flag,
    gains,
    grid_requests,
    grid_routing,
    grid_runs,
    stored_runs,
    token_weighted_accept,
)
from verifylab.report.charts import Figure, legend_colour, tooltips
from verifylab.sources import MeasuredRuns
from verifylab.stats import DEFAULT_SLO, compare
from verifylab.store.evidence import Evidence
from verifylab.vocab import Drafter

AGREEMENT = 0.10  # a prediction "agrees" when its range and the measured interval overlap or lie within 10 %


def measured_gains(runs: MeasuredRuns) -> pd.DataFrame:
    """One row per grid run, speculative server and stream count: plain and speculative tok/s (all streams, decode
    phase), the gain with its 95 % interval, the accept length asked for and measured."""
    rows = []
    for run_id in grid_runs(runs):
        requests = grid_requests(runs, run_id)
        plain = requests[requests["drafter"] == "none"]
        spec = requests[(requests["drafter"] != "none") & requests["active"].astype(bool)]
        for (variant, drafter, k, target, c), part in spec.groupby(
            ["variant", "drafter", "draft_tokens", "accept_target", "concurrency"]
        ):
            base = plain[plain["concurrency"] == c]["tpot_s"].to_numpy()
            if base.size == 0:
                continue
            cmp = compare(part["tpot_s"].to_numpy(), base, stat=np.mean)
            rows.append(
                {
                    "run_id": run_id,
                    "variant": variant,
                    "drafter": drafter,
                    "draft_tokens": int(k),
                    "accept_target": float(target),
                    "accept_measured": token_weighted_accept(part),
                    "streams": int(c),
                    "plain_tokens_per_s": float(c / base.mean()),
                    "spec_tokens_per_s": float(c / part["tpot_s"].mean()),
                    "gain": cmp["ratio"],
                    "gain_low": cmp["ci"][0],
                    "gain_high": cmp["ci"][1],
                    "requests": len(part),
                }
            )
    return pd.DataFrame(rows)


def predicted_beside_measured(runs: MeasuredRuns) -> pd.DataFrame:
    """The measured gains with the model's range beside them. Each grid run's speculative servers are priced by the
    fit of the oldest fittable run of the same served model, GPU and speculative routing (:func:`fit_for`); the
    gain's plain side is the run's own measured plain sweep, so what is checked is the speculative cycle the model
    prices (plain decoding is checked on its own, :func:`verifylab.analysis.grid_agreement.prediction_before_run`).
    ``role`` says which sweeps the fit saw, ``routing`` how the speculative servers' experts were read and
    ``plain_routing`` plain decoding's."""
    measured = measured_gains(runs)
    if measured.empty:
        return measured
    frames = []
    for run_id, part in measured.groupby("run_id"):
        fit = fit_for(stored_runs(runs), str(run_id))
        if fit is None:
            continue
        keys = ["variant", "drafter", "draft_tokens", "accept_target"]
        for (variant, drafter, k, target), sweep in part.groupby(keys):
            predicted = gains(fit.box, fit.overheads, Drafter(drafter), float(target), int(k), list(sweep["streams"]))
            plain = sweep["plain_tokens_per_s"].to_numpy()
            fitted = run_id == fit.run_id and variant in fit.fitted_on.values()
            frames.append(
                sweep.assign(
                    predicted_low=[r.spec_tokens_per_s.low for r in predicted] / plain,
                    predicted_high=[r.spec_tokens_per_s.high for r in predicted] / plain,
                    role="fit" if fitted else "predicted",
                    fitted_run=fit.run_id,
                    routing=fit.routing.value,
                    plain_routing=grid_routing(runs, str(run_id)).value,
                )
            )
    out = pd.concat(frames, ignore_index=True)
    out["miss"] = [interval_miss(r.gain_low, r.gain_high, r.predicted_low, r.predicted_high) for r in out.itertuples()]
    out["agrees"] = out["miss"] <= AGREEMENT
    return out


def interval_miss(low: float, high: float, predicted_low: float, predicted_high: float) -> float:
    """How far a measured interval [low, high] lies outside a predicted range, relative (0 when they overlap)."""
    if high < predicted_low:
        return float(predicted_low / high - 1)
    if low > predicted_high:
        return float(low / predicted_high - 1)
    return 0.0


def crossovers(table: pd.DataFrame) -> pd.DataFrame:
    """Per sweep: where the gain falls below 1, measured (point, and from each end of the interval) and predicted
    (from each end of the model's range); NaN where it never does within the streams measured."""
    rows = []
    for (run_id, drafter, k, target, role), sweep in table.groupby(
        ["run_id", "drafter", "draft_tokens", "accept_target", "role"]
    ):
        pts = list(sweep["streams"])

        def cross(column: str, points: list[int] = pts, sweep: pd.DataFrame = sweep) -> float:
            found = crossover_streams(list(zip(points, sweep[column], strict=True)))
            return np.nan if found is None else found

        rows.append(
            {
                "run_id": run_id,
                "drafter": drafter,
                "draft_tokens": k,
                "accept_target": target,
                "role": role,
                "measured": cross("gain"),
                "measured_low": cross("gain_low"),
                "measured_high": cross("gain_high"),
                "predicted_low": cross("predicted_low"),
                "predicted_high": cross("predicted_high"),
                "max_streams": max(pts),
            }
        )
    return pd.DataFrame(rows)


def gain_chart(table: pd.DataFrame) -> Figure:
    """Gain over plain decoding against streams, one panel per drafter and chain, one colour per accept length:
    measured (points, 95 % interval bars) and the model's range (band); 1 = break-even."""
    frame = table.assign(
        panel=table["drafter"].str.upper().str.replace("EAGLE3", "EAGLE-3")
        + ", "
        + table["draft_tokens"].astype(str)
        + " draft tokens",
        accept=table["accept_target"].map(lambda a: f"{a:g}"),
        check=[
            gain_flag(max(g, hi), a) for g, hi, a in zip(table["gain"], table["gain_high"], _accept(table), strict=True)
        ],
    )
    x = alt.X("streams:Q", scale=alt.Scale(type="log", base=2), title="concurrent streams")
    color = legend_colour("accept:N", "accept length")
    band = alt.Chart().mark_area(opacity=0.18).encode(x=x, y="predicted_low:Q", y2="predicted_high:Q", color=color)
    bars = alt.Chart().mark_rule().encode(x=x, y="gain_low:Q", y2="gain_high:Q", color=color)
    points = (
        alt.Chart()
        .mark_point(filled=True, size=40)
        .encode(
            x=x,
            y=alt.Y("gain:Q", title="speculative / plain tok/s", axis=alt.Axis(tickCount=5)),
            color=color,
            shape=alt.Shape("role:N", title=None),
            tooltip=[
                "panel",
                "accept",
                "streams",
                "gain",
                "gain_low",
                "gain_high",
                "predicted_low",
                "predicted_high",
                "check",
            ],
        )
    )
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="black").encode(y=alt.datum(1.0))
    flagged = (
        alt.Chart()
        .transform_filter("datum.check != ''")
        .mark_point(size=160, color="firebrick", filled=False, strokeWidth=2)
        .encode(x=x, y="gain:Q", tooltip=["check"])
    )
    chart = (
        alt.layer(band, bars, points, rule, flagged, data=frame)
        .properties(width=260, height=170)
        .facet(facet=alt.Facet("panel:N", title=None), columns=2)
    )
    runs = sorted(set(table["run_id"]))
    return Figure(
        chart,
        caption="Speculation under load on one H200 (a Qwen3-30B-A3B-shaped MoE with random weights, SGLang holding "
        "the accept length): measured gain over plain decoding with its 95 % interval (points, bars) and the "
        "model's range (bands): the speculative side priced by the first grid's fit (its plain decoding and each "
        f"drafter's sweep at accept length {FIT_ACCEPT:g}), over each run's own measured plain decoding. Below the "
        "dashed line speculation loses; a red ring marks a gain above its accept length (unphysical: the cells "
        "table says what to check).",
        provenance=[f"measured: run {r}" for r in runs] + ["modelled: verifylab.model.speculation, fitted as stated"],
        name="speculation_gain",
    )


@derived
def speculation_view(ev: Evidence) -> pd.DataFrame:
    """The predicted-beside-measured table of the evidence's grid runs (computed once per evidence)."""
    return predicted_beside_measured(ev.measured)


def crossover_text(value: float, first: int, last: int) -> str:
    """A crossover in stream counts: ``never`` (below 1 from the first count measured), ``> 128`` (still >= 1 at
    the last), or ``31.8``."""
    if pd.isna(value):
        return f"> {last}"
    if value <= first:
        return "never"
    return f"{value:.1f}"


def _span_text(values: list[float], first: int, last: int) -> str:
    """Two crossovers as one range, lowest first (``never`` lowest, ``> last`` highest)."""
    order = sorted(values, key=lambda v: np.inf if pd.isna(v) else (-np.inf if v <= first else v))
    low, high = (crossover_text(v, first, last) for v in (order[0], order[-1]))
    return low if low == high else f"{low} to {high}"


def crossover_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per sweep: the stream count where speculation stops paying, measured (point, and from each end of its
    interval) and predicted (from each end of the model's range); ``never``: below 1 from one stream."""
    rows = []
    for r in crossovers(table).itertuples():
        first, last = int(table.loc[table["run_id"] == r.run_id, "streams"].min()), int(r.max_streams)
        rows.append(
            {
                "drafter": DRAFTER_TITLE[r.drafter],
                "draft_tokens": r.draft_tokens,
                "accept_length": r.accept_target,
                "measured_streams": crossover_text(r.measured, first, last),
                "measured_interval_streams": _span_text([r.measured_low, r.measured_high], first, last),
                "predicted_streams": _span_text([r.predicted_low, r.predicted_high], first, last),
                "predicted_width": _width_text(r.predicted_low, r.predicted_high, first),
                "role": "fitted on" if r.role == "fit" else "out of sample",
                "run": r.run_id,
                "provenance": "measured, modelled",
            }
        )
    return pd.DataFrame(rows)


def _width_text(low: float, high: float, first: int) -> str:
    """How wide a predicted crossover range is, high over low (``1.8x``); empty where an end lies beyond the
    streams measured or at the first of them (``never``)."""
    return "" if pd.isna(low) or pd.isna(high) or low <= first else f"{high / low:.1f}x"


DRAFTER_TITLE = {"eagle3": "EAGLE-3", "ngram": "NGRAM (chain)"}


def cells_table(table: pd.DataFrame) -> pd.DataFrame:
    """Every measured cell with the model's range beside it, as the page shows it."""
    return pd.DataFrame(
        {
            "drafter": table["drafter"].map(DRAFTER_TITLE),
            "draft_tokens": table["draft_tokens"],
            "accept_length": table["accept_target"],
            "streams": table["streams"],
            "gain": table["gain"],
            "gain_low": table["gain_low"],
            "gain_high": table["gain_high"],
            "predicted_low": table["predicted_low"],
            "predicted_high": table["predicted_high"],
            "role": table["role"],
            "agrees": table["agrees"],
            "check": [
                gain_flag(max(g, hi), a)
                for g, hi, a in zip(table["gain"], table["gain_high"], _accept(table), strict=True)
            ],
            "run": table["run_id"],
            "provenance": "measured, modelled",
        }
    )


def _accept(table: pd.DataFrame) -> list[float]:
    """Each cell's accept length as measured where the server reported one, else as held."""
    measured = table["accept_measured"] if "accept_measured" in table else table["accept_target"]
    return [float(m) if pd.notna(m) else float(t) for m, t in zip(measured, table["accept_target"], strict=True)]


def agreement(table: pd.DataFrame) -> tuple[int, int, float]:
    """Out-of-sample cells whose measured interval meets the predicted range within :data:`AGREEMENT`: (agreeing,
    all, the largest miss)."""
    out = table[table["role"] == "predicted"]
    return int(out["agrees"].sum()), len(out), float(out["miss"].max()) if not out.empty else 0.0


def _server(drafter: str, draft_tokens: float, accept: float) -> str:
    if drafter == "none":
        return "plain decoding"
    return f"{DRAFTER_TITLE.get(drafter, drafter)}, {int(draft_tokens)} draft tokens, accept {accept:g}"


def serving_metrics(runs: MeasuredRuns, slo: dict[str, float] | None = None) -> pd.DataFrame:
    """Per grid run, server and stream count, over its requests: time to first token and time per output token at
    p50 and p99, the share of requests within the SLO, and goodput: the decode-phase tok/s of all streams counting
    only the tokens of requests within the SLO (measured)."""
    slo = slo or DEFAULT_SLO
    rows = []
    for run_id in grid_runs(runs):
        requests = grid_requests(runs, run_id)
        requests = requests[requests["ok"].astype(bool) & requests["active"].astype(bool)]
        keys = ["drafter", "draft_tokens", "accept_target", "concurrency"]
        for (drafter, k, target, c), part in requests.groupby(keys, dropna=False):
            within = (part["ttft_s"] <= slo["ttft_s"]) & (part["tpot_s"] <= slo["tpot_s"])
            throughput = float(c / part["tpot_s"].mean())
            rows.append(
                {
                    "server": _server(str(drafter), k, float(target)),
                    "streams": int(c),
                    "ttft_p50_ms": part["ttft_s"].quantile(0.5) * 1e3,
                    "ttft_p99_ms": part["ttft_s"].quantile(0.99) * 1e3,
                    "tpot_p50_ms": part["tpot_s"].quantile(0.5) * 1e3,
                    "tpot_p99_ms": part["tpot_s"].quantile(0.99) * 1e3,
                    "within_slo_pct": 100 * float(within.mean()),
                    "goodput_tokens_per_s": throughput
                    * part.loc[within, "output_tokens"].sum()
                    / part["output_tokens"].sum(),
                    "requests": len(part),
                    "run_id": run_id,
                    "provenance": "measured",
                }
            )
    return pd.DataFrame(rows)


def slo_words(slo: dict[str, float] | None = None) -> str:
    """The SLO goodput counts, in words."""
    slo = slo or DEFAULT_SLO
    return slo_limits([slo["ttft_s"]], [slo["tpot_s"]])


def goodput_chart(metrics: pd.DataFrame) -> Figure:
    """Goodput against streams per server, one panel per grid run (measured)."""
    chart = (
        alt.Chart(metrics)
        .mark_line(point=True)
        .encode(
            x=alt.X("streams:Q", scale=alt.Scale(type="log", base=2), title="concurrent streams"),
            y=alt.Y("goodput_tokens_per_s:Q", title="goodput (tok/s, all streams)"),
            color=legend_colour("server:N", "server", columns=2),
            tooltip=tooltips(
                "run_id",
                "server",
                "streams",
                goodput_tokens_per_s=".0f",
                within_slo_pct=".0f",
                ttft_p99_ms=".0f",
                tpot_p99_ms=".1f",
            ),
        )
        .properties(width=300, height=220)
        .facet(facet=alt.Facet("run_id:N", title=None), columns=2)
    )
    return Figure(
        chart,
        caption=f"Goodput per server as streams are added: the tok/s of requests within the SLO ({slo_words()}). "
        "Measured on one H200, a Qwen3-30B-A3B-shaped MoE with random weights, the accept length held by SGLang.",
        provenance=["measured"],
        name="grid_goodput",
    )
