"""The communication probes in the store, for the reader: each run's verdict with its hardware, and the probe's
curves against the synthetic-pass campaign's curves measured on the same kind of machine. Runs nothing."""

from __future__ import annotations

import pandas as pd

from verifylab.report.section import Prose, md_text
from verifylab.store.runs import RunStore
from verifylab.vocab import COMM_CAMPAIGN_TABLES

CAMPAIGN_PATH = {"p2p": "nvlink", "shm": "shm", "net": "socket"}  # probe transport -> campaign path name


def probe_overview(store: RunStore) -> pd.DataFrame:
    """One row per stored probe and world size: hardware, NCCL's transport, the regime and its numbers."""
    rows = []
    for run_id in store.runs_with_table("verdict"):
        m = store.manifest(run_id)
        for v in store.read_table(run_id, "verdict").itertuples():
            rows.append(
                {
                    "run": run_id,
                    "hardware": m.label,
                    "ranks": int(v.world),
                    "group": v.group if hasattr(v, "group") else "all",
                    "nccl transport": v.transport,
                    "regime": v.regime,
                    "all-reduce, graph (µs)": v.allreduce_us,
                    "eager (µs)": v.allreduce_eager_us,
                    "at tokens": int(v.reference_tokens),
                    "try first": v.fix_hypothesis,
                    "reference band": v.band if isinstance(v.band, str) else "",
                    "provenance": "measured" if not m.mechanics_only else "measured (mechanics only)",
                }
            )
    return pd.DataFrame(rows)


def probe_finding(overview: pd.DataFrame) -> Prose:
    """What the stored probes found, regime first, each with its hardware."""
    if overview.empty:
        return Prose(
            "**No communication probe is stored yet.** Run `verifylab comm probe` on the box first: it names the "
            "regime every later chapter's recommendation depends on."
        )
    whole = overview[overview["group"] == "all"]
    parts = [
        f"{r['regime']} over NCCL's {r['nccl transport']} transport ({r['all-reduce, graph (µs)']:.1f} µs per "
        f"all-reduce of {r['at tokens']} tokens at {r['ranks']} ranks)"
        for r in whole.to_dict("records")
    ]
    machines = sorted({md_text(h.split(" — ")[0]) for h in whole["hardware"]})
    return Prose(
        f"**Each probe named the regime it was put in**: {'; '.join(parts)}. Measured on {', '.join(machines)}: "
        "these calibrate the probe and the host-memory curve, not a Blackwell box; run the probe on yours."
    )


def probe_agreement(store: RunStore) -> pd.DataFrame:
    """The probe's NCCL curve (graph, all ranks) against the campaign's on the same path, per size: the skew-free
    per-call cost, the slowest rank's median, and their ratio to the campaign's median."""
    campaign = store.newest_with(*COMM_CAMPAIGN_TABLES)
    if campaign is None:
        return pd.DataFrame()
    old = store.read_table(campaign, "allreduce_latency")
    rows = []
    for run_id in store.runs_with_table("verdict"):
        lat = store.read_table(run_id, "allreduce_latency")
        mine = lat[(lat["impl"] == "nccl") & (lat["mode"] == "graph") & (lat["group"] == "all")].dropna(subset=["us"])
        if mine.empty:
            continue
        path = CAMPAIGN_PATH.get(str(mine["path"].iloc[0]))
        theirs = old[(old["impl"] == "nccl") & (old["path"] == path)].set_index("tokens")["us"]
        for r in mine.itertuples():
            if r.tokens in theirs.index:
                rows.append(
                    {
                        "path": r.path,
                        "tokens": int(r.tokens),
                        "probe (µs)": r.us,
                        "slowest rank (µs)": r.us_slowest_rank,
                        "campaign (µs)": float(theirs[r.tokens]),
                        "probe / campaign": r.us / float(theirs[r.tokens]),
                        "runs": f"{run_id} vs {campaign}",
                    }
                )
    return pd.DataFrame(rows)


def agreement_finding(agreement: pd.DataFrame) -> Prose:
    """How far the probe's curves lie from the campaign's, per path."""
    if agreement.empty:
        return Prose("No probe and campaign curves on a common path to compare.")
    spread = agreement.groupby("path")["probe / campaign"].agg(["min", "max"])
    parts = [f"{p}: {r['min']:.2f}-{r['max']:.2f}x" for p, r in spread.iterrows()]
    return Prose(
        "The probe's per-call cost agrees with the synthetic-pass campaign's curves on the same machine kind "
        f"({'; '.join(parts)} of the campaign's median, every size); the slowest rank's median adds the ranks' "
        "arrival skew, which the probe reports apart."
    )
