"""Chapter 03, the verify pass broken down: what the case study reports, what the traces measured (2 x H200,
synthetic and live), and ``live``: profile a server on the box, or start and profile each variant in turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pandas as pd

from verifylab.analysis import comm_campaign, live_tp2, profiles
from verifylab.analysis.live_smoke import live_smoke_profile
from verifylab.chapters._base import live_section, nothing_stored, shown_as_table
from verifylab.chapters.params import VerifyBreakdown as Params
from verifylab.errors import ServerError
from verifylab.model.views import fused_in_pass_fit, live_fusion_check, live_fusion_finding, stored_runs
from verifylab.report.charts import Figure, step_breakdown_chart
from verifylab.report.section import Prose, Section
from verifylab.server.launch import launcher_help, serve
from verifylab.server.profile import capture_profile
from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig
from verifylab.store.evidence import Evidence
from verifylab.store.manifest import new_run_id
from verifylab.store.runs import RunStore
from verifylab.trace.profile_tables import PROFILE_TABLES, summarize_variant
from verifylab.vocab import KIMI_K2_HIDDEN, allreduce_message_bytes

__all__ = ["Params", "live_smoke_profile"]  # shown as the analysis builds it


def _tables(ev: Evidence) -> dict[str, pd.DataFrame]:
    return profiles.chapter3_tables(ev)


def deployer_finding(ev: Evidence) -> Prose:
    """Finding: what a deployer takes from the breakdown (reported split, measured exposure), formatted from them."""
    f = ev.figures.set_index("figure_id")
    count, comm, total = (
        f.loc[k, "value"] for k in ("allreduces_per_verify", "verify_allreduce_ms", "verify_total_ms")
    )
    seed = f.loc["allreduces_per_verify", "seed_file"].split("_")[0]
    traced = comm_campaign.measured_trace_breakdown(ev.runs)
    nccl = traced.xs("nccl", level="variant") if not traced.empty else traced
    reported = (
        f"For a deployer: the case study reports {count:.0f} all-reduces per verify pass taking {comm:.0f} ms of "
        f"its {total:.0f} ms (reported, seed {seed}), so the pass is its communication."
    )
    if nccl.empty:
        return Prose(reported + " No traced pass with communication is stored to say how much of it is exposed.")
    exposed = (nccl["exposed_comm_us"] / nccl["comm_us"] * 100).min()
    return Prose(
        f"{reported} Traced on {len(nccl)} NCCL paths of 2 x H200 (SM90, the mechanism; the traced-pass table "
        f"below), at least {exposed:.0f} % of the all-reduces' time has no compute under it: what a pass costs "
        "is its all-reduce count times the per-call latency at the pass's message size, which chapter 1's probe "
        "measures on a reader's box and chapter 4 prices per communication regime. The live TP-2 traces below "
        "show which kernels SGLang runs for those all-reduces (mechanics: a tiny model)."
    )


@shown_as_table
def reported_table(ev: Evidence) -> pd.DataFrame:
    """Table: the verify-pass figures the case study reports."""
    return _tables(ev)["reported"]


def breakdown_figure(ev: Evidence) -> Figure:
    """Figure: all-reduce vs compute per pass, reported next to measured."""
    return step_breakdown_chart(_tables(ev)["breakdown"])


@shown_as_table
def breakdown_table(ev: Evidence) -> pd.DataFrame:
    """Table: the same parts in milliseconds, one row per source."""
    parts = _tables(ev)["breakdown"]
    return parts.pivot_table(index="source", columns="part", values="ms", aggfunc="sum").round(3)


@shown_as_table
def allreduce_counts(ev: Evidence) -> pd.DataFrame:
    """Table: all-reduces per pass and their implementations, per measured trace."""
    return _tables(ev)["counts"]


@shown_as_table
def measured_trace_breakdown(ev: Evidence) -> pd.DataFrame:
    """Table: the synthetic verify pass on 2 x H200, traced, per variant."""
    return comm_campaign.measured_trace_breakdown(ev.runs)


def marker_pieces_note(ev: Evidence) -> Prose:
    """Prose: which traced passes were summed from pieces of their step marker."""
    return comm_campaign.marker_pieces_note(ev.runs)


def latency_figure(ev: Evidence) -> Figure | Prose:
    """Figure: all-reduce latency vs message size, measured in isolation."""
    latency = comm_campaign.allreduce_latency_measured(ev.runs)
    if latency.empty:
        what = "an all-reduce latency curve (table allreduce_latency)"
        return nothing_stored(ev, what, "`verifylab probe` or the communication campaign measures one")
    return comm_campaign.latency_curves_chart(latency)


def live_kernels_finding(ev: Evidence) -> Prose:
    """Finding: which all-reduce kernels the live TP-2 passes ran."""
    return live_tp2.live_kernels_finding(live_tp2.live_allreduce_kernels(ev.runs))


@shown_as_table
def live_kernels_table(ev: Evidence) -> pd.DataFrame:
    """Table: all-reduce kernels per target pass, by variant and kernel family."""
    return live_tp2.live_kernels_table(live_tp2.live_allreduce_kernels(ev.runs))


def live(params: Params, ev: Evidence) -> Section | None:
    """Live mode: profile the server at ``server_url``, or start, profile and stop each of ``profile_variants``
    (or ``serve_variant``) with chapter 02's launch settings; store the summaries as a measured run."""
    return live_section(params, lambda: _profile(params, ev))


