"""A served model's costs from its Hugging Face ``config.json`` (dense or MoE, grouped-query or latent attention, its
``quantization_config`` read), bounded before any loop; the case study's Kimi-K2.5, and an EAGLE-3 draft's usual
shape."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifylab.errors import ModelInputError
from verifylab.model.inputs.model_costs import BF16, INT4_WITH_SCALES, ModelCosts
from verifylab.shapes import KIMI_K2, ModelShape


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: Kimi-K2.5 and other multimodal configs nest it under ``text_config``."""
    inner = raw.get("text_config")
    return {**raw, **inner} if isinstance(inner, dict) else raw


# What a served model's config may say before it is priced: far above any model served today, low enough that no
# loop over layers or experts (a config with 10^12 layers) can hang the model.
BOUNDS = {
    "hidden_size": 1 << 17,
    "num_hidden_layers": 4096,
    "num_attention_heads": 4096,
    "vocab_size": 1 << 24,
    "n_routed_experts / num_experts": 1 << 16,
}


def _within(where: str, name: str, value: float) -> None:
    """Refuse a config value above :data:`BOUNDS`, naming it and the bound."""
    if value > BOUNDS[name]:
        raise ModelInputError(f"{where}: {name} is {value:g}; verifylab prices at most {BOUNDS[name]} (is it a model?)")


def _number(cfg: dict[str, Any], name: str, where: str, default: float | None = None) -> float:
    """``cfg[name]`` as a finite number >= 0 (``default`` where absent or null); one line naming it otherwise."""
    value = cfg.get(name)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ModelInputError(f"{where}: '{name}' is {value!r}; a config.json needs it as a number >= 0")
    return float(value)


@dataclass(frozen=True)
class Quantization:
    """Bytes per weight of the routed experts and of the other linear layers, as a config's ``quantization_config``
    declares them (scales included: one per group of weights)."""

    expert_bytes: float
    dense_bytes: float
    words: str


def _per_weight(bits: float, group: float | None, scale_bytes: float = BF16) -> float:
    return bits / 8 + (scale_bytes / group if group else 0.0)


def quantization_of(cfg: dict[str, Any], where: str = "config") -> Quantization:
    """What ``quantization_config`` says (top level, or the language model's ``text_config``): compressed-tensors
    (bits and group of its weight groups; layers its ``ignore`` names stay bf16), AWQ and GPTQ (``bits``,
    ``group_size``), FP8, NVFP4 (ModelOpt: 4 bits, an FP8 scale per 16); bf16 where there is none."""
    q = cfg.get("quantization_config")
    inner = cfg.get("text_config")
    if q is None and isinstance(inner, dict):
        q = inner.get("quantization_config")
    if q is None:
        return Quantization(BF16, BF16, "bf16")
    if not isinstance(q, dict):
        raise ModelInputError(f"{where}: 'quantization_config' is {type(q).__name__}, not an object")
    method = str(q.get("quant_method", "")).lower()
    if method == "compressed-tensors":
        groups = [g for g in (q.get("config_groups") or {}).values() if isinstance(g, dict)]
        weights: list[dict[str, Any]] = [g["weights"] for g in groups if isinstance(g.get("weights"), dict)]
        if not weights:
            raise ModelInputError(f"{where}: compressed-tensors quantization_config has no weight group")
        w = weights[0]
        bits = _number(w, "num_bits", f"{where} quantization_config")
        group = w.get("group_size")
        group = float(group) if isinstance(group, int | float) and group > 0 else None
        per = _per_weight(bits, group)
        ignored = " ".join(str(i) for i in q.get("ignore") or [])
        dense = BF16 if "attn" in ignored else per
        label = f"compressed-tensors: {bits:g}-bit weights" + (f", group {group:g}" if group else "")
        return Quantization(per, dense, label + (" (attention, shared and dense layers bf16)" if dense == BF16 else ""))
    if method in ("awq", "gptq"):
        bits = _number(q, "bits", f"{where} quantization_config")
        group = q.get("group_size")
        group = float(group) if isinstance(group, int | float) and group > 0 else None
        per = _per_weight(bits, group)
        return Quantization(
            per, per, f"{method.upper()}: {bits:g}-bit weights" + (f", group {group:g}" if group else "")
        )
    if method == "fp8":
        return Quantization(1.0, 1.0, "FP8 weights")
    if method == "modelopt" and "fp4" in str(q.get("quant_algo", "")).lower():
        per = _per_weight(4, 16, 1.0)
        return Quantization(per, per, "NVFP4: 4-bit weights, an FP8 scale per 16")
    if method == "modelopt" and "fp8" in str(q.get("quant_algo", "")).lower():
        return Quantization(1.0, 1.0, "FP8 weights (ModelOpt)")
    raise ModelInputError(
        f"{where}: quantization method {method or '(none named)'!r} is not one verifylab prices (compressed-tensors, "
        "AWQ, GPTQ, FP8, NVFP4): give --expert-bits"
    )


