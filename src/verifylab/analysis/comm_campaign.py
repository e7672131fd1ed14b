"""The communication of a verify pass as measured on several GPUs (``benchmarks/gpu_multi.py`` runs): tables,
findings, charts (a live SGLang server's kernels are in ``live_tp2``).

Every frame carries ``label``, ``run_id`` and ``provenance`` ('measured'); the hardware label says what the
numbers are (e.g. '2 x H200 (NVLink), SM90 — mechanism, not Blackwell').
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from verifylab.model.views import stored_runs, validate_against_run
from verifylab.report.charts import Figure, tokens_axis
from verifylab.report.section import Prose
from verifylab.sources import MeasuredRuns
from verifylab.store.runs import RunStore
from verifylab.vocab import COMM_CAMPAIGN_TABLES

PATH_ORDER = ["nvlink", "shm", "socket"]
PATH_NAMES = {
    "nvlink": "NVLink (NCCL P2P)",
    "shm": "host memory (NCCL SHM, no P2P)",
    "socket": "loopback sockets (NCCL NET)",
}
VARIANT_NAMES = {
    "compute_only": "no communication (floor)",
    "nccl": "NCCL all-reduce + fused add+RMSNorm kernel",
    "fused": "FlashInfer fused all-reduce + add + RMSNorm",
    "one_allreduce_per_layer": "one all-reduce per layer removed (stand-in)",
    "no_allreduce": "both all-reduces removed (stand-in)",
}
IMPL_NAMES = {
    "nccl": "NCCL",
    "nccl_plus_fused_norm": "NCCL + add+RMSNorm kernel",
    "fused": "FlashInfer fused (SGLang 0.5.17 settings)",
    "fused_legacy_settings": "FlashInfer fused (forced strategy, earlier settings)",
    "all_gather": "NCCL all-gather",
    "all_to_all": "NCCL all-to-all",
}


def _stamp(frame: pd.DataFrame, store: RunStore, run_id: str) -> pd.DataFrame:
    return frame.assign(label=store.manifest(run_id).label, run_id=run_id, provenance="measured")


def verify_pass_measured(store: RunStore, run_id: str | None = None) -> pd.DataFrame:
    """One full 61-layer synthetic verify pass per path, variant and k (ms), from ``run_id`` (default: newest)."""
    run_id = run_id or store.newest_with("verify_pass")
    if run_id is None:
        return pd.DataFrame()
    frame = store.read_table(run_id, "verify_pass")
    return _stamp(frame.dropna(subset=["pass_ms"]), store, run_id)


def fusion_vs_elimination_measured(store: RunStore, run_id: str | None = None) -> pd.DataFrame:
    """Per path and k: what all communication costs in the pass, what fusing saves, what removing one or both
    all-reduces per layer saves (ms of one 61-layer pass). Fusion runs only where peers share P2P (NVLink)."""
    passes = verify_pass_measured(store, run_id)
    if passes.empty:
        return pd.DataFrame()
    wide = passes.pivot_table(index=["path", "tokens"], columns="variant", values="pass_ms").reset_index()
    for col in VARIANT_NAMES:
        if col not in wide:
            wide[col] = float("nan")
    out = pd.DataFrame(
        {
            "path": wide["path"],
            "tokens": wide["tokens"].astype(int),
            "unfused_pass_ms": wide["nccl"],
            "communication_ms": wide["nccl"] - wide["compute_only"],
            "fusion_saves_ms": wide["nccl"] - wide["fused"],
            "removing_one_per_layer_saves_ms": wide["nccl"] - wide["one_allreduce_per_layer"],
            "removing_both_saves_ms": wide["nccl"] - wide["no_allreduce"],
        }
    )
    out["path"] = pd.Categorical(out["path"], PATH_ORDER, ordered=True)
    out = out.sort_values(["path", "tokens"]).reset_index(drop=True)
    out["path"] = out["path"].astype(str)
    run_id = passes["run_id"].iloc[0]
    return _stamp(out, store, run_id)


def allreduce_latency_measured(store: RunStore) -> pd.DataFrame:
    """Per-call latency (µs, median of graph replays) by path, implementation and k, with the settings used."""
    run_id = store.newest_with(*COMM_CAMPAIGN_TABLES)
    if run_id is None:
        return pd.DataFrame()
    frame = store.read_table(run_id, "allreduce_latency")
    extra = store.table_or_none(run_id, "collective_latency")
    if extra is not None:
        frame = pd.concat([frame, extra], ignore_index=True)
    return _stamp(frame.dropna(subset=["us"]), store, run_id)


GAIN_COLUMNS = {
    "path": "path",
    "tokens": "k",
    "unfused_pass_ms": "pass, unfused (ms)",
    "communication_ms": "all communication (ms)",
    "fusion_saves_ms": "fusion saves (ms)",
    "removing_one_per_layer_saves_ms": "removing 1 / layer saves (ms)",
    "removing_both_saves_ms": "removing 2 / layer saves (ms)",
    "provenance": "provenance",
}


def fusion_vs_elimination_table(gains: pd.DataFrame) -> pd.DataFrame:
    """``gains`` as the chapter shows it: short headings, two decimals, fusion marked where it cannot run."""
    if gains.empty:
        return gains
    out = gains[list(GAIN_COLUMNS)].rename(columns=GAIN_COLUMNS)
    out["path"] = out["path"].map(PATH_NAMES)
    numeric = [c for c in out.columns if c.endswith("(ms)")]
    out[numeric] = out[numeric].round(2)
    out["fusion saves (ms)"] = (
        out["fusion saves (ms)"].astype(object).where(out["fusion saves (ms)"].notna(), "not run (no P2P)")
    )
    out["provenance"] = [f"measured: run {run}" for run in gains["run_id"]]  # the caption links the run's page
    return out.set_index(["path", "k"])


def _ms(value: float) -> str:
    return f"{value:.2f} ms"


def savings_over_runs(store: RunStore) -> pd.DataFrame:
    """Every synthetic-pass campaign run's savings, stacked: the run-to-run spread of each cell."""
    runs = [m.run_id for m in store.manifests() if all(t in m.tables for t in COMM_CAMPAIGN_TABLES)]
    frames = [fusion_vs_elimination_measured(store, r) for r in runs]
    return pd.concat([f for f in frames if not f.empty], ignore_index=True) if frames else pd.DataFrame()


