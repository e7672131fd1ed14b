"""What to launch: the settings every variant shares (``BaseConfig``), the named variants (``Variant``) and the
flags each becomes (``variant_args``), checked against an SGLang's ``--help`` text. Pure: it starts nothing
(``launch`` does), so the book's chapters can print a launch command."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from verifylab.errors import ServerError
from verifylab.server.settings import LaunchSettings


class BaseConfig(LaunchSettings):
    """What every variant shares: the launch settings (``server.settings``) and the model they serve."""

    model_path: str
    host: str = "127.0.0.1"
    speculative_num_steps: int = 3
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int = 4
    unset_env: list[str] = Field(
        default_factory=list, description="variables removed from the server's environment (a probe's policy)"
    )


class Variant(BaseModel):
    """A named server configuration: which mechanisms it asks for."""

    name: str
    fusion: bool = False
    speculative: str | None = None  # EAGLE3, NGRAM, ...
    extra_args: list[str] = Field(default_factory=list)
    draft_tokens: int | None = Field(
        None,
        ge=2,
        description="a chain of this many tokens per verify (steps = draft_tokens - 1, top-k 1); "
        "None: the base config's settings",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="environment the server starts with, e.g. SGLANG_SIMULATE_ACC_LEN"
    )


DEFAULT_VARIANTS = {
    "baseline": Variant(name="baseline"),
    "fusion": Variant(name="fusion", fusion=True),
    "eagle3": Variant(name="eagle3", speculative="EAGLE3"),
    "eagle3_fusion": Variant(name="eagle3_fusion", fusion=True, speculative="EAGLE3"),
    "ngram": Variant(name="ngram", speculative="NGRAM"),
}


# The workspace backend verifylab asks for: 'trtllm' (P2P buffers, no multicast). Never 'mnnvl' or 'auto' (which
# may pick mnnvl): mnnvl creates NVLink multicast objects.
FUSION_BACKEND = "trtllm"


def known_flags(help_text: str) -> set[str]:
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", help_text))


def variant_args(base: BaseConfig, variant: Variant, help_text: str) -> list[str]:
    """The launch arguments of ``variant``, with the fusion flags this SGLang version knows."""
    flags = known_flags(help_text)
    args = [
        "--model-path",
        base.model_path,
        "--tp-size",
        str(base.tp_size),
        "--host",
        base.host,
        "--port",
        str(base.port),
    ]
    if base.mem_fraction_static is not None:
        args += ["--mem-fraction-static", str(base.mem_fraction_static)]
    if base.attention_backend:
        args += ["--attention-backend", base.attention_backend]
    if variant.fusion:
        if "--flashinfer-allreduce-fusion-backend" in flags:
            args += ["--flashinfer-allreduce-fusion-backend", FUSION_BACKEND]
        else:
            args += ["--enable-flashinfer-allreduce-fusion"]
    elif "--enforce-disable-flashinfer-allreduce-fusion" in flags:
        args += ["--enforce-disable-flashinfer-allreduce-fusion"]  # some versions auto-enable it for Kimi/DeepSeek
    if variant.speculative:
        args += ["--speculative-algorithm", variant.speculative]
        if variant.speculative.upper().startswith("EAGLE"):
            if not base.draft_model_path:
                raise ServerError(f"variant '{variant.name}' needs draft_model_path (--draft-model-path)")
            args += ["--speculative-draft-model-path", base.draft_model_path]
        steps, topk, tokens = (
            (variant.draft_tokens - 1, 1, variant.draft_tokens)
            if variant.draft_tokens is not None
            else (base.speculative_num_steps, base.speculative_eagle_topk, base.speculative_num_draft_tokens)
        )
        args += [
            "--speculative-num-steps",
            str(steps),
            "--speculative-eagle-topk",
            str(topk),
            "--speculative-num-draft-tokens",
            str(tokens),
        ]
    return args + base.extra_args + variant.extra_args


def check_flags(args: list[str], help_text: str) -> None:
    """Refuse, before anything starts, any flag the installed SGLang does not list in ``--help``."""
    flags = known_flags(help_text)
    unknown = [a.split("=")[0] for a in args if a.startswith("--") and a.split("=")[0] not in flags]
    if unknown:
        raise ServerError(f"the installed SGLang does not know {', '.join(unknown)} (checked against --help)")
