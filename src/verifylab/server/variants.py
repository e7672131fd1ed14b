"""What to launch: the settings every variant shares (``BaseConfig``) and the named variants (``Variant``):
which mechanisms each asks for. How they become flags is ``launch.variant_args``."""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field


class BaseConfig(BaseModel):
    """What every variant shares."""

    model_path: str
    tp_size: int = Field(1, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(30000, ge=1, le=65535)
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    attention_backend: str | None = None
    draft_model_path: str | None = None
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    extra_args: list[str] = Field(default_factory=list)
    launcher: list[str] = Field(default_factory=lambda: [sys.executable, "-m", "sglang.launch_server"])
    simulate_no_multicast: bool = Field(
        False,
        description="answer SGLang's multicast queries as a PCIe box without NVLink multicast would "
        "(verifylab.guard's sitecustomize): reproduces the 'Skipping allreduce fusion' preflight on NVLink GPUs",
    )


class Variant(BaseModel):
    """A named server configuration: which mechanisms it asks for."""

    name: str
    fusion: bool = False
    speculative: str | None = None  # EAGLE3, NGRAM, ...
    extra_args: list[str] = Field(default_factory=list)


DEFAULT_VARIANTS = {
    "baseline": Variant(name="baseline"),
    "fusion": Variant(name="fusion", fusion=True),
    "eagle3": Variant(name="eagle3", speculative="EAGLE3"),
    "eagle3_fusion": Variant(name="eagle3_fusion", fusion=True, speculative="EAGLE3"),
    "ngram": Variant(name="ngram", speculative="NGRAM"),
}
