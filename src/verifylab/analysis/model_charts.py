"""The model's charts of chapter 4: one all-reduce's cost by regime, the options per regime and load, the case
study's Pareto, speculation's gain by context and the context terms' error profiles. The rendering kit
(:mod:`verifylab.report.charts`: :class:`Figure`, the book's one chart style) knows no topic; these do."""

from __future__ import annotations

import altair as alt
import pandas as pd

from verifylab.report.charts import Figure, legend_colour, tooltips


def regime_curves_chart(curves: pd.DataFrame) -> Figure:
    """One all-reduce's latency vs message size, per regime and collective, as bands (low-high of the sources)."""
    curves = curves.assign(series=curves["regime"] + ": " + curves["collective"])
    x = alt.X(
        "tokens:Q", scale=alt.Scale(type="log", base=2), title="tokens per pass (message = tokens x hidden x 2 bytes)"
    )
    y = alt.Y("low_us:Q", scale=alt.Scale(type="log"), title="one all-reduce at 8 ranks (µs)")
    color = alt.Color(
        "series:N", title="regime: collective", legend=alt.Legend(orient="bottom", columns=2, labelLimit=0)
    )
    band = alt.Chart(curves).mark_area(opacity=0.25).encode(x=x, y=y, y2="high_us:Q", color=color)
    mid = (
        alt.Chart(curves)
        .mark_line()
        .encode(
            x=x,
            y="mid_us:Q",
            color=color,
            tooltip=[
                "series",
                "tokens",
                alt.Tooltip("low_us:Q", format=".0f"),
                alt.Tooltip("high_us:Q", format=".0f"),
                "basis",
            ],
        )
    )
    return Figure(
        (band + mid).properties(width=440, height=280),
        caption="What one 8-rank all-reduce costs by message size in each communication regime: healthy P2P from "
        "public RTX PRO 6000 measurements (NCCL, and the fused one-shot push inside a pass), host memory from the "
        "measured 2 x H200 curve scaled as a ring, and the case study's own pass. Modelled from the named sources.",
        provenance=[
            "reported (public): data/reference/public_measurements.csv",
            "measured: host-memory probe",
            "reported: seed 000",
            "modelled",
        ],
        name="regime_curves",
    )


def options_chart(options: pd.DataFrame) -> Figure:
    """One stream's tok/s per option at each load, as range bars, one panel per communication regime (a row whose
    option is plain decoding is drawn as one more option: the line EAGLE-3 must beat)."""
    frame = options.dropna(subset=["tokens_per_s_low"]).assign(
        mid=lambda f: (f["tokens_per_s_low"] + f["tokens_per_s_high"]) / 2
    )
    base = alt.Chart().encode(  # no data of its own: the layer's is faceted by regime (own data: every panel all)
        x=alt.X("streams:O", title="concurrent streams"),
        xOffset=alt.XOffset("option:N"),
        color=legend_colour("option:N", "option", columns=2),
    )
    bars = base.mark_bar(opacity=0.55).encode(
        y=alt.Y("tokens_per_s_low:Q", title="one stream's tok/s (range)"),
        y2="tokens_per_s_high:Q",
        tooltip=tooltips("regime", "option", "streams", tokens_per_s_low=".0f", tokens_per_s_high=".0f"),
    )
    ticks = base.mark_tick(thickness=2, color="black").encode(y="mid:Q")
    chart = (
        alt.layer(bars, ticks, data=frame)
        .properties(width=170, height=230)
        .facet(
            column=alt.Column(
                "regime:N", title=None, sort=list(dict.fromkeys(frame["regime"])), header=alt.Header(labelFontSize=12)
            )
        )
    )
    return Figure(
        chart,
        caption="Each option's one-stream tok/s with EAGLE-3 at 1, 8 and 32 streams per communication regime, "
        "beside plain decoding's (no speculation): bars span the range (draft tokens, measured rates before the "
        "jump, the sources' spread), ticks mark the middle; options a regime cannot run are absent. Modelled within "
        "physical floors (chapter 4's inputs).",
        provenance=["modelled", "reported (public)", "measured", "reported"],
        name="options_by_regime",
    )


PARETO_LABELLED_STREAMS = (1, 8, 32, 128)  # the loads the book prices, and the last: labelled on the Pareto lines


