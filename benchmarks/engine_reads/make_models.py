"""Config files (no weights: SGLang serves them with ``--load-format dummy``) for the engine-reads runs:

- ``dense``: four Llama-3-8B-shaped layers (hidden 4096, 32 query / 8 KV heads of 128: 16 KiB of KV a token);
- ``mla``: twelve DeepSeek-V2-Lite-shaped MLA layers (hidden 2048, 16 heads, KV latent 512 + rope 64: 13.5 KiB of
  KV a token), every MLP dense (``first_k_dense_replace`` = layers), so no MoE kernel is built;
- ``moe``: eight Qwen3-30B-A3B-shaped layers (128 experts, top 8) for counting experts;

each with a one-layer EAGLE-3 draft whose attention reads 512 B of KV a token (4 query heads, 1 KV head of 128),
so the draft's share of a cycle's KV reads is small and named (``draft_kv_bytes_per_token`` in each facts file).
Context 131072 for all. The few layers keep attention's share of a pass large; the heads, not the depth, set how
a kernel reads a token's KV.

    python benchmarks/engine_reads/make_models.py --out /tmp/reads/models      # needs transformers + tokenizers
    python benchmarks/engine_reads/make_models.py --print                      # the configs as JSON, nothing else
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CONTEXT = 131072
VOCAB = 1024  # the byte-level BPE of the live runs
DRAFT_TOKENS_PER_CYCLE = 4  # the verified chain: 3 draft steps and the token before them
BF16 = 2

DENSE = {  # Llama-3-8B's attention and MLP widths (public config.json), four layers
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "rope_theta": 500000.0,
}
MLA = {  # DeepSeek-V2-Lite's attention (public config.json), twelve layers, all MLPs dense
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 12,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 12,
    "moe_layer_freq": 1,
    "n_group": 1,
    "topk_group": 1,
    "topk_method": "greedy",
    "scoring_func": "softmax",
    "norm_topk_prob": False,
    "routed_scaling_factor": 1.0,
    "aux_loss_alpha": 0.001,
    "seq_aux": True,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
}
MOE = {  # Qwen3-30B-A3B's widths (public config.json), eight layers
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 8,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": True,
    "rope_theta": 1000000.0,
    "attention_bias": False,
}
COMMON = {
    "vocab_size": VOCAB,
    "max_position_embeddings": CONTEXT,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# The same MLA layers, 36 deep (issue #83): a deep target's cycle, where the host's launches hide less of attention
MLA36 = {**MLA, "num_hidden_layers": 36, "first_k_dense_replace": 36}
TARGETS = {"dense": DENSE, "mla": MLA, "moe": MOE, "mla36": MLA36}


def kv_bytes_per_token(config: dict) -> int:
    """KV one token of context holds over all layers, bf16 (MLA: the latent and the rope key; GQA: K and V)."""
    if "kv_lora_rank" in config:
        per_layer = (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * BF16
    else:
        per_layer = 2 * config["num_key_value_heads"] * config["head_dim"] * BF16
    return per_layer * config["num_hidden_layers"]


def draft_config(target: dict) -> dict:
    """A one-layer EAGLE-3 draft of the target's hidden size with a small attention (4 query heads, 1 KV head)."""
    layers = target["num_hidden_layers"]
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "draft_vocab_size": VOCAB,
        "hidden_size": target["hidden_size"],
        "target_hidden_size": target["hidden_size"],
        "eagle_config": {
            "use_aux_hidden_state": True,
            "eagle_aux_hidden_state_layer_ids": [0, layers // 2 - 1, layers - 2],
        },
        "intermediate_size": 2 * target["hidden_size"],
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
        "rope_theta": 1000000.0,
        **COMMON,
    }


def configs() -> dict[str, dict[str, dict]]:
    """Each target's config and its draft's, by name."""
    return {name: {"target": {**COMMON, **shape}, "draft": draft_config(shape)} for name, shape in TARGETS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder that receives <name>/target and <name>/draft")
    parser.add_argument("--print", action="store_true", help="print the configs as JSON and write nothing")
    args = parser.parse_args()
    if args.print:
        print(json.dumps(configs(), indent=2))
        return
    if args.out is None:
        parser.error("give --out FOLDER (or --print)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "live_smoke"))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "live_tp2"))
    from make_models import write_model
    from make_tiny_model import build_tokenizer

    tok_dir = args.out / "tokenizer"
    tokenizer = build_tokenizer(tok_dir, vocab_size=VOCAB)
    ids = {
        "bos_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    weights = "none on disk: served with --load-format dummy (random weights); a shape, not a trained model"
    for name, pair in configs().items():
        for role, config in pair.items():
            facts = {
                "architecture": config["architectures"][0],
                "weights": weights,
                "kv_bytes_per_token": kv_bytes_per_token(config),
            }
            write_model(args.out / name / role, config | ids, facts, tok_dir)
    print(f"dense, mla and moe targets with EAGLE-3 drafts in {args.out}")


if __name__ == "__main__":
    main()