def _span_ms(spread: pd.DataFrame, path: str, tokens: int, column: str, fallback: float) -> str:
    if spread.empty:
        return _ms(fallback)
    rows = spread[(spread["path"] == path) & (spread["tokens"] == tokens)][column].dropna()
    if len(rows) < 2:
        return _ms(fallback)
    low, high = rows.min(), rows.max()
    return _ms(low) if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} ms"


def comm_finding(gains: pd.DataFrame, tokens: int = 16, spread: pd.DataFrame | None = None) -> Prose:
    """The chapter's finding in one paragraph, every number formatted from ``gains`` (no typed numbers); the
    savings as ranges over the campaign runs where ``spread`` holds more than one."""
    if gains.empty:
        return Prose("No multi-GPU measurement of the verify pass is stored yet.")
    spread = spread if spread is not None else pd.DataFrame()
    rows = {r.path: r for r in gains[gains["tokens"] == tokens].itertuples()}
    parts = []
    if "nvlink" in rows:
        r = rows["nvlink"]
        fusion = _span_ms(spread, "nvlink", tokens, "fusion_saves_ms", r.fusion_saves_ms)
        one = _span_ms(spread, "nvlink", tokens, "removing_one_per_layer_saves_ms", r.removing_one_per_layer_saves_ms)
        parts.append(
            f"Over NVLink at k = {tokens}, all communication costs {_ms(r.communication_ms)} of a "
            f"{_ms(r.unfused_pass_ms)} pass; fusing every all-reduce with its norm saves {fusion}, removing one "
            f"all-reduce per layer saves {one} (ranges: the spread between the campaign's runs)."
        )
    slow = [rows[p] for p in ("shm", "socket") if p in rows]
    for r in slow:
        parts.append(
            f"Through {PATH_NAMES[r.path]}, communication costs {_ms(r.communication_ms)} of "
            f"{_ms(r.unfused_pass_ms)}, and removing one all-reduce per layer saves "
            f"{_span_ms(spread, r.path, tokens, 'removing_one_per_layer_saves_ms', r.removing_one_per_layer_saves_ms)}."
        )
    label = gains["label"].iloc[0]
    return Prose(" ".join(parts) + f" ({label}; run {gains['run_id'].iloc[0]}.)")


