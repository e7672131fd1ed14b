"""Tables for chapter 03: the verify-pass breakdown, reported next to measured, each row with provenance."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.errors import ParameterError
from verifylab.reference import load_reported_figures, reported_value
from verifylab.runs import RunStore

COMPUTE_PARTS = {"gemm_moe_us": "GEMM / MoE", "attention_us": "attention", "norm_us": "norm"}


def reported_breakdown(figures: pd.DataFrame) -> pd.DataFrame:
    """The case study's verify pass: ~25 ms of all-reduces, ~5 ms of compute (reported)."""
    source = "case study: 8x RTX PRO 6000, TP 8, verify (reported)"
    return pd.DataFrame(
        [
            {
                "source": source,
                "part": "all-reduce (NCCL)",
                "ms": reported_value(figures, "verify_allreduce_ms"),
                "provenance": "reported",
            },
            {
                "source": source,
                "part": "compute",
                "ms": reported_value(figures, "verify_compute_ms"),
                "provenance": "reported",
            },
        ]
    )


def measured_breakdown(store: RunStore, gpu_only: bool = True) -> pd.DataFrame:
    """Mean per-step parts of every stored run with a ``trace_steps`` table of synthetic verify passes
    (measured). CPU runs are mechanics only (their times are not comparable) and are left out unless
    ``gpu_only`` is False; live server profiles (CUDA-graph phases) have their own sections."""
    rows = []
    for run_id in store.runs_with_table("trace_steps"):
        manifest = store.manifest(run_id)
        if gpu_only and manifest.gpu_count == 0:
            continue
        steps = store.read_table(run_id, "trace_steps")
        steps = steps[steps["phase"] == "verify_step"]
        if steps.empty:
            continue
        group_col = "norm" if "norm" in steps.columns else "backend"
        for variant, part in steps.groupby(group_col):
            mean = part.mean(numeric_only=True)
            source = f"{manifest.label} · {variant} · run {run_id}"
            if mean.get("allreduce_count", 0) > 0:
                rows.append({"source": source, "part": "all-reduce", "ms": mean["comm_us"] / 1e3})
            named = sum(mean.get(col, 0.0) for col in COMPUTE_PARTS)
            if mean.get("kernel_count", 0) > 0:
                for col, name in COMPUTE_PARTS.items():
                    rows.append({"source": source, "part": name, "ms": mean.get(col, 0.0) / 1e3})
                rows.append(
                    {"source": source, "part": "other kernels", "ms": max(mean["compute_us"] - named, 0.0) / 1e3}
                )
                rows.append({"source": source, "part": "idle (gaps)", "ms": mean["idle_us"] / 1e3})
            else:
                rows.append({"source": source, "part": "compute", "ms": mean["compute_us"] / 1e3})
    frame = pd.DataFrame(rows, columns=["source", "part", "ms"])
    frame["provenance"] = "measured"
    return frame[frame["ms"] > 0]


def allreduce_counts(store: RunStore) -> pd.DataFrame:
    """All-reduces per step and rank found in each stored trace summary."""
    rows = []
    for run_id in store.runs_with_table("trace_steps"):
        steps = store.read_table(run_id, "trace_steps")
        label = store.manifest(run_id).label
        for rank, part in steps.groupby("rank"):
            rows.append(
                {
                    "run_id": run_id,
                    "label": label,
                    "rank": rank,
                    "steps": len(part),
                    "allreduces_per_step": ", ".join(str(int(c)) for c in sorted(set(part["allreduce_count"]))),
                    "implementations": ", ".join(sorted(set(part["allreduce_impls"].dropna().astype(str)) - {""}))
                    or "none",
                    "provenance": "measured",
                }
            )
    return pd.DataFrame(rows)


def chapter3_tables(data_dir: Path | str) -> dict[str, pd.DataFrame]:
    """Everything chapter 03 shows in replay mode."""
    data_dir = Path(data_dir)
    store = RunStore(data_dir / "runs")
    figures = load_reported_figures(data_dir)
    reported = figures[
        figures.figure_id.isin(
            [
                "allreduces_per_verify",
                "verify_allreduce_ms",
                "verify_total_ms",
                "verify_compute_ms",
                "verify_cycle_share_pct",
            ]
        )
    ]
    return {
        "reported": reported[["figure_id", "quantity", "value", "unit", "seed_file", "quote", "provenance"]],
        "breakdown": pd.concat([reported_breakdown(figures), measured_breakdown(store)], ignore_index=True),
        "counts": allreduce_counts(store),
    }


def verify_allreduce_bytes(model_path: str | None, draft_tokens: int) -> int:
    """Bytes of one all-reduce of a verify pass of one request: ``draft_tokens`` hidden states of the served
    model (``hidden_size`` of its config.json), of Kimi-K2 when no local model is named (replay mode)."""
    import json

    from verifylab.vocab import KIMI_K2_HIDDEN, allreduce_message_bytes

    hidden = KIMI_K2_HIDDEN
    config = Path(model_path) / "config.json" if model_path else None
    if config is not None and config.is_file():
        doc = json.loads(config.read_text(encoding="utf-8"))
        hidden = int(doc.get("hidden_size") or doc.get("text_config", {}).get("hidden_size") or KIMI_K2_HIDDEN)
    return int(allreduce_message_bytes(draft_tokens, hidden))