def throughput_pareto_chart(frame: pd.DataFrame) -> Figure:
    """Per-user against total tok/s as streams are added, one line per decoding and one panel per regime; the
    points mark the middle of each range, the tooltips give the range (modelled)."""
    data = frame.assign(
        total=(frame["total_tokens_per_s_low"] + frame["total_tokens_per_s_high"]) / 2,
        per_user=(frame["per_user_tokens_per_s_low"] + frame["per_user_tokens_per_s_high"]) / 2,
    )
    labelled = data["streams"].isin(PARETO_LABELLED_STREAMS)
    data = data.assign(label=[f"{s:g}" if keep else "" for s, keep in zip(data["streams"], labelled, strict=True)])
    base = alt.Chart().encode(  # no data of its own: the layer's is faceted by regime
        x=alt.X("total:Q", title="total tok/s (all streams)"),
        y=alt.Y("per_user:Q", title="tok/s per user"),
        color=legend_colour("decoding:N", "decoding"),
        order="streams:Q",
        tooltip=tooltips(
            "regime",
            "decoding",
            "streams",
            total_tokens_per_s_low=".0f",
            total_tokens_per_s_high=".0f",
            per_user_tokens_per_s_low=".1f",
            per_user_tokens_per_s_high=".1f",
        ),
    )
    labels = base.mark_text(align="left", dx=5, dy=-7, fontSize=12).encode(text="label:N")  # 11 px at 800
    chart = (
        alt.layer(base.mark_line(), base.mark_point(filled=True, size=30), labels, data=data)
        .properties(width=190, height=220)
        .facet(column=alt.Column("regime:N", title=None, sort=list(dict.fromkeys(data["regime"]))))
    )
    shown = ", ".join(f"{s:g}" for s in PARETO_LABELLED_STREAMS)
    return Figure(
        chart,
        caption="Tok/s per user against total tok/s as streams are added (1 to 128), plain decoding and EAGLE-3 on the "
        f"case study's box per regime, the points at {shown} streams labelled; up and right is better. Modelled: "
        "the speculation model calibrated to the reported plain decoding rate, EAGLE-3 at the reported accept "
        "length over the draft-token range, the per-cycle overheads measured on one H200; points mark the middle "
        "of each range.",
        provenance=["modelled", "reported", "measured"],
        name="case_pareto",
    )


def context_gain_chart(cells: pd.DataFrame) -> Figure:
    """Speculation's gain by streams per context of the public per-context matrices: the reported cells as points
    (shaped by role), the transfer's predicted range as a band, one colour per matrix, one panel per context."""
    data = cells.dropna(subset=["gain_reported"])
    order = list(dict.fromkeys(data["context_label"]))
    x = alt.X("streams:Q", scale=alt.Scale(type="log", base=2), title="concurrent streams")
    color = legend_colour("matrix:N", "matrix")
    band = (
        alt.Chart()
        .mark_area(opacity=0.25)
        .encode(x=x, y=alt.Y("gain_low:Q", title="EAGLE-3 over plain (x)"), y2="gain_high:Q", color=color)
    )
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(y=alt.datum(1.0))
    points = (
        alt.Chart()
        .mark_point(size=45)
        .encode(
            x=x,
            y="gain_reported:Q",
            color=color,
            shape=alt.Shape("role:N", title="cell", legend=alt.Legend(orient="bottom")),
            tooltip=tooltips(
                "matrix", "context_label", "streams", "role", gain_reported=".2f", gain_low=".2f", gain_high=".2f"
            ),
        )
    )
    chart = (
        alt.layer(band, one, points, data=data)
        .properties(width=200, height=160)
        .facet(facet=alt.Facet("context_label:N", title=None, sort=order), columns=3)
    )
    return Figure(
        chart,
        caption="EAGLE-3's gain by streams at each context of the public Kimi-K2.6 matrices (8 x RTX PRO 6000, vLLM, "
        "TRITON_MLA): reported cells as points, the model's range as a band (each matrix's own shortest-context row "
        "moved by the context terms fitted on the current matrix's plain cells).",
        provenance=["reported (public): data/reference/public_context.csv", "modelled"],
        name="context_gain",
    )


def error_profile_chart(profiles: pd.DataFrame) -> Figure:
    """Each fitted parameter's error profile across its range (the fit's miss with the other parameter refitted), and
    the verify reads' profile on the held-out speculative cells; a rule marks where each is used."""
    data = profiles.assign(used=profiles["used"].astype(float))
    base = alt.Chart().encode(x=alt.X("value:Q", title="value"))
    line = base.mark_line().encode(
        y=alt.Y("rms_miss:Q", title="miss (relative)"), tooltip=tooltips("parameter", value=".4f", rms_miss=".3f")
    )
    rule = alt.Chart().mark_rule(color="firebrick").encode(x="used:Q")
    chart = (
        alt.layer(line, rule, data=data)
        .properties(width=190, height=150)
        .facet(column=alt.Column("parameter:N", title=None))
        .resolve_scale(x="independent", y="independent")
    )
    return Figure(
        chart,
        caption="Error profiles of the context terms: per pass and per stream (ms per 1,000 tokens of context; the "
        "root-mean-square miss on the plain cells fitted on, the other term refitted at each value) and the verify's "
        "reads of a stream's context per cycle (the median miss on the held-out speculative cells; not fitted). The "
        "red rule marks the value used.",
        provenance=["reported (public): data/reference/public_context.csv", "modelled"],
        name="context_profiles",
    )
