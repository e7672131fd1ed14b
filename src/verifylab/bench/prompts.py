"""The shipped prompt set, by category (``verifylab/data/prompts.yaml``)."""

from __future__ import annotations

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
