"""Every chapter's parameters as a pydantic model: a notebook validates all of its parameters before any work,
and ``verifylab run`` validates every chapter's before the first one runs (a typo in chapter 3's settings
fails in a second, not after chapter 2's benchmarks). Unknown names are refused, with the chapter named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeInt, PositiveInt, ValidationInfo, field_validator

from verifylab.bench.speculation_grid import SpeculationGrid
from verifylab.chapters._base import ChapterParams
from verifylab.server.settings import LAUNCH_FIELDS, LaunchSettings
from verifylab.server.variants import DEFAULT_VARIANTS


def _known_variants(names: list[str]) -> list[str]:

    unknown = [n for n in names if n not in DEFAULT_VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {', '.join(DEFAULT_VARIANTS)}")
    return names


class _Server(ChapterParams, LaunchSettings):
    """How a chapter that starts SGLang itself launches it (chapters 02 and 03): the launch settings, declared once
    in ``server.settings`` (live mode only), and the model it serves."""

    model_path: str | None = Field(None, description="live: the model SGLang serves")
    mechanics_only: bool = Field(
        False, description="live: a run of the mechanism (tiny/random model): never evidence for a deployment"
    )
    campaign: str = Field(
        "",
        pattern=r"^[a-z0-9-]*$",
        description="live: the campaign the run belongs to (live-tp2, pcie-sim-before, ...): how the book finds it",
    )
    label: str = Field(
        "",
        validate_default=True,
        description="live: the hardware every figure of the run is labelled with, e.g. '8x RTX PRO 6000, PCIe'",
    )

    @field_validator("label", mode="after")
    @classmethod
    def _labelled_when_live(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("mode") == "live" and len(value.strip()) < 3:
            raise ValueError("live mode needs the hardware every figure of the run is labelled with")
        return value

    def server_settings(self) -> dict[str, Any]:
        """The launch settings as ``serve.BaseConfig`` takes them (chapters 02 and 03 start servers from these)."""
        return self.model_dump(include={"model_path", *LAUNCH_FIELDS})


class Introduction(ChapterParams):
    """Chapter 00 takes the shared parameters only."""

    chapter = "00_introduction"


class EnvironmentAndGates(ChapterParams):
    chapter = "01_environment_and_gates"

    sglang_root: Path | None = Field(
        None, description="live: folder holding sglang/ (default: the sglang importable in this kernel)"
    )
    arch: str = Field("sm120", pattern=r"^sm\d{2,3}$", description="the architecture whose gates are audited")
    apply_patch: bool = Field(
        False, description="live: open the gates (backups + manifest in <root>/.verifylab-gates/)"
    )
    probe: bool = Field(True, description="live: run the communication probe on this box's GPUs first")
    probe_gpus: PositiveInt | None = Field(None, description="live: GPUs the probe uses (default: all visible)")


class Benchmarks(_Server):
    chapter = "02_benchmarks"

    model_path: str | None = Field(None, validate_default=True, description="live: the model SGLang serves (needed)")

    variants: list[str] = Field(
        default_factory=lambda: ["baseline", "fusion", "eagle3", "eagle3_fusion"],
        description="live: the variants started and measured in turn",
    )
    runs: PositiveInt = Field(5, description="live: single-stream runs per variant (the case study's 5)")
    warmup: NonNegativeInt = Field(2, description="live: warm-up requests before the runs")
    max_tokens: PositiveInt = Field(2048, description="live: tokens per single-stream run")
    concurrency: list[PositiveInt] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], min_length=1, description="live: the sweep's streams"
    )
    sweep_tokens: PositiveInt = Field(512, description="live: tokens per request of the sweep")
    speculation: SpeculationGrid | None = Field(
        None,
        description="live: also measure speculation under load with controlled acceptance (a server per drafter, "
        "draft tokens and accept length, plus plain decoding), e.g. {accept_lengths: [1.5, 2, 3]}",
    )

    @field_validator("variants")
    @classmethod
    def _variants(cls, value: list[str]) -> list[str]:
        return _known_variants(value)

    @field_validator("model_path", mode="after")
    @classmethod
    def _served_when_live(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("mode") == "live" and not value:  # refused with the other parameters, before any work
            raise ValueError("live mode needs the model SGLang serves")
        return value


class VerifyBreakdown(_Server):
    chapter = "03_verify_breakdown"

    server_url: str = Field(
        "http://127.0.0.1:30000", description="live: the server to profile, unless a variant is started"
    )
    serve_variant: str | None = Field(
        None, description="live: start this variant (baseline, ngram, eagle3_fusion, ...) for the capture"
    )
    profile_variants: list[str] = Field(
        default_factory=list, description='live: start, profile and stop each in turn (e.g. ["baseline", "fusion"])'
    )
    profile_steps: PositiveInt = Field(5, description="live: forward steps each profile captures")
    draft_tokens: PositiveInt = Field(
        4, description="message size when the trace has none (CUDA graphs): tokens x 7168 x 2 bytes"
    )

    @field_validator("profile_variants")
    @classmethod
    def _variants(cls, value: list[str]) -> list[str]:
        return _known_variants(value)

    @field_validator("serve_variant")
    @classmethod
    def _serve_variant(cls, value: str | None) -> str | None:
        return None if value is None else _known_variants([value])[0]


class FusionVsElimination(ChapterParams):
    chapter = "04_fusion_vs_elimination"

    batch: PositiveInt = Field(1, description="concurrent streams of the terms table and chart")


class Recommendations(ChapterParams):
    chapter = "05_recommendations"

    sglang_version: str = Field("0.5.9", description="the SGLang the box runs (the case study's)")
    flashinfer_version: str = Field("0.6.4", description="the FlashInfer the box runs")
    interconnect: str = Field("PCIe", description="how the box's GPUs talk: PCIe or NVLink")
    model_path: str | None = Field(
        "/models/Kimi-K2.5", description="the model path in the recommended launch command (a placeholder)"
    )
    draft_model_path: str | None = Field(
        "/models/Kimi-K2.5-eagle3", description="the EAGLE-3 draft in that command (a placeholder)"
    )
    tp_size: PositiveInt = Field(8, description="tensor-parallel size in that command")
    launcher: list[str] | None = Field(
        None,
        min_length=1,
        description="the command that starts SGLang, as the printed command shows it and live mode asks its --help "
        "(None: python -m sglang.launch_server printed; live, this interpreter -m sglang.launch_server)",
    )
    probe_run: str | None = Field(
        None, description="a stored probe of this box (verifylab box): the launch command is checked against its policy"
    )
