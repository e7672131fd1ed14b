"""Config files (no weights) for the speculation-under-load experiment: a target of Qwen3-30B-A3B's shape (48 layers,
hidden 2048, 128 experts with 8 active, expert width 768, 32 query / 4 KV heads) and a one-layer EAGLE-3 draft of
the same hidden size, sharing the byte-level BPE of the live runs (vocabulary 1024, where Qwen3's is 151936: the
cost model prices the LM head from the config it is given). SGLang serves both with random weights
(``--load-format dummy --speculative-draft-load-format dummy``); random routers spread tokens over the experts
nearly uniformly, which a trained router does not quite do.

    python benchmarks/speculation/make_models.py --out .live/spec/models [--layers 48]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "live_tp2"))
from make_models import VOCAB, build_tokenizer, draft_config, target_config, write_model

QWEN3_30B_A3B = {  # from Qwen/Qwen3-30B-A3B's config.json (public): every field that sets a cost
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 40960,
}
DRAFT = {
    "intermediate_size": 6144,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 40960,  # the target's: SGLang refuses a draft with a shorter context
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder that receives target/ and draft/")
    parser.add_argument("--layers", type=int, default=48, help="target decoder layers (Qwen3-30B-A3B: 48)")
    args = parser.parse_args()
    tok_dir = args.out / "tokenizer"
    tokenizer = build_tokenizer(tok_dir, vocab_size=VOCAB)
    hidden = QWEN3_30B_A3B["hidden_size"]
    target = target_config(hidden, args.layers, tokenizer) | QWEN3_30B_A3B
    draft = draft_config(hidden, args.layers, tokenizer) | DRAFT
    weights = "none on disk: served with --load-format dummy (random weights); a shape, not a trained model"
    write_model(
        args.out / "target",
        target,
        {"architecture": "Qwen3MoeForCausalLM", "shape_of": "Qwen3-30B-A3B", "layers": args.layers, "weights": weights},
        tok_dir,
    )
    write_model(
        args.out / "draft",
        draft,
        {"architecture": "LlamaForCausalLMEagle3", "layers": 1, "hidden_size": hidden, "weights": weights},
        tok_dir,
    )
    print(f"Qwen3-30B-A3B-shaped target ({args.layers} layers) and EAGLE-3 draft configs in {args.out}")


if __name__ == "__main__":
    main()
