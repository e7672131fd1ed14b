"""The live TP-2 evidence as the chapters show it: a real SGLang server at TP 2 (``benchmarks/live_tp2``) —
which variant ran with what in effect, its single-stream speed and accept length, the all-reduce kernels of its
passes by implementation, and the simulated-PCIe round before and after the multicast-preflight gate.

Runs are found by the campaign their manifest names (``live-tp2``, ``pcie-sim-before``, ``pcie-sim-after``:
the ``campaign`` parameter of ``benchmarks/live_tp2``'s parameter files); for each variant the newest run in
which it was active is used, so a round that reran only some variants completes an earlier one. Every row
names its run.
"""

from __future__ import annotations

import pandas as pd

from verifylab.report.section import Prose
from verifylab.selection import newest_of_each_experiment
from verifylab.stats import median_interval
from verifylab.store.runs import RunStore

LIVE_TP2 = "live-tp2"
PCIE_SIM_ROUNDS = {"pcie-sim-before": "before", "pcie-sim-after": "after"}
VARIANT_ORDER = ["baseline", "fusion", "eagle3", "eagle3_fusion", "ngram"]
IMPL_NAMES = {
    "custom": "SGLang custom all-reduce",
    "flashinfer_fused": "FlashInfer fused all-reduce + add + RMSNorm",
    "nccl": "NCCL",
}
PHASE_NAMES = {"target": "target pass", "draft": "draft steps (one cycle)", "draft_extend": "draft extend"}


def variant_sources(store: RunStore, state_table: str) -> dict[str, str]:
    """Variant -> the newest live TP-2 run whose ``state_table`` (variant_state: chapter 02, profile_state:
    chapter 03) has it active."""
    found: dict[str, tuple[str, str]] = {}
    runs = newest_of_each_experiment(m for m in store.manifests() if m.campaign == LIVE_TP2)
    for run_id in (m.run_id for m in runs):
        state = store.table_or_none(run_id, state_table)
        if state is None:
            continue
        created = str(store.manifest(run_id).created)
        for variant in state.loc[state["active"].astype(str) == "True", "variant"].unique():
            if variant not in found or created > found[variant][0]:
                found[variant] = (created, run_id)
    order = {v: i for i, v in enumerate(VARIANT_ORDER)}
    return {v: found[v][1] for v in sorted(found, key=lambda v: order.get(v, len(order)))}