def fusion_vs_elimination_chart(gains: pd.DataFrame) -> Figure:
    """Grouped bars: ms saved per pass by fusion and by removing one or both all-reduces per layer."""
    long = gains.melt(
        id_vars=["path", "tokens"],
        value_vars=["fusion_saves_ms", "removing_one_per_layer_saves_ms", "removing_both_saves_ms"],
        var_name="option",
        value_name="saves_ms",
    ).dropna(subset=["saves_ms"])
    long["option"] = long["option"].map(
        {
            "fusion_saves_ms": "fuse all-reduce + norm",
            "removing_one_per_layer_saves_ms": "remove 1 all-reduce / layer",
            "removing_both_saves_ms": "remove both / layer",
        }
    )
    long["path"] = long["path"].map(PATH_NAMES)
    chart = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("option:N", title=None, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("saves_ms:Q", title="ms saved"),
            color=alt.Color("option:N", legend=None),
            column=alt.Column("tokens:O", title="tokens per verify (k)"),
            row=alt.Row(
                "path:N",
                title=None,
                header=alt.Header(labelAngle=0, labelOrient="top", labelAnchor="start", labelLimit=0),
            ),
            tooltip=["path", "tokens", "option", alt.Tooltip("saves_ms:Q", format=".2f")],
        )
        .properties(width=120, height=110)
    )
    return Figure(
        chart,
        "Fusion vs elimination, measured: ms saved per verify pass (synthetic Kimi-K2 TP-8 shard, 61 layers). "
        "Fusion needs P2P and runs on NVLink only. One ms scale for every panel.",
        [f"measured: {gains['label'].iloc[0]}, run {gains['run_id'].iloc[0]}"],
        name="fusion_vs_elimination_measured",
    )


def latency_curves_chart(latency: pd.DataFrame) -> Figure:
    """Per-call latency vs tokens per message, one line per implementation, one panel per path."""
    frame = latency[latency["settings"].str.contains("two-shot", na=False) == False].copy()  # noqa: E712
    frame["impl"] = frame["impl"].map(IMPL_NAMES).fillna(frame["impl"])
    frame["path"] = frame["path"].map(PATH_NAMES)
    chart = (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=tokens_axis(frame["tokens"], "tokens (x 7168 bf16)"),
            y=alt.Y("us:Q", scale=alt.Scale(type="log"), title="µs per call (median)"),
            color=alt.Color("impl:N", title="implementation", legend=alt.Legend(orient="bottom", columns=2)),
            column=alt.Column("path:N", title=None),
            tooltip=["path", "impl", "tokens", alt.Tooltip("us:Q", format=".2f"), "settings"],
        )
        .properties(width=170, height=180)
    )
    return Figure(
        chart,
        "Collective latency vs message size per NCCL path (forced two-shot rows left out)",
        [f"measured: {latency['label'].iloc[0]}, run {latency['run_id'].iloc[0]}"],
        name="collective_latency_measured",
    )


TRACE_COLUMNS = ["allreduce_count", "comm_us", "exposed_comm_us", "compute_us", "idle_us", "span_us"]


