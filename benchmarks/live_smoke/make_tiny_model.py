"""Build the live smoke's model: a tiny Qwen3 (an architecture whose decoder layers go through SGLang's
LayerCommunicator, so its all-reduces are the ones fusion targets at TP > 1) with random weights, and a small
byte-level BPE tokenizer trained on verifylab's own prompt set. Mechanics only: its outputs are noise.

    python benchmarks/live_smoke/make_tiny_model.py --out .live/model/tiny-qwen3

Needs torch, transformers and tokenizers (prepare.sh makes a venv with them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def prompt_corpus() -> list[str]:
    """Every prompt verifylab ships: the text the tokenizer is trained on and the benchmark sends."""
    source = Path(__file__).resolve().parents[2] / "src" / "verifylab" / "data" / "prompts.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    return [item["text"] for items in data.values() for item in items]


def build_tokenizer(out: Path, vocab_size: int):
    """A byte-level BPE (any text round-trips) with Qwen-style special tokens and a minimal chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(prompt_corpus() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    fast.save_pretrained(out)
    return fast


def build_model(out: Path, layers: int, hidden: int, seed: int) -> dict:
    """Random bf16 Qwen3 weights, saved as safetensors with the config SGLang reads."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(out, vocab_size=1024)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=1024,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    facts = {
        "architecture": "Qwen3ForCausalLM",
        "layers": layers,
        "hidden_size": hidden,
        "parameters": params,
        "vocab_size": config.vocab_size,
        "weights": f"random (torch.manual_seed({seed})): outputs are noise; mechanics only",
    }
    (out / "verifylab_model.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (config, safetensors, tokenizer)")
    parser.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    parser.add_argument("--hidden", type=int, default=256, help="hidden size; heads are hidden/4 wide (default 256)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps(build_model(args.out, args.layers, args.hidden, args.seed), indent=2))


if __name__ == "__main__":
    main()
