"""Build the live TP-2 run's models as config files only (SGLang serves them with random weights through
``--load-format dummy``): a tiny Qwen3-MoE target (an architecture SGLang 0.5.17 fuses both all-reduces of every
layer of, but the last layer's MLP one) and a one-layer EAGLE-3 draft (``LlamaForCausalLMEagle3``) with
``draft_vocab_size`` = ``vocab_size``, sharing a byte-level BPE tokenizer trained on verifylab's prompts.
Mechanics only: the outputs are noise and the accept length of a random draft is low.

    python benchmarks/live_tp2/make_models.py --out .live/tp2/models

Needs transformers and tokenizers (for the tokenizer files), no torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "live_smoke"))
from make_tiny_model import build_tokenizer

VOCAB = 1024  # the tokenizer's size, divisible by the TP size


def target_config(hidden: int, layers: int, tokenizer) -> dict:
    """Qwen3-MoE shaped: 8 experts, top 2, heads hidden/128 wide (KV heads divisible by TP 2)."""
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "moe_intermediate_size": hidden // 2,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden // 128,
        "num_key_value_heads": max(2, hidden // 256),
        "head_dim": 128,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "output_router_logits": False,
        "router_aux_loss_coef": 0.001,
        "bos_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def aux_hidden_state_layer_ids(layers: int) -> list[int]:
    """Three distinct target layers whose outputs the EAGLE-3 draft reads. SGLang's default for Qwen3-MoE
    (inputs of layers 2, L // 2 and L - 3) repeats a layer when L = 6 and the draft's fc then gets 2 of its 3
    hidden states ("mat1 and mat2 shapes cannot be multiplied", seen on the box), so the draft names them."""
    ids = [0, layers // 2 - 1, layers - 2]
    if len(set(ids)) != 3:
        raise ValueError(f"--layers {layers}: an EAGLE-3 draft needs a target of at least 4 layers")
    return ids


def draft_config(hidden: int, target_layers: int, tokenizer) -> dict:
    """One Llama decoder layer reading three of the target's hidden states (EAGLE-3)."""
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "hidden_size": hidden,
        "target_hidden_size": hidden,
        "eagle_config": {
            "use_aux_hidden_state": True,
            "eagle_aux_hidden_state_layer_ids": aux_hidden_state_layer_ids(target_layers),
        },
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": 1,
        "num_attention_heads": hidden // 128,
        "num_key_value_heads": max(2, hidden // 256),
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "bos_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def write_model(folder: Path, config: dict, facts: dict, tokenizer_dir: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for item in tokenizer_dir.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    (folder / "verifylab_model.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder that receives target/ and draft/")
    parser.add_argument("--hidden", type=int, default=1024, help="hidden size, a multiple of 128 (default 1024)")
    parser.add_argument("--layers", type=int, default=6, help="target decoder layers (default 6)")
    args = parser.parse_args()
    if args.hidden % 128 or args.hidden < 1024:
        parser.error("--hidden must be a multiple of 128 and >= 1024")
    if args.layers < 4:
        parser.error("--layers must be >= 4: the EAGLE-3 draft reads three distinct target layers")
    tok_dir = args.out / "tokenizer"
    tokenizer = build_tokenizer(tok_dir, vocab_size=VOCAB)
    weights = "none on disk: served with --load-format dummy (random); outputs are noise, mechanics only"
    write_model(
        args.out / "target",
        target_config(args.hidden, args.layers, tokenizer),
        {"architecture": "Qwen3MoeForCausalLM", "layers": args.layers, "hidden_size": args.hidden, "weights": weights},
        tok_dir,
    )
    write_model(
        args.out / "draft",
        draft_config(args.hidden, args.layers, tokenizer),
        {"architecture": "LlamaForCausalLMEagle3", "layers": 1, "hidden_size": args.hidden, "weights": weights},
        tok_dir,
    )
    print(f"target and EAGLE-3 draft configs in {args.out}")


if __name__ == "__main__":
    main()
