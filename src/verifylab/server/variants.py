"""What to launch: the settings every variant shares (``BaseConfig``), the named variants (``Variant``) and the
launch each is (``variant_launch``), built into a command by the one builder (:mod:`verifylab.launch`) and checked
against an SGLang's ``--help`` text (``variant_command``). Pure: it starts nothing (``launch`` does)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from verifylab.errors import ServerError
from verifylab.launch import AllReduce, LaunchCommand, LaunchError, LaunchTarget, SglangLaunch, build_command
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
    disable_custom_all_reduce: bool = Field(False, description="SGLang's custom all-reduce off (a probe's policy)")
    kv_cache_dtype: str | None = Field(
        None, pattern=r"^[a-z0-9_]+$", description="SGLang's --kv-cache-dtype (None: its default, the model's dtype)"
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
    max_running: int | None = Field(None, ge=1, description="at most this many requests running (None: SGLang's)")
    pcie_ipc: bool = Field(False, description="SGLang's PCIe-IPC all-reduce (its switch set), as a box plan priced it")
    cuda_graph_max_bs: int | None = Field(
        None, ge=1, description="decode CUDA graphs up to this batch, as a box plan's launch line sets (None: SGLang's)"
    )


DEFAULT_VARIANTS = {
    "baseline": Variant(name="baseline"),
    "fusion": Variant(name="fusion", fusion=True),
    "eagle3": Variant(name="eagle3", speculative="EAGLE3"),
    "eagle3_fusion": Variant(name="eagle3_fusion", fusion=True, speculative="EAGLE3"),
    "ngram": Variant(name="ngram", speculative="NGRAM"),
}


def variant_launch(base: BaseConfig, variant: Variant) -> SglangLaunch:
    """``variant`` of ``base`` as the launch builder takes it (:class:`verifylab.launch.SglangLaunch`)."""
    fields: dict = {
        "model_path": base.model_path,
        "tp_size": base.tp_size,
        "host": base.host,
        "port": base.port,
        "mem_fraction_static": base.mem_fraction_static,
        "attention_backend": base.attention_backend,
        "kv_cache_dtype": base.kv_cache_dtype,
        "allreduce": AllReduce.FUSED
        if variant.fusion
        else (AllReduce.PCIE_IPC if variant.pcie_ipc else AllReduce.NCCL),
        "disable_custom_all_reduce": base.disable_custom_all_reduce,
        "max_running_requests": variant.max_running,
        "cuda_graph_max_bs": variant.cuda_graph_max_bs,
        "extra_args": (*base.extra_args, *variant.extra_args),
        "env": variant.env,
        "unset_env": tuple(base.unset_env),
    }
    if not variant.speculative:
        return SglangLaunch(**fields)
    eagle = variant.speculative.upper().startswith("EAGLE")
    if eagle and not base.draft_model_path:
        raise ServerError(f"variant '{variant.name}' needs draft_model_path (--draft-model-path)")
    if variant.draft_tokens is not None:  # a chain of this many tokens: steps = tokens - 1, top-k 1
        return SglangLaunch.speculative(variant.speculative, variant.draft_tokens, base.draft_model_path, **fields)
    return SglangLaunch(
        **fields,
        speculative_algorithm=variant.speculative,
        speculative_draft_model_path=base.draft_model_path if eagle else None,
        speculative_num_steps=base.speculative_num_steps,
        speculative_eagle_topk=base.speculative_eagle_topk,
        speculative_num_draft_tokens=base.speculative_num_draft_tokens,
    )


def variant_command(base: BaseConfig, variant: Variant, help_text: str) -> LaunchCommand:
    """``variant``'s command for the installed SGLang whose ``--help`` is ``help_text``: built by the one builder, every
    flag refused before anything starts unless that SGLang lists it."""
    try:
        return build_command(variant_launch(base, variant), LaunchTarget.installed(help_text))
    except LaunchError as exc:
        raise ServerError(str(exc)) from None
