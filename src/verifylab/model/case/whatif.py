"""The case study's options as chapter 4 and `verifylab model whatif` show them: every option in every regime at a
stream count, the same at several loads, the reader's own box in place of the stored probe, and every input named."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from verifylab.derived import derived
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.option_prices import OptionBoxes, option_boxes
from verifylab.model.case.option_tables import options_table
from verifylab.model.case.options import CONTEXT_TOKENS, ModelInputs
from verifylab.model.case.reconcile import reconcile
from verifylab.model.case.speculation import decode_rate, inputs
from verifylab.model.inputs.curves import BoxProbe
from verifylab.model.inputs.gpus import RTX_PRO_6000_BLACKWELL_GBS
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.floors import INT4_BYTES_PER_WEIGHT, QUANTIZATION_SOURCE
from verifylab.span import Span
from verifylab.vocab import allreduce_message_bytes


@derived
def case_option_boxes(stored: StoredInputs) -> OptionBoxes:
    """The boxes every option of the case study is priced on, calibrated to its reported plain decode rate."""
    return option_boxes(stored, inputs(stored), *decode_rate(stored))


@derived
def whatif_table(stored: StoredInputs, batch: int = 1) -> pd.DataFrame:
    """Every option in every regime at ``batch`` streams: verify ms and tok/s as ranges (modelled)."""
    return options_table(case_option_boxes(stored), batch)


def options_at_loads(stored: StoredInputs, loads: tuple[int, ...]) -> pd.DataFrame:
    """Every option in every regime at each of ``loads`` streams — verify ms and one stream's tok/s as ranges,
    the floor under them, and whether SGLang runs the option with EAGLE-3 (modelled)."""
    rows = []
    for streams in loads:
        for r in whatif_table(stored, streams).itertuples():
            priced = not pd.isna(r.verify_ms_low)
            rows.append(
                {
                    "regime": r.regime,
                    "option": r.option,
                    "streams": streams,
                    "verify (ms)": Span(r.verify_ms_low, r.verify_ms_high).text(1) if priced else "—",
                    "tok/s per stream": Span(r.tokens_per_s_low, r.tokens_per_s_high).text(0) if priced else "—",
                    "floor (ms)": Span(r.floor_ms_low, r.floor_ms_high).text(1),
                    "all-reduces": r.allreduces_per_pass,
                    "with EAGLE-3 in SGLang": r.eagle3_in_sglang.split(":")[0].split(" (")[0],
                    "not priced because": r.not_priced,
                }
            )
    return pd.DataFrame(rows)


def inputs_for_box(stored: StoredInputs, box: BoxProbe) -> ModelInputs:
    """This evidence's inputs with ``box`` as the reader's own box (its curve prices the row 'this box'), in
    place of the newest stored 8-GPU probe."""
    base = inputs(stored)
    curves = replace(base.curves, box=box)
    return replace(base, curves=curves)


def reconcile_table(stored: StoredInputs) -> pd.DataFrame:
    """The reconciliation of the reported figures, every number from the cycle account."""
    return reconcile(stored, cycle_account(stored), inputs(stored))


def inputs_table(stored: StoredInputs) -> pd.DataFrame:
    """Every input of the account and the options with its value and where it came from."""
    a, m = cycle_account(stored), inputs(stored)
    low, high, _ = m.curves.reported_allreduce or (0.0, 0.0, 0.0)
    bw_low, bw_high = m.curves.bus_bandwidth_gbs
    fused_low, fused_high = m.curves.in_pass_fused.range_at(allreduce_message_bytes(1))
    rows = [
        ("verify pass", f"{a.verify_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduce time in it / compute", f"{a.allreduce_ms:.0f} ms / {a.compute_ms:.0f} ms", "reported (seed 000)"),
        ("all-reduces per pass", f"{a.allreduces}", "reported (seed 000)"),
        ("accept length, drafter rate", f"{a.accept_reported:.1f} at {a.drafter_tps:.0f} tok/s", "reported (seed 000)"),
        ("draft phase per cycle", a.text("draft_ms"), "modelled: the 60 tok/s cycle less the 30 ms verify pass"),
        ("EAGLE-3 before the jump", a.text("before_tps"), "reported (seeds 001 and 002)"),
        ("draft tokens per verify", f"{a.draft_tokens[0]}-{a.draft_tokens[1]}", "assumption (not reported)"),
        ("norm kernel per all-reduce", a.text("norm_us"), a.norm_source),
        ("peak memory bandwidth", f"{RTX_PRO_6000_BLACKWELL_GBS:.0f} GB/s", "reported: NVIDIA datasheet"),
        ("expert weights", f"{INT4_BYTES_PER_WEIGHT:.4f} bytes per weight", f"assumption: {QUANTIZATION_SOURCE}"),
        ("KV context per stream", f"{CONTEXT_TOKENS} tokens", "assumption (stated)"),
        (
            "one all-reduce as reported",
            f"{low:.0f}-{high:.0f} µs",
            "modelled: the reported pass less the pricer's bytes, arithmetic and host overhead",
        ),
        ("NCCL bus bandwidth, 8 ranks", f"{bw_low:.1f}-{bw_high:.1f} GB/s", "reported (public)"),
        ("one GPU's P2P link", f"{m.curves.link_gbs:.0f} GB/s", "reported (public)"),
        (
            "fused kernel inside a pass",
            f"{fused_low:.2f}-{fused_high:.2f} x isolated at one token's message",
            f"modelled: {m.curves.in_pass_fused.source()}",
        ),
        ("host-memory curve", f"run {m.curves.host_run}", "measured (2 x H200, NCCL_P2P_DISABLE=1): the low end"),
        (
            "host-memory bandwidth on SM120",
            f"{m.curves.sm120_host_gbs:g} GB/s",
            "reported (public, 2 x RTX 5070 Ti, NCCL SHM): the high end",
        ),
    ]
    return pd.DataFrame(rows, columns=["input", "value", "source"])