def _profile(params: Params, ev: Evidence) -> Section:
    section = Section("Live profile of the box's server")
    variants = list(params.profile_variants or ([params.serve_variant] if params.serve_variant else []))
    message_bytes = verify_allreduce_bytes(params.model_path, params.draft_tokens)
    store = ev.runs
    run_id = params.run_id or new_run_id("live-profile")
    created = not store.exists(run_id)  # a run this call makes is closed by it: complete, or failed
    store.open_or_create(
        run_id,
        params.label,
        {"server_url": params.server_url, "profile_steps": params.profile_steps, "profile_variants": variants},
        "profile of a live SGLang server",
        status="partial",
        mechanics_only=params.mechanics_only,
        campaign=params.campaign,
    )
    status: Literal["complete", "failed"] = "failed"
    try:
        with store.measuring(run_id):
            if not variants:
                shown = _profile_into(
                    section, store, run_id, params.server_url, params.profile_steps, message_bytes, "live"
                )
            else:
                base = BaseConfig(**params.server_settings())
                shown = _profile_variants(section, store, run_id, base, variants, params.profile_steps, message_bytes)
        status = "complete"
        return shown
    finally:
        if created:
            store.set_status(run_id, status)


def verify_allreduce_bytes(model_path: str | None, draft_tokens: int) -> int:
    """Bytes of one all-reduce of a verify pass of one request: ``draft_tokens`` hidden states of the served
    model (``hidden_size`` of its config.json), of Kimi-K2 when no local model is named (replay mode)."""
    hidden = KIMI_K2_HIDDEN
    config = Path(model_path) / "config.json" if model_path else None
    if config is not None and config.is_file():
        doc = json.loads(config.read_text(encoding="utf-8"))
        hidden = int(doc.get("hidden_size") or doc.get("text_config", {}).get("hidden_size") or KIMI_K2_HIDDEN)
    return int(allreduce_message_bytes(draft_tokens, hidden))