def costs_from_config(cfg: dict[str, Any], where: str = "config", expert_bits: float | None = None) -> ModelCosts:
    """A model's costs from its config dict (``where`` names it in errors); the weights' bytes from its
    ``quantization_config`` unless ``expert_bits`` is given (the routed experts at that width, the rest bf16)."""
    c = _text_config(cfg)
    quant = quantization_of(cfg, where) if expert_bits is None else None
    hidden = int(_number(c, "hidden_size", where))
    layers = int(_number(c, "num_hidden_layers", where))
    heads = int(_number(c, "num_attention_heads", where))
    vocab = int(_number(c, "vocab_size", where))
    if hidden == 0 or layers == 0 or heads == 0:
        raise ModelInputError(f"{where}: hidden_size, num_hidden_layers and num_attention_heads must be > 0")
    for name, value in (("hidden_size", hidden), ("num_hidden_layers", layers), ("num_attention_heads", heads)):
        _within(where, name, value)
    _within(where, "vocab_size", vocab)
    if "kv_lora_rank" in c and c.get("kv_lora_rank"):  # multi-head latent attention (DeepSeek-V2/V3, Kimi)
        q_lora = _number(c, "q_lora_rank", where, 0) or 0
        kv_lora = _number(c, "kv_lora_rank", where)
        nope, rope, v = (_number(c, n, where) for n in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        q_in = q_lora if q_lora else hidden
        sharded = q_in * heads * (nope + rope) + kv_lora * heads * (nope + v) + heads * v * hidden
        replicated = (hidden * q_lora if q_lora else 0) + hidden * (kv_lora + rope)
        kv_bytes, kv_sharded = (kv_lora + rope) * BF16, False
    else:  # grouped-query attention
        head_dim = _number(c, "head_dim", where, hidden / heads) or hidden / heads
        kv_heads = _number(c, "num_key_value_heads", where, heads)
        sharded = hidden * head_dim * (2 * heads + 2 * kv_heads)
        replicated = 0.0
        kv_bytes, kv_sharded = 2 * kv_heads * head_dim * BF16, True
    experts = int(_number(c, "n_routed_experts", where, _number(c, "num_experts", where, 0)))
    _within(where, "n_routed_experts / num_experts", experts)
    per_token = int(_number(c, "num_experts_per_tok", where, 0)) if experts else 0
    if per_token > experts:
        raise ModelInputError(f"{where}: num_experts_per_tok {per_token} exceeds the {experts} experts")
    moe_inter = _number(c, "moe_intermediate_size", where, 0) if experts else 0.0
    dense_inter = _number(c, "intermediate_size", where, 0)
    if experts:
        first_dense = int(_number(c, "first_k_dense_replace", where, 0))
        mlp_only = c.get("mlp_only_layers") or []
        step = int(_number(c, "decoder_sparse_step", where, 1)) or 1
        moe_layers = sum(1 for i in range(layers) if i >= first_dense and i not in mlp_only and (i + 1) % step == 0)
        shared = _number(c, "n_shared_experts", where, 0) * 3 * hidden * moe_inter
        shared += 3 * hidden * _number(c, "shared_expert_intermediate_size", where, 0)
    else:
        moe_layers, shared = 0, 0.0
    if experts and (per_token == 0 or moe_inter == 0):
        raise ModelInputError(f"{where}: an MoE config needs num_experts_per_tok and moe_intermediate_size")
    return ModelCosts(
        name=str(c.get("_name_or_path") or (c.get("architectures") or ["model"])[0]),
        layers=layers,
        moe_layers=moe_layers,
        hidden=hidden,
        attention_sharded=sharded,
        attention_replicated=replicated,
        kv_bytes_per_token_layer=kv_bytes,
        kv_sharded=kv_sharded,
        experts=experts,
        experts_per_token=per_token,
        expert_weights=3 * hidden * moe_inter,
        shared_weights=shared,
        dense_mlp_weights=3 * hidden * dense_inter,
        router_weights=hidden * experts,
        vocab=vocab,
        expert_bytes_per_weight=quant.expert_bytes if quant else _bits_to_bytes(expert_bits or 16),
        dense_bytes_per_weight=quant.dense_bytes if quant else BF16,
        quantization=quant.words if quant else f"experts at {expert_bits:g} bits (given), the rest bf16",
    )


def _bits_to_bytes(bits: float) -> float:
    if bits == 4:
        return INT4_WITH_SCALES
    if bits in (8, 16):
        return bits / 8
    raise ModelInputError(f"expert weights of {bits:g} bits: give 4 (INT4 with group-32 scales), 8 or 16")


def read_config(path: Path, expert_bits: float | None = None) -> ModelCosts:
    """A model's costs from ``config.json`` (or the folder holding it); one line naming the file otherwise."""
    return read_config_and_json(path, expert_bits)[0]


def read_config_and_json(path: Path, expert_bits: float | None = None) -> tuple[ModelCosts, dict[str, Any]]:
    """A model's costs and its ``config.json`` object, the file read once."""
    file = path / "config.json" if path.is_dir() else path
    raw = read_config_json(path)
    return costs_from_config(raw, str(file), expert_bits), raw


def needs_remote_code(config: dict[str, Any]) -> bool:
    """Whether a config.json names remote code (``auto_map``, at its top or in its text config): SGLang loads such a
    model only with ``--trust-remote-code``."""
    return bool(config.get("auto_map")) or bool(_text_config(config).get("auto_map"))


def read_config_json(path: Path) -> dict[str, Any]:
    """``config.json`` (or the folder holding it) as its object; one line naming the file otherwise."""
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise ModelInputError(f"--config {path}: no config.json there (give the file or the model's folder)")
    if file.stat().st_size > 4_000_000:
        raise ModelInputError(f"--config {file}: {file.stat().st_size} bytes is no config.json")
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelInputError(f"--config {file}: not JSON ({str(exc)[:80]})") from None
    if not isinstance(raw, dict):
        raise ModelInputError(f"--config {file}: a config.json holds an object, this holds {type(raw).__name__}")
    return raw


# Kimi-K2.5's published quantization: INT4 routed experts in groups of 32, attention and shared layers left bf16
KIMI_INT4 = {
    "quant_method": "compressed-tensors",
    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "group_size": 32}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
}


