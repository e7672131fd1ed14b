"""FlashInfer's all-reduce + residual add + RMSNorm kernel, called the way a given SGLang version calls it.

SGLang 0.5.17 (FlashInfer 0.6.15.post1), read from the published wheels:
``flashinfer_comm_fusion.FlashInferWorkspaceManager.initialize`` creates the workspace with
``create_allreduce_fusion_workspace(backend=<resolved: trtllm on SM90>, max_token_num=max(k, 2048), ...)``
and ``flashinfer_allreduce_residual_rmsnorm`` calls ``allreduce_fusion(pattern=kARResidualRMSNorm,
launch_with_pdl=True, use_oneshot=None, fp32_acc=False, trigger_completion_at_end=False)`` (its own defaults,
as ``layernorm.py`` passes neither). ``use_oneshot=None`` lets FlashInfer's size heuristic pick one-shot
or two-shot. Never the ``mnnvl`` backend: it creates NVLink multicast objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from verifylab.synth.verify_pass import EPS
from verifylab.vocab import SGLANG_FUSION_MAX_TOKENS


@dataclass(frozen=True)
class FusionSettings:
    """The arguments that decide how FlashInfer's fused kernel runs, and where they come from."""

    name: str
    launch_with_pdl: bool
    trigger_completion_at_end: bool
    fp32_acc: bool
    use_oneshot: bool | None
    source: str

    def describe(self) -> str:
        shot = {None: "heuristic", True: "one-shot", False: "two-shot"}[self.use_oneshot]
        return (
            f"pdl={self.launch_with_pdl}, trigger_completion_at_end={self.trigger_completion_at_end}, "
            f"fp32_acc={self.fp32_acc}, use_oneshot={shot} ({self.source})"
        )

    def to_dict(self) -> dict:
        return asdict(self)


SGLANG_0_5_17 = FusionSettings(
    "sglang-0.5.17", True, False, False, None, "SGLang 0.5.17 flashinfer_comm_fusion.py, FlashInfer 0.6.15.post1"
)


def legacy_settings(use_oneshot: bool) -> FusionSettings:
    """The settings verifylab's first benchmark used (no SGLang version calls it so): PDL off, fp32 accumulation,
    completion triggered at the end, one-shot or two-shot forced."""
    return FusionSettings(
        "legacy-oneshot" if use_oneshot else "legacy-twoshot",
        False,
        True,
        True,
        use_oneshot,
        "verifylab's earlier gpu_multi.py, forced strategy",
    )


class FlashInferFusedAllReduce:
    """A TRT-LLM all-reduce fusion workspace for this rank; calling it runs the fused kernel on (k, H) inputs."""

    def __init__(
        self,
        rank: int,
        world: int,
        hidden: int,
        settings: FusionSettings = SGLANG_0_5_17,
        max_tokens: int = SGLANG_FUSION_MAX_TOKENS,
        group=None,
    ) -> None:
        from flashinfer import comm

        self.comm, self.settings = comm, settings
        kwargs = dict(
            backend="trtllm",
            world_size=world,
            rank=rank,
            max_token_num=max_tokens,
            hidden_dim=hidden,
            dtype=torch.bfloat16,
            group=group,
        )
        if settings.use_oneshot is not None:
            kwargs["force_oneshot_support"] = bool(settings.use_oneshot)
        self.workspace = comm.create_allreduce_fusion_workspace(**kwargs)

    def __call__(
        self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.settings
        norm_out, residual_out = torch.empty_like(x), torch.empty_like(residual)
        self.comm.allreduce_fusion(
            input=x,
            workspace=self.workspace,
            pattern=self.comm.AllReduceFusionPattern.kARResidualRMSNorm,
            launch_with_pdl=s.launch_with_pdl,
            trigger_completion_at_end=s.trigger_completion_at_end,
            residual_out=residual_out,
            norm_out=norm_out,
            residual_in=residual,
            rms_gamma=weight,
            rms_eps=EPS,
            use_oneshot=s.use_oneshot,
            fp32_acc=s.fp32_acc,
        )
        return norm_out, residual_out

    def destroy(self) -> None:
        destroy = getattr(self.workspace, "destroy", None)
        if destroy is not None:
            destroy()
