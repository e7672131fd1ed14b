"""A served model's weights are priced at the width its config declares (``quantization_config``), and `box` says
what cannot fit and every answer in whole sentences."""

from __future__ import annotations

import pytest

from verifylab.errors import ModelInputError
from verifylab.model.answers.words import crossover_words, stop_range_words
from verifylab.model.inputs.configs import costs_from_config, quantization_of
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.model_costs import BF16, INT4_WITH_SCALES
from verifylab.model.pricing.boxes import layout_fits

KIMI_TEXT = {
    "hidden_size": 7168, "num_hidden_layers": 61, "first_k_dense_replace": 1, "num_attention_heads": 64,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 384, "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "intermediate_size": 18432, "vocab_size": 163840,
}  # fmt: skip
COMPRESSED_INT4 = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32, "type": "int"}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
}


def test_a_compressed_tensors_int4_config_prices_its_experts_at_four_bits():
    """Kimi-K2.5's layout: INT4 group-32 experts, attention and shared layers left bf16; nested under text_config
    too, as the multimodal config has it."""
    flat = costs_from_config({**KIMI_TEXT, "quantization_config": COMPRESSED_INT4})
    nested = costs_from_config({"text_config": {**KIMI_TEXT, "quantization_config": COMPRESSED_INT4}})
    for model in (flat, nested):
        assert model.expert_bytes_per_weight == pytest.approx(INT4_WITH_SCALES)
        assert model.dense_bytes_per_weight == BF16 and "4-bit" in model.quantization
    bf16 = costs_from_config(KIMI_TEXT)
    assert flat.weights_bytes(8) < bf16.weights_bytes(8) / 3  # the experts are most of the weights


@pytest.mark.parametrize(
    ("config", "expert", "dense"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 0.5 + 2 / 128, 0.5 + 2 / 128),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, 1 + 2 / 128, 1 + 2 / 128),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, 1.0, 1.0),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 0.5 + 1 / 16, 0.5 + 1 / 16),
    ],
)
def test_each_quantization_method_gives_its_bytes_per_weight(config, expert, dense):
    q = quantization_of({"quantization_config": config})
    assert (q.expert_bytes, q.dense_bytes) == pytest.approx((expert, dense))


def test_an_unknown_method_is_refused_and_expert_bits_override_the_config():
    with pytest.raises(ModelInputError, match="--expert-bits"):
        costs_from_config({**KIMI_TEXT, "quantization_config": {"quant_method": "bitsandbytes"}})
    given = costs_from_config({**KIMI_TEXT, "quantization_config": {"quant_method": "bitsandbytes"}}, expert_bits=4)
    assert given.expert_bytes_per_weight == pytest.approx(INT4_WITH_SCALES) and "given" in given.quantization


def test_a_layout_that_does_not_fit_is_refused_naming_the_gigabytes():
    kimi = costs_from_config({**KIMI_TEXT, "quantization_config": COMPRESSED_INT4})
    with pytest.raises(ModelInputError, match=r"needs \d+ GB of weights per GPU; a h200 holds 141 GB"):
        layout_fits(kimi, gpu_named("h200"), 2)
    layout_fits(kimi, gpu_named("h200"), 8)  # about 70 GB a GPU: fits


@pytest.mark.parametrize(
    ("crossover", "phrase"),
    [
        ((None, None), "pays up to 128 streams"),
        ((1.0, 1.0), "never pays"),
        ((12.2, 12.4), "stops paying at about 12 streams"),
        ((4.5, 30.0), "stops paying between 4.5 and 30 streams"),
        ((4.5, None), "stops paying somewhere from 4.5 streams to beyond 128"),
    ],
)
def test_every_speculation_answer_is_one_verb_phrase(crossover, phrase):
    words = crossover_words(crossover)
    assert words == phrase
    sentence = f"EAGLE-3 {words}"
    assert "paying pays" not in sentence and "it between" not in sentence


@pytest.mark.parametrize(
    ("crossover", "phrase"),
    [
        ((1.0, 1.0), "never pays"),
        ((1.0, 32.0), "pessimistically never pays, optimistically stops paying at 32.0 streams"),
        ((6.0, None), "pessimistically stops paying at 6.0 streams, optimistically still pays at 20 streams"),
        ((None, None), "still pays at 20 streams"),
    ],
)
def test_model_speculations_stop_range_never_reads_never_to_never(crossover, phrase):
    """`model speculation` said 'it stops paying at never to never streams' where the transfer lost from one stream."""
    words = stop_range_words(crossover, 1, 20)
    assert words == phrase
    assert "at never" not in words and "at beyond" not in words