def passes_from_marker_pieces(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per profiled pass. A path whose trace carried a pass's step marker in pieces (run
    20261130-142600's socket trace: 366 markers, one per all-reduce, for the 3 passes every other path shows)
    has its consecutive pieces summed back into passes; ``markers_per_pass`` says how many were summed."""
    keys = ["path", "variant", "tokens"]
    counts = steps.groupby(keys)["step"].nunique()
    passes = int(counts.mode().min())  # the number of profiled passes most variants show
    parts = []
    for key, group in steps.groupby(keys):
        n = counts[key]
        pieces = n // passes if n > passes and n % passes == 0 else 1
        order = {step: i for i, step in enumerate(sorted(group["step"].unique()))}
        summed = (
            group.assign(pass_index=group["step"].map(order) // pieces)
            .groupby([*keys, "pass_index"], as_index=False)[TRACE_COLUMNS]
            .sum(min_count=1)
        )
        parts.append(summed.assign(markers_per_pass=pieces))
    return pd.concat(parts, ignore_index=True)


def measured_trace_breakdown(store: RunStore) -> pd.DataFrame:
    """Per path and profiled variant: all-reduces per pass and comm / exposed comm / compute / idle (µs),
    from the trace analyzer on the profiled passes (mean over passes and ranks; a pass marked in pieces summed
    first, its span then the sum of the pieces' spans, without the gaps between them)."""
    run_id = store.newest_with("verify_pass_trace")
    if run_id is None:
        return pd.DataFrame()
    passes = passes_from_marker_pieces(store.read_table(run_id, "verify_pass_trace"))
    out = passes.groupby(["path", "variant", "tokens"], as_index=False)[[*TRACE_COLUMNS, "markers_per_pass"]]
    out = out.mean().round(1).astype({"markers_per_pass": int})
    return _stamp(out, store, run_id).drop(columns="label").set_index(["path", "variant", "tokens"])


def marker_pieces_note(store: RunStore) -> Prose:
    """Which rows of the traced-pass table were summed from pieces, and what that leaves out, from the data."""
    run_id = store.newest_with("verify_pass_trace")
    if run_id is None:
        return Prose("")
    steps = store.read_table(run_id, "verify_pass_trace")
    passes = passes_from_marker_pieces(steps)
    pieced = passes[passes["markers_per_pass"] > 1].drop_duplicates(["path", "variant", "tokens"])
    if pieced.empty:
        return Prose("Every traced pass carried one step marker, as the profiler was asked to place it.")
    rows, one_each = [], True
    for row in pieced.itertuples():
        pieces = steps[(steps["path"] == row.path) & (steps["variant"] == row.variant)]
        count = passes[(passes["path"] == row.path) & (passes["variant"] == row.variant)]["pass_index"].nunique()
        one_each &= bool((pieces["allreduce_count"] == 1).all())
        rows.append(
            f"the {PATH_NAMES.get(row.path, row.path)} path's {row.variant} variant, {len(pieces)} markers for "
            f"{count} passes, {row.markers_per_pass} per pass"
        )
    return Prose(
        "In one trace the profiler cut each pass's step marker into pieces"
        + (", each holding one all-reduce" if one_each else "")
        + " ("
        + "; ".join(rows)
        + "). Those rows are the pieces summed back into passes, so their all-reduce count is the pass's and "
        "their span is the sum of the pieces' spans, leaving out the gaps between pieces. The raw traces were "
        f"not kept (run {run_id}), so why the marker was cut there is not established."
    )


def prediction_check(runs: MeasuredRuns) -> pd.DataFrame:
    """``model pass`` against the measured passes (modelled vs measured), one row per path, k and variant."""

    check = validate_against_run(stored_runs(runs))
    if check.empty:
        return check
    check = check.assign(path=check["path"].map(PATH_NAMES))
    rounded = check.round({"predicted_ms": 2, "measured_ms": 2, "error_pct": 1})
    return rounded.set_index(["path", "tokens", "variant"])


def prediction_table(check: pd.DataFrame) -> pd.DataFrame:
    """The check as the chapter shows it (its input run is named in the finding sentence)."""
    return check.drop(columns="inputs_run") if "inputs_run" in check else check


def prediction_finding(check: pd.DataFrame) -> Prose:
    """One sentence, formatted from the check's values."""
    if check.empty:
        return Prose("No measured pass is stored to check the prediction against.")
    worst = check["error_pct"].abs().max()
    return Prose(
        f"Predicted from each path's isolated latency curve and the measured pass without communication, the "
        f"{len(check)} measured passes are matched within {worst:.1f} %: a verify pass's all-reduces are "
        "fully exposed, and their cost is their count times the latency at the pass's message size "
        f"(inputs: run {check['inputs_run'].iloc[0]})."
    )