def kimi_k25_costs(shape: ModelShape = KIMI_K2) -> ModelCosts:
    """The case study's model (Kimi-K2.5, K2's text shape in ``verifylab.shapes``) with INT4 routed experts."""
    return costs_from_config(
        {
            "_name_or_path": "Kimi-K2.5 (K2 shape, INT4 experts)",
            "hidden_size": shape.hidden,
            "num_hidden_layers": shape.layers,
            "first_k_dense_replace": shape.dense_layers,
            "num_attention_heads": shape.heads,
            "q_lora_rank": shape.q_lora_rank,
            "kv_lora_rank": shape.kv_lora_rank,
            "qk_nope_head_dim": shape.qk_nope_dim,
            "qk_rope_head_dim": shape.qk_rope_dim,
            "v_head_dim": shape.v_dim,
            "n_routed_experts": shape.experts,
            "num_experts_per_tok": shape.experts_per_token,
            "n_shared_experts": shape.shared_experts,
            "moe_intermediate_size": shape.expert_intermediate,
            "intermediate_size": shape.dense_intermediate,
            "vocab_size": shape.vocab,
            "quantization_config": KIMI_INT4,
        },
        "Kimi-K2.5",
    )


def eagle3_draft_for(target: ModelCosts, draft_vocab: int = 32000) -> ModelCosts:
    """An EAGLE-3 draft of the usual shape for ``target``: one Llama layer of the target's hidden size (heads of
    128, eight KV heads), an MLP 2.5 x hidden wide, a draft vocabulary of ``draft_vocab``."""
    heads = max(target.hidden // 128, 1)
    return costs_from_config(
        {
            "_name_or_path": f"EAGLE-3 draft for {target.name} (assumed shape)",
            "hidden_size": target.hidden,
            "num_hidden_layers": 1,
            "num_attention_heads": heads,
            "num_key_value_heads": min(8, heads),
            "head_dim": 128,
            "intermediate_size": int(2.5 * target.hidden),
            "vocab_size": draft_vocab,
        },
        "EAGLE-3 draft",
    )
