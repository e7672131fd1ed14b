"""The inputs :class:`~verifylab.model.regimes.RegimeCurves` prices from, read from one Evidence: the measured curve
through host memory, the fused kernel's cost inside a pass, a probe of the reader's own box."""

from __future__ import annotations

from verifylab.model.regimes import BOX_WORLD, BoxProbe, RegimeCurves, SourceCurve, monotone
from verifylab.sources import COMM_CAMPAIGN_TABLES, MeasuredRuns, ModelSources
from verifylab.vocab import Regime


def host_memory_curve(runs: MeasuredRuns) -> tuple[SourceCurve | None, str | None]:
    """The newest measured NCCL curve through host memory: a probe in that regime, else the campaign's shm path."""
    for run_id in sorted(runs.runs_with_table("verdict"), reverse=True):
        verdict = runs.read_table(run_id, "verdict")
        if not verdict.empty and verdict["regime"].iloc[0] == Regime.HOST_MEMORY.value:
            lat = runs.read_table(run_id, "allreduce_latency")
            rows = lat[(lat["impl"] == "nccl") & (lat["mode"] == "graph") & (lat["group"] == "all")]
            rows = rows.dropna(subset=["us"]).sort_values("bytes")
            if not rows.empty:
                return SourceCurve(f"run {run_id}", tuple(rows["bytes"]), monotone(list(rows["us"]))), run_id
    return None, None


def in_pass_fused_factor(runs: MeasuredRuns) -> tuple[float, float, str]:
    """The fused kernel's cost inside a pass over its isolated latency, from the synthetic passes' traces (per
    all-reduce comm time at 122 all-reduces vs the same run's isolated curve): (low, high, source)."""
    ratios, sources = [], []
    for run_id in runs.runs_with_all((*COMM_CAMPAIGN_TABLES, "verify_pass_trace")):
        trace = runs.read_table(run_id, "verify_pass_trace")
        lat = runs.read_table(run_id, "allreduce_latency")
        fused = trace[(trace["variant"] == "fused") & (trace["allreduce_count"] > 0)]
        for (path, tokens), group in fused.groupby(["path", "tokens"]):
            per_call = float((group["comm_us"] / group["allreduce_count"]).median())
            iso = lat[(lat["path"] == path) & (lat["impl"] == "fused") & (lat["tokens"] == tokens)]
            iso = iso[~iso["settings"].astype(str).str.contains("forced", case=False)] if "settings" in iso else iso
            if not iso.empty:
                ratios.append(per_call / float(iso["us"].iloc[0]))
                sources.append(f"run {run_id}, {int(tokens)} tokens")
    if not ratios:
        return 1.0, 1.0, "no trace of a fused pass: isolated latency used"
    return min(1.0, min(ratios)), max(ratios), "; ".join(sources)


def box_probe(runs: MeasuredRuns) -> BoxProbe | None:
    """The newest stored probe (not mechanics only) at the case study's TP size, with its verdict's regime."""
    for run_id in sorted(runs.runs_with_table("verdict"), reverse=True):
        run = runs.run(run_id)
        verdict = runs.read_table(run_id, "verdict")
        whole = verdict[verdict["group"] == "all"] if "group" in verdict.columns else verdict
        if run.mechanics_only or whole.empty or int(whole["world"].iloc[0]) != BOX_WORLD:
            continue
        lat = runs.read_table(run_id, "allreduce_latency")
        rows = lat[(lat["mode"] == "graph") & (lat["group"] == "all")].dropna(subset=["us"])
        curves = {}
        for impl in ("nccl", "fused"):
            r = rows[rows["impl"] == impl].sort_values("bytes")
            if not r.empty:
                curves[impl] = SourceCurve(f"run {run_id}", tuple(r["bytes"]), monotone(list(r["us"])))
        if "nccl" in curves:
            return BoxProbe(run_id, run.label, Regime(whole["regime"].iloc[0]), curves["nccl"], curves.get("fused"))
    return None


def regime_curves(ev: ModelSources, reported: tuple[float, float, float] | None = None) -> RegimeCurves:
    """The curves of one Evidence (public table, measured runs) and the reported regime's range."""
    host, host_run = host_memory_curve(ev.measured)
    low, high, source = in_pass_fused_factor(ev.measured)
    curves = RegimeCurves(ev.public, host, host_run, reported, (low, high), box_probe(ev.measured))
    curves.notes["in_pass_fused"] = source
    return curves