def live_profile(params):
    """Chapter 03's live capture from its validated parameters (``chapter_params.VerifyBreakdown``)."""
    return live_profile_section(
        params.mode,
        params.server_url,
        params.profile_steps,
        params.data_dir,
        params.run_id,
        params.label,
        message_bytes=verify_allreduce_bytes(params.model_path, params.draft_tokens),
        serve_variant=params.serve_variant,
        server=params.server_settings(),
        profile_variants=params.profile_variants,
        mechanics_only=params.mechanics_only,
    )


def live_profile_section(
    mode: str,
    server_url: str,
    profile_steps: int,
    data_dir: Path | str,
    run_id: str | None,
    label: str,
    message_bytes: int | None = None,
    serve_variant: str | None = None,
    server: dict | None = None,
    profile_variants: list[str] | None = None,
    mechanics_only: bool = False,
):
    """Chapter 03 live: profile a server, summarize the per-rank traces, store them as a run.

    With ``profile_variants`` (or one ``serve_variant``) the chapter starts each variant itself (``server`` holds
    the launch settings, as chapter 02 takes them), profiles it and stops it; otherwise it profiles the server
    already at ``server_url``. Every table carries the variant it came from."""
    from verifylab.report.section import Section
    from verifylab.runs import new_run_id

    section = Section("Live profile of the box's server")
    if mode != "live":
        return section.add(
            "Replay mode: no live capture. In live mode this chapter profiles the server at "
            "server_url (or starts each of profile_variants itself) and stores the summary as a measured run.",
            "",
        )
    from verifylab.serve import DEFAULT_VARIANTS, BaseConfig

    variants = list(profile_variants or ([serve_variant] if serve_variant else []))
    unknown = [v for v in variants if v not in DEFAULT_VARIANTS]
    if unknown:  # before anything is written
        given = f"profile_variants {unknown}" if profile_variants else f"serve_variant {serve_variant!r}"
        raise ParameterError(f"{given}: choose from {', '.join(DEFAULT_VARIANTS)}")
    base = BaseConfig(**(server or {})) if variants else None
    store = RunStore(Path(data_dir) / "runs")
    run_id = run_id or new_run_id("live-profile")
    store.open_or_create(
        run_id,
        label,
        {"server_url": server_url, "profile_steps": profile_steps, "profile_variants": variants},
        "profile of a live SGLang server",
        mechanics_only=mechanics_only,
    )
    if base is None:
        return _profile_into(section, store, run_id, server_url, profile_steps, message_bytes, "live")
    return _profile_variants(section, store, run_id, base, variants, profile_steps, message_bytes)


PROFILE_TABLES = ("trace_steps", "trace_kernels", "allreduce_kernels", "profile_state")


def _profile_variants(section, store: RunStore, run_id: str, base, variants, steps: int, message_bytes):
    """Start, profile and stop each variant in turn; a variant that fails to start is recorded and skipped."""
    from verifylab.errors import ServerError
    from verifylab.serve import DEFAULT_VARIANTS, serve

    log_dir = store.path(run_id) / "logs" / "profile"  # chapter 02 logs the same variant names one level up
    gathered: dict[str, list[pd.DataFrame]] = {name: [] for name in PROFILE_TABLES}
    for name in variants:
        state_row = {"variant": name}
        try:
            with serve(base, DEFAULT_VARIANTS[name], log_dir) as (running, state):
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
    from verifylab.trace.capture import capture_profile

    traces = capture_profile(url, store.path(run_id) / "profile" / variant, steps)
    return summarize_variant(traces, variant, message_bytes)


def summarize_variant(traces: list[Path], variant: str, message_bytes: int | None) -> dict:
    """The profile tables of one variant's per-rank traces, each with a variant column (and the notes)."""
    from verifylab.trace import summarize_traces
    from verifylab.trace.analyze import allreduce_kernels_per_pass

    summary = summarize_traces(traces, message_bytes=message_bytes)
    return {
        "trace_steps": summary.steps.assign(norm=variant).assign(variant=variant),
        "trace_kernels": summary.kernels.assign(variant=variant),
        "allreduce_kernels": allreduce_kernels_per_pass(summary).assign(variant=variant),
        "per_step": summary.per_step(),
        "notes": summary.notes,
    }


def resummarize_profiles(store: RunStore, run_id: str, message_bytes: int | None = None) -> list[str]:
    """Summarize a run's stored per-variant traces (``profile/<variant>/``) again, e.g. after the kernel
    classification learned a name, and rewrite its profile tables. Returns the variants found."""
    folder = store.path(run_id) / "profile"
    variants = sorted(d.name for d in folder.iterdir() if d.is_dir() and any(d.glob("*.trace.json*")))
    if not variants:
        raise ParameterError(f"run {run_id} holds no per-variant traces under {folder}")
    gathered: dict[str, list[pd.DataFrame]] = {t: [] for t in ("trace_steps", "trace_kernels", "allreduce_kernels")}
    for variant in variants:
        tables = summarize_variant(sorted((folder / variant).glob("*.trace.json*")), variant, message_bytes)
        for table in gathered:
            gathered[table].append(tables[table])
    for table, frames in gathered.items():
        store.write_table(run_id, table, pd.concat(frames, ignore_index=True), fmt="csv")
    return variants


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
