"""The tables chapter 4 shows of the options: each option's verify pass per regime at C streams (ranges over the
draft tokens and the inputs' spread), the memory each layout leaves for KV, and the floors per layout and tokens."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.model.case.option_prices import OptionBoxes, OptionPass, option_pass
from verifylab.model.case.options import CONTEXT_TOKENS, GIB, GPUS, MEM_FRACTIONS, OPTIONS, Option, OptionFacts
from verifylab.model.inputs.gpus import RTX_PRO_6000_BLACKWELL_GBS, RTX_PRO_6000_MEMORY_BYTES
from verifylab.model.inputs.model_costs import Layout
from verifylab.model.pricing.collectives import RegimeCurves
from verifylab.model.pricing.floors import kv_bytes_per_token, pass_bytes, pass_floor_ms, weights_per_gpu_bytes
from verifylab.model.pricing.regimes import REGIME_TITLE, Collective, Price
from verifylab.span import Span
from verifylab.vocab import KIMI_K2_HIDDEN, Regime


def options_table(boxes: OptionBoxes, streams: int = 1) -> pd.DataFrame:
    """One row per option and regime at ``streams`` streams: floor, compute, communication, host and verify ms,
    and one stream's tok/s plain and with EAGLE-3, as ranges over the draft-token range and every input's ends
    (modelled by the pricer, :mod:`verifylab.model.option_prices`)."""
    account = boxes.inputs.account
    rows = []
    for regime in boxes.curves.regimes():
        for option, facts in OPTIONS.items():
            passes = [option_pass(boxes, option, regime, streams, k) for k in account.draft_tokens]
            rows.append(_row(option, facts, regime, streams, passes))
    return pd.DataFrame(rows)


def _span_of(spans: list[Span]) -> Span:
    return Span(min(s.low for s in spans), max(s.high for s in spans))


def _row(option: Option, facts: OptionFacts, regime: Regime, streams: int, passes: list[OptionPass]) -> dict:
    verify = [p.verify for p in passes]
    priced = all(v is not None for v in verify)
    row = {
        "option": facts.title,
        "key": option.value,
        "kind": facts.kind,
        "regime": REGIME_TITLE[regime],
        "regime_key": regime.value,
        "streams": streams,
        "tokens_low": min(p.k for p in passes) * streams,
        "tokens_high": max(p.k for p in passes) * streams,
        "allreduces_per_pass": passes[0].allreduces,
        "collectives_per_pass": passes[0].collectives,
        "floor_ms_low": min(p.floor_ms for p in passes),
        "floor_ms_high": max(p.floor_ms for p in passes),
        "eagle3_in_sglang": facts.eagle3,
        "flags": facts.flags,
        "what": facts.what,
        "comm_basis": passes[-1].basis,
        "not_priced": passes[0].not_priced,
        "provenance": "modelled",
    }
    columns = ("compute_ms", "comm_ms", "host_ms", "verify_ms", "tokens_per_s", "plain_tokens_per_s")
    if priced:
        spans = {
            "compute_ms": _span_of([p.compute for p in passes]),
            "comm_ms": _span_of([p.comm for p in passes if p.comm is not None]),
            "host_ms": _span_of([p.host for p in passes]),
            "verify_ms": _span_of([v for v in verify if v is not None]),
            "tokens_per_s": _span_of([p.eagle3_per_stream for p in passes if p.eagle3_per_stream is not None]),
            "plain_tokens_per_s": _span_of([p.plain_per_stream for p in passes if p.plain_per_stream is not None]),
        }
        for name in columns:
            row |= {f"{name}_low": spans[name].low, f"{name}_high": spans[name].high}
    else:
        row |= dict.fromkeys([f"{name}_{end}" for name in columns for end in ("low", "high")], math.nan)
    return row


def memory_table(contexts: tuple[int, ...] = (2048, 8192)) -> pd.DataFrame:
    """Weights per GPU (replicated parts once per GPU, INT4 experts with scales) and the KV room left, in GiB, and
    how many requests of each context the box holds: TP keeps every request's latent KV on every GPU, DP
    attention a request's KV on its own GPU."""
    rows = []
    card = RTX_PRO_6000_MEMORY_BYTES
    per_token = kv_bytes_per_token()
    layouts = [
        ("TP 8 (NCCL or fusion), EP 8 with TP attention", Layout.TP, 1, 1),
        ("TP 4 x PP 2", Layout.TP, 2, 1),
        ("DP attention + EP 8", Layout.EP_DP_ATTENTION, 1, GPUS),
    ]
    for title, layout, stages, kv_spread in layouts:
        weights = weights_per_gpu_bytes(layout, GPUS if stages == 1 else 4, stages)
        for fraction in MEM_FRACTIONS:
            room = fraction * card - weights
            row = {
                "layout": title,
                "weights_gib_per_gpu": weights / GIB,
                "mem_fraction": fraction,
                "kv_room_gib_per_gpu": room / GIB,
                "fits": room > 0,
            }
            for context in contexts:
                tokens_per_gpu = max(room, 0) / (per_token / stages)  # a PP stage holds half the layers' KV
                row[f"requests_at_{context}"] = math.floor(tokens_per_gpu * kv_spread / context)
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame["provenance"] = "modelled"
    return frame