def _gather(store: RunStore, table: str, state_table: str) -> pd.DataFrame:
    frames = []
    for variant, run_id in variant_sources(store, state_table).items():
        frame = store.table_or_none(run_id, table)
        if frame is not None:
            frames.append(frame[frame["variant"] == variant].assign(run_id=run_id, provenance="measured"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def live_single_stream(store: RunStore) -> pd.DataFrame:
    """Single-stream output tok/s per variant: the median of the runs and the median's order-statistic interval
    with its true coverage, computed from the stored per-run rows (``single-<variant>``; 3 runs cover 75 %, not
    95 %), and the accept length."""

    frame = _gather(store, "single_stream", "variant_state")
    if frame.empty:
        return frame
    rows = []
    for row in frame.itertuples(index=False):
        runs = store.read_table(row.run_id, f"single-{row.variant}")
        tps = runs.loc[runs["ok"].astype(bool), "output_tokens_per_s"].tolist()
        interval = median_interval(tps)
        rows.append(
            {
                "variant": row.variant,
                "median_output_tokens_per_s": row.median_output_tokens_per_s,
                "interval_low": interval[0] if interval else None,
                "interval_high": interval[1] if interval else None,
                "interval_coverage": interval[2] if interval else None,
                "accept_length": row.accept_length,
                "runs": row.runs,
                "run_id": row.run_id,
                "provenance": "measured",
            }
        )
    return pd.DataFrame(rows).set_index("variant")  # unrounded: the table rounds once, where it is shown


def live_single_stream_finding(single: pd.DataFrame) -> Prose:
    """What the live single-stream rows show, formatted from them: the EAGLE-3 accept length of a random draft
    and what speculation did to tok/s there (mechanics: a random draft is never a speed-up)."""
    if single.empty:
        return Prose("No live TP-2 benchmark is stored yet.")
    by = single
    spec = by["accept_length"].dropna()
    if spec.empty or "baseline" not in by.index:
        return Prose("The stored live TP-2 rows hold no EAGLE-3 variant beside a baseline.")
    lo, hi = spec.min(), spec.max()
    accept = f"{lo:.2f}" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}-{hi:.2f}"
    base = by.loc["baseline", "median_output_tokens_per_s"]
    spec_tps = by.loc[spec.index, "median_output_tokens_per_s"]
    other_round = set(by.loc[spec.index, "run_id"]) != {by.loc["baseline", "run_id"]}
    return Prose(
        f"With a random draft EAGLE-3 accepted {accept} tokens per verify step (1 is the floor: the target's own "
        f"token), so speculation only added work: {spec_tps.min():.0f}-{spec_tps.max():.0f} tok/s against the "
        f"baseline's {base:.0f} (single stream, medians"
        + ("; the baseline from another round on the same kind of machine" if other_round else "")
        + "). Mechanics, not performance."
    )


def live_allreduce_kernels(store: RunStore) -> pd.DataFrame:
    """All-reduces per pass by variant, phase and implementation (target passes, draft steps, draft extend)."""
    frame = _gather(store, "allreduce_kernels", "profile_state")
    if frame.empty:
        return frame
    frame = frame[frame["phase"].isin(list(PHASE_NAMES))]
    out = frame.groupby(["variant", "phase", "impl", "run_id", "provenance"], as_index=False, sort=False)[
        "per_pass"
    ].sum()
    return out


def live_kernels_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernel counts as a chapter shows them: one row per variant and pass, one column per implementation."""
    if kernels.empty:
        return kernels
    wide = kernels.pivot_table(
        index=["variant", "phase", "run_id"], columns="impl", values="per_pass", aggfunc="sum", sort=False
    ).fillna(0)
    wide = wide.rename(columns=IMPL_NAMES).reset_index()
    order = {v: i for i, v in enumerate([*VARIANT_ORDER, *PHASE_NAMES])}
    wide = wide.sort_values(["variant", "phase"], key=lambda col: col.map(order))
    wide["phase"] = wide["phase"].map(PHASE_NAMES)
    impls = [c for c in wide.columns if c not in ("variant", "phase", "run_id")]
    return wide[["variant", "phase", *impls, "run_id"]].set_index(["variant", "phase"]).round(2)


def pcie_simulation(store: RunStore) -> pd.DataFrame:
    """The simulated-PCIe round: per phase (before / after the precondition gate) the fusion state SGLang logged,
    whether the variant counts as active, and the all-reduces per target pass by implementation."""
    rows = []
    for run_id in store.of_campaign(*PCIE_SIM_ROUNDS):  # sorted by id: the rounds in the order they ran
        state = store.table_or_none(run_id, "profile_state")
        kernels = store.table_or_none(run_id, "allreduce_kernels")
        if state is None or kernels is None:
            continue
        target = kernels[kernels["phase"] == "target"].groupby("impl")["per_pass"].sum()
        first = state.iloc[0]
        rows.append(
            {
                "round": PCIE_SIM_ROUNDS[store.manifest(run_id).campaign],
                "fusion_logged": first["fusion"],
                "active": str(first["active"]) == "True",
                **{IMPL_NAMES.get(k, k): float(v) for k, v in target.items()},
                "run_id": run_id,
                "provenance": "measured",
            }
        )
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows).fillna(0)
    impls = [c for c in frame.columns if c not in ("round", "fusion_logged", "active", "run_id", "provenance")]
    return frame[["round", "fusion_logged", "active", *impls, "run_id", "provenance"]].set_index("round")


def pcie_finding(sim: pd.DataFrame) -> Prose:
    """The simulated-PCIe round in one sentence, formatted from its table."""
    if sim.empty or not {"before", "after"} <= set(sim.index):
        return Prose("The simulated-PCIe round (`benchmarks/live_tp2/device_run.sh pcie`) has not been stored yet.")
    before, after = sim.loc["before"], sim.loc["after"]
    fused = IMPL_NAMES["flashinfer_fused"]
    return Prose(
        f"With the multicast queries answered as on a PCIe box, SGLang logged fusion **{before['fusion_logged']}**"
        f" and the fusion variant ran unfused ({before.get(fused, 0):.0f} fused all-reduces per target pass; run "
        f"`{before['run_id']}`). After `verifylab gates apply` opened the multicast-preflight precondition it logged "
        f"**{after['fusion_logged']}** and {after.get(fused, 0):.0f} of the pass's all-reduces ran fused "
        f"(run `{after['run_id']}`). 2 x H200, SM90, a simulated answer: inferred for a PCIe SM120 box, not run there."
    )


def live_kernels_finding(kernels: pd.DataFrame) -> Prose:
    """Fusion in the live target passes in one sentence: how many all-reduces the fused kernel took over, of how
    many, and that the count stayed (fusion, not elimination)."""
    if kernels.empty:
        return Prose("No live TP-2 profile is stored yet.")
    target = kernels[kernels["phase"] == "target"].pivot_table(
        index="variant", columns="impl", values="per_pass", aggfunc="sum"
    )
    if not {"baseline", "fusion"} <= set(target.index) or "flashinfer_fused" not in target:
        return Prose("The stored live TP-2 profiles do not hold both a baseline and a fused target pass.")
    total = target.sum(axis=1)
    fused = target["flashinfer_fused"].fillna(0)
    text = (
        f"Per target pass the baseline ran {total['baseline']:.0f} all-reduces; with fusion "
        f"{fused['fusion']:.0f} of {total['fusion']:.0f} ran as FlashInfer's fused kernel and the rest stayed on "
        "SGLang's custom all-reduce (the last layer's MLP all-reduce and the embedding's)"
    )
    if "eagle3_fusion" in target.index:
        text += (
            f"; under EAGLE-3 the verify pass fused {fused['eagle3_fusion']:.0f} of {total['eagle3_fusion']:.0f} the "
            "same way while the draft model's all-reduces stayed unfused"
        )
    return Prose(text + ". The count per pass does not change: fusion, not elimination.")