def _profile_variants(section, store: RunStore, run_id: str, base, variants, steps: int, message_bytes):
    """Start, profile and stop each variant in turn; a variant that fails to start is recorded and skipped."""
    log_dir = store.path(run_id) / "logs" / "profile"  # chapter 02 logs the same variant names one level up
    gathered: dict[str, list[pd.DataFrame]] = {name: [] for name in PROFILE_TABLES}
    help_text: str | None = None  # the launcher's --help, read once for every variant (SGLang's takes seconds)
    for name in variants:
        state_row = {"variant": name}
        try:
            help_text = help_text if help_text is not None else launcher_help(base.launcher)
            with serve(base, DEFAULT_VARIANTS[name], log_dir, help_text=help_text) as (running, state):
                state_row |= state.as_row()
                section.add(
                    f"Started {name} for the capture: fusion {state.fusion}, speculative "
                    f"{state.speculative_algorithm or 'off'}, TP {state.tp_size}"
                    + (f"; not active: {'; '.join(state.inactive_reasons)}" if state.inactive_reasons else ""),
                    "",
                )
                tables = _capture(store, run_id, running.url, steps, message_bytes, name)
                for table in ("trace_steps", "trace_kernels", "allreduce_kernels"):
                    gathered[table].append(tables[table])
                section.add(f"{name}: all-reduce kernels per pass, by phase", tables["allreduce_kernels"])
        except ServerError as exc:
            state_row |= {"active": False, "failure": str(exc)}
            section.add(f"{name}: did not start: {exc}", "")
        gathered["profile_state"].append(pd.DataFrame([state_row]))
        for table, frames in gathered.items():  # after every variant: nothing measured is lost
            if frames:
                store.write_table(run_id, table, pd.concat(frames, ignore_index=True), fmt="csv")
    return section


def _capture(store: RunStore, run_id: str, url: str, steps: int, message_bytes, variant: str):
    """Capture and summarize one profile of the server at ``url``; the tables, each with a variant column."""
    traces = capture_profile(url, store.path(run_id) / "profile" / variant, steps)
    return summarize_variant(traces, variant, message_bytes)


def _profile_into(section, store, run_id, url, steps, message_bytes, variant):
    """Capture, summarize and store one profile of the server at ``url``; add what it found to ``section``."""
    tables = _capture(store, run_id, url, steps, message_bytes, variant)
    for table in ("trace_steps", "trace_kernels", "allreduce_kernels"):
        store.write_table(run_id, table, tables[table], fmt="csv")
    steps_frame = tables["trace_steps"]
    section.add(f"Stored in run {run_id}; notes: " + " | ".join(tables["notes"]), tables["per_step"])
    section.add(
        "Fused kernels present? (all-reduce implementations per step)",
        steps_frame[["rank", "step", "phase", "allreduce_count", "allreduce_impls", "nccl_name_suffixes"]],
    )
    section.add(
        "The kernels by total time, named as SGLang, FlashInfer and Triton emit them", tables["trace_kernels"].head(15)
    )
    return section


@shown_as_table
def live_fusion_table(ev: Evidence) -> pd.DataFrame:
    """Table: fusion's saving on the live TP-2 passes beside the pass model's (fitted in-pass factor, and a fit
    without the run), and what it would be with NCCL as the unfused path."""
    check = live_fusion_check(stored_runs(ev.measured))
    if check.empty:
        return check
    ranges = [
        f"{low:.1f} to {high:.1f}"
        for low, high in zip(check["predicted_as_run_low_us"], check["predicted_as_run_high_us"], strict=True)
    ]
    return pd.DataFrame(
        {
            "run": check["run"],
            "fused all-reduces": check["fused_of_allreduces"],
            "measured saving (µs per pass)": check["measured_saving_us"].round(1),
            "model, as SGLang ran (µs)": check["predicted_as_run_us"].round(1),
            "error (%)": check["error_pct"].round(0),
            "model's range (µs)": ranges,
            "fit without this run (µs)": check["predicted_left_out_us"].round(1),
            "in pass / isolated: implied, fitted": [
                f"{a:.2f}, {b:.2f}"
                for a, b in zip(check["fused_in_pass_over_isolated"], check["fitted_factor"], strict=True)
            ],
            "if NCCL were unfused (µs)": check["predicted_nccl_unfused_us"].round(1),
            "provenance": check["provenance"],
        }
    )


def live_fusion_finding_text(ev: Evidence) -> Prose:
    """What the live TP-2 check shows, in one paragraph formatted from its rows."""
    runs = stored_runs(ev.measured)
    return Prose(live_fusion_finding(live_fusion_check(runs), fused_in_pass_fit(runs)))
