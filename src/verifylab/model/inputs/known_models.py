"""Models the public speculation curves ran, as the pricer sees them: each one's published config (the fields that set
its costs; facts, with where they were read) and the draft its curve used."""

from __future__ import annotations

from collections.abc import Callable

from verifylab.errors import ReferenceDataError
from verifylab.model.inputs.configs import costs_from_config, eagle3_draft_for, kimi_k25_costs
from verifylab.model.inputs.model_costs import ModelCosts

QWEN3_30B_A3B = {  # Qwen/Qwen3-30B-A3B config.json (huggingface.co/Qwen/Qwen3-30B-A3B)
    "_name_or_path": "Qwen3-30B-A3B",
    "architectures": ["Qwen3MoeForCausalLM"],
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "vocab_size": 151936,
}


QWEN35_397B_NVFP4 = {  # Qwen3.5-397B-A17B's text config (huggingface.co/Qwen/Qwen3.5-397B-A17B) at NVFP4; its 45
    # linear-attention layers are priced as attention layers of the same heads (the experts set the bytes)
    "_name_or_path": "Qwen3.5-397B-A17B NVFP4",
    "architectures": ["Qwen3_5MoeForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 60,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "moe_intermediate_size": 1024,
    "shared_expert_intermediate_size": 1024,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "vocab_size": 248320,
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
}


CONFIGS: dict[str, Callable[[], ModelCosts]] = {
    "qwen3-30b-a3b": lambda: costs_from_config(QWEN3_30B_A3B, "Qwen3-30B-A3B"),
    "qwen3.5-397b-a17b-nvfp4": lambda: costs_from_config(QWEN35_397B_NVFP4, "Qwen3.5-397B-A17B"),
    "kimi-k2.5": kimi_k25_costs,
}


_RAW = {"qwen3-30b-a3b": QWEN3_30B_A3B, "qwen3.5-397b-a17b-nvfp4": QWEN35_397B_NVFP4}


def known_model(key: str) -> ModelCosts:
    """The costs of a model the public curves name (``qwen3-30b-a3b``, ``qwen3.5-397b-a17b-nvfp4``, ``kimi-k2.5``)."""
    if key not in CONFIGS:
        raise ReferenceDataError(f"config '{key}': not a known model ({', '.join(CONFIGS)})")
    return CONFIGS[key]()


def draft_for(key: str, drafter: str) -> ModelCosts:
    """The draft of a curve: EAGLE-3's usual one-layer head, or a multi-token-prediction head priced as one layer
    of the target itself (attention and the routed experts)."""
    target = known_model(key)
    if drafter == "eagle3":
        return eagle3_draft_for(target)
    if key not in _RAW:
        raise ReferenceDataError(f"config '{key}': no multi-token-prediction head is priced for it")
    return costs_from_config({**_RAW[key], "num_hidden_layers": 1}, f"{target.name} MTP head")
