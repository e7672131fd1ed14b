"""The case study as the model sees it: the cycle account, its inputs, the reconciliation and the what-if
options, each from one :class:`~verifylab.store.evidence.Evidence`."""

from __future__ import annotations

import pandas as pd

from verifylab.model.cycle import CycleAccount, cycle_account
from verifylab.model.options import measured_scaling, options_table
from verifylab.model.reconcile import reconcile
from verifylab.store.evidence import Evidence


def account(ev: Evidence) -> CycleAccount:
    """The cycle account of this evidence, built once."""
    return ev.derived("cycle_account", cycle_account)


def whatif_table(ev: Evidence, batch: int = 1, draft_tokens: int | None = None) -> pd.DataFrame:
    """Every option at ``batch`` streams: verify ms and tok/s, point and range (modelled)."""
    return options_table(ev, account(ev), batch, draft_tokens)


def reconcile_table(ev: Evidence) -> pd.DataFrame:
    """The reconciliation of the reported figures, every number from the cycle account."""
    return reconcile(ev, account(ev))


def inputs_table(ev: Evidence) -> pd.DataFrame:
    """Every input of the account and the what-ifs with its value and where it came from."""
    a = account(ev)
    scaling = measured_scaling(ev, a)
    rows = [
        ("verify pass", f"{a.verify_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduce time in it", f"{a.allreduce_ms:.0f} ms", "reported (seed 000)"),
        ("compute in it", f"{a.compute_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduces per pass", f"{a.allreduces}", "reported (seed 000)"),
        ("verify share of the cycle", f"{a.verify_share:.0%}", "reported (seed 000)"),
        (
            "accept length",
            a.text("accept"),
            f"reported {a.accept_reported:.1f} (seed 000); {a.readings[1].accept:.2f} if the verify share holds",
        ),
        ("EAGLE-3 before -> after", f"{a.before_tps:.1f} -> {a.after_tps:.1f} tok/s", "reported (seed 002)"),
        ("draft tokens per verify", f"{a.draft_tokens[0]}-{a.draft_tokens[1]}", "assumption (not reported)"),
        ("norm kernel per all-reduce", a.text("norm_us"), a.norm_source),
        ("compute vs tokens", "measured curve", scaling.sources["compute"]),
        ("communication vs tokens", "measured curve", scaling.sources["comm"]),
        ("PCIe link for other collectives", "alpha-beta", "modelled: alpha calibrated to the reported ring latency"),
    ]
    return pd.DataFrame(rows, columns=["input", "value", "source"])
