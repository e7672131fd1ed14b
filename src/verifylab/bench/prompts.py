"""The shipped prompt set, by category (``verifylab/data/prompts.yaml``)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from verifylab.errors import BenchmarkError
from verifylab.strict_yaml import StrictYAMLError, load_strict_yaml


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str
    input_ids: tuple[int, ...] = ()  # sent as token ids instead of the text (a prompt of an exact length)


SYNTHETIC_IDS = (1000, 31000)  # token ids every served tokenizer has (vocabularies of 32k and more), none special
PREFIX_TOKENS = 16  # the first tokens of a synthetic prompt: its own, so no two share a cached prefix


def context_prompts(count: int, tokens: int, seed: int = 0) -> list[Prompt]:
    """``count`` prompts of exactly ``tokens`` token ids each, every one with a prefix of its own (distinct sessions:
    no prefix cache is shared between them), drawn from :data:`SYNTHETIC_IDS`."""
    if count < 1 or tokens < PREFIX_TOKENS:
        raise BenchmarkError(f"synthetic prompts: {count} of {tokens} tokens (at least 1 of {PREFIX_TOKENS})")
    low, high = SYNTHETIC_IDS
    out = []
    for i in range(count):
        rng = random.Random(seed * 1_000_003 + i)
        prefix = [low + (i * PREFIX_TOKENS + k) % (high - low) for k in range(PREFIX_TOKENS)]
        body = [rng.randrange(low, high) for _ in range(tokens - PREFIX_TOKENS)]
        out.append(Prompt(f"context-{tokens}-{i}", "synthetic context", f"<{tokens} token ids, prefix {i}>",
                          tuple(prefix + body)))  # fmt: skip
    return out


def load_prompts(path: Path | None = None) -> list[Prompt]:
    """All prompts (a YAML file of ``category: [{id, text}, ...]``; default: the shipped set)."""
    raw = (
        path.read_text(encoding="utf-8")
        if path
        else resources.files("verifylab.data").joinpath("prompts.yaml").read_text(encoding="utf-8")
    )
    try:
        data = load_strict_yaml(raw)
    except StrictYAMLError as exc:
        raise BenchmarkError(f"{path or 'prompts.yaml'}: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise BenchmarkError(f"{path or 'prompts.yaml'}: expected 'category: [{{id, text}}, ...]'")
    prompts = []
    for category, items in data.items():
        for item in items or []:
            if not isinstance(item, dict) or not item.get("id") or not item.get("text"):
                raise BenchmarkError(f"{path or 'prompts.yaml'}: category '{category}' has an entry without id/text")
            prompts.append(Prompt(str(item["id"]), str(category), str(item["text"])))
    return prompts
