"""The model's predictions for the engine-reads runs, written before they run (issue #72) and committed: what
verifylab's cost model says each measured quantity will be, from the configs of ``make_models.py``.

- ``predicted-context.csv``: per shape and mode, the attention time a stream's 1,000 tokens of context add to a
  plain step or a verify cycle (µs), at the H200's measured copy bandwidth: the model reads a stream's KV once per
  pass (``once_per_pass``, what it prices today); ``once_per_token`` is the alternative the public Kimi curves
  point to (a verify reads it once per verified token). A cycle adds its draft passes' KV reads (3 draft steps and
  one draft extend over the draft's 512 B a token).
- ``predicted-experts.csv``: distinct routed experts a pass reads per MoE layer: plain decoding at C streams, and a
  verify of C streams x 4 tokens at the routing overlaps the model holds (0: every token its own draw; 1: a chain's
  tokens share their experts; the range fitted on public curves of other models). Tokens sampled uniformly from the
  1,020 ordinary ids: with a random-weight router that routes by token identity, a repeated id is one draw.

    python benchmarks/engine_reads/predict.py   # writes both files beside this script
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_models import DRAFT_TOKENS_PER_CYCLE, configs, kv_bytes_per_token  # noqa: E402

from verifylab.model.fits.overlap import fitted_overlap  # noqa: E402
from verifylab.model.inputs.grids import measured_ceilings  # noqa: E402
from verifylab.model.inputs.model_costs import expected_distinct_experts, independent_draws  # noqa: E402
from verifylab.model.inputs.stored import stored_inputs  # noqa: E402
from verifylab.store.evidence import Evidence  # noqa: E402

ROOT = HERE.parents[1]
VOCAB_IDS = 1020
DRAFT_PASSES = 4  # 3 draft steps and one draft extend per cycle (EAGLE-3, 4 draft tokens, top-k 1)
EXPERT_PLAIN = (8, 32, 128, 512)
EXPERT_SPEC = (8, 32, 128)


def distinct_ids(draws: float) -> float:
    """Expected distinct token ids among ``draws`` uniform samples of the ordinary ids."""
    return VOCAB_IDS * (1.0 - (1.0 - 1.0 / VOCAB_IDS) ** draws)


def context_predictions(copy_gbs: float) -> pd.DataFrame:
    rows = []
    for shape in ("dense", "mla"):
        pair = configs()[shape]
        target, draft = kv_bytes_per_token(pair["target"]), kv_bytes_per_token(pair["draft"])
        per_1k_us = target * 1000 / (copy_gbs * 1e9) * 1e6
        draft_us = DRAFT_PASSES * draft * 1000 / (copy_gbs * 1e9) * 1e6
        for mode in ("plain", "eagle3"):
            spec = mode == "eagle3"
            rows.append(
                {
                    "shape": shape,
                    "mode": mode,
                    "kv_bytes_per_token": target,
                    "draft_kv_bytes_per_token": draft if spec else 0,
                    "copy_gbs": copy_gbs,
                    "once_per_pass_us_per_1k": per_1k_us + (draft_us if spec else 0.0),
                    "once_per_token_us_per_1k": per_1k_us * (DRAFT_TOKENS_PER_CYCLE if spec else 1)
                    + (draft_us if spec else 0.0),
                    "model_prices": "once_per_pass",
                }
            )
    return pd.DataFrame(rows)


def expert_predictions(fitted: tuple[float, float] | None) -> pd.DataFrame:
    moe = configs()["moe"]["target"]
    experts, per_token = moe["num_experts"], moe["num_experts_per_tok"]
    rows = []
    for streams in EXPERT_PLAIN:
        rows.append(
            {
                "mode": "plain",
                "streams": streams,
                "tokens": streams,
                "overlap": None,
                "distinct_experts": expected_distinct_experts(distinct_ids(streams), experts, per_token),
            }
        )
    overlaps = {"independent (0)": 0.0, "shared (1)": 1.0}
    if fitted is not None:
        overlaps |= {"fitted low": fitted[0], "fitted high": fitted[1]}
    for streams in EXPERT_SPEC:
        tokens = streams * DRAFT_TOKENS_PER_CYCLE
        for label, overlap in overlaps.items():
            draws = independent_draws(tokens, streams, overlap)
            rows.append(
                {
                    "mode": "eagle3 verify",
                    "streams": streams,
                    "tokens": tokens,
                    "overlap": label,
                    "overlap_value": overlap,
                    "distinct_experts": expected_distinct_experts(distinct_ids(draws), experts, per_token),
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    ev = Evidence(ROOT / "data")
    ceilings = measured_ceilings(ev.measured, "h200")
    if ceilings is None:
        raise SystemExit("no measured H200 copy bandwidth in data/runs: the prediction needs it")
    fit = fitted_overlap(stored_inputs(ev))
    context = context_predictions(ceilings.copy_gbs)
    context["bandwidth_source"] = ceilings.source
    context.to_csv(HERE / "predicted-context.csv", index=False, float_format="%.4g")
    experts = expert_predictions((fit.span.low, fit.span.high) if fit else None)
    experts.to_csv(HERE / "predicted-experts.csv", index=False, float_format="%.4g")
    print(context.to_string(index=False))
    print(experts.to_string(index=False))


if __name__ == "__main__":
    main()