def floors_table(tokens: tuple[int, ...] = (1, 4, 8, 32, 64, 128, 256)) -> pd.DataFrame:
    """Bytes the busiest GPU reads per pass and the time at peak bandwidth, per layout and tokens."""
    rows = []
    for t in tokens:
        for title, layout in (("TP 8", Layout.TP), ("EP 8, TP attention", Layout.EP_TP_ATTENTION)):
            b = pass_bytes(t, layout, GPUS, context=CONTEXT_TOKENS, streams_on_busiest=max(1, t // 4))
            rows.append(
                {
                    "tokens": t,
                    "layout": title,
                    "attention_gb": b.attention / 1e9,
                    "experts_gb": b.experts / 1e9,
                    "other_gb": (b.shared_and_dense + b.head) / 1e9,
                    "kv_gb": b.kv / 1e9,
                    "floor_ms": pass_floor_ms(t, layout, GPUS, CONTEXT_TOKENS, max(1, t // 4)),
                    "bandwidth_gbs": RTX_PRO_6000_BLACKWELL_GBS,
                    "provenance": "modelled",
                }
            )
    return pd.DataFrame(rows)


def plain_decoding(boxes: OptionBoxes, regime: Regime, streams: int) -> Span | None:
    """Plain decoding (TP 8, NCCL) at ``streams`` as the options are priced: one stream's tok/s; None where it is
    not priced."""
    k = boxes.inputs.account.draft_tokens[0]  # plain decoding's step does not depend on the chain
    return option_pass(boxes, Option.TP8_NCCL, regime, streams, k).plain_per_stream


def regime_curves_table(
    curves: RegimeCurves, tokens: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
) -> pd.DataFrame:
    """Every priced (regime, collective) at 8 ranks over the verify pass's token counts: low, high, basis."""
    rows = []
    for regime in curves.regimes():
        for collective in (Collective.NCCL, Collective.FUSED, Collective.PCIE_IPC):
            for t in tokens:
                price = curves.price(regime, collective, 8, t * KIMI_K2_HIDDEN * 2)
                if isinstance(price, Price):
                    rows.append(
                        {
                            "regime": REGIME_TITLE[regime],
                            "collective": str(collective),
                            "tokens": t,
                            "low_us": price.low_us,
                            "high_us": price.high_us,
                            "mid_us": (price.low_us + price.high_us) / 2,
                            "basis": price.basis,
                            "provenance": "modelled",
                        }
                    )
    return pd.DataFrame(rows)


def components_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Verify time by component, long format (for the stacked chart): one row per ``<component>_ms`` column that
    is above 0 (``all-reduce_ms`` -> ``all-reduce``)."""
    parts = frame.melt(
        id_vars=["name", "kind"],
        value_vars=[c for c in frame.columns if c.endswith("_ms")],
        var_name="component",
        value_name="ms",
    )
    parts["component"] = parts["component"].str.removesuffix("_ms")
    return parts[parts["ms"] > 0]
