"""Every chapter's parameters as a pydantic model: a notebook validates all of its parameters before any work,
and ``verifylab run`` validates every chapter's before the first one runs (a typo in chapter 3's settings
fails in a second, not after chapter 2's benchmarks). Unknown names are refused, with the chapter named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, NonNegativeInt, PositiveInt, ValidationError, field_validator

from verifylab.chapters._base import ChapterParams
from verifylab.errors import ParameterError, describe_error


def _known_variants(names: list[str]) -> list[str]:
    from verifylab.server.launch import DEFAULT_VARIANTS

    unknown = [n for n in names if n not in DEFAULT_VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {', '.join(DEFAULT_VARIANTS)}")
    return names


class _Server(ChapterParams):
    """How a chapter that starts SGLang itself launches it (chapter 02's settings)."""

    model_path: str | None = None
    draft_model_path: str | None = None
    tp_size: PositiveInt = 1
    port: int = Field(30000, ge=1, le=65535)
    launcher: list[str] = Field(default_factory=lambda: ["python", "-m", "sglang.launch_server"], min_length=1)
    extra_args: list[str] = Field(default_factory=list)
    simulate_no_multicast: bool = False
    mechanics_only: bool = False
    label: str = ""

    def server_settings(self) -> dict[str, Any]:
        """The launch settings as ``serve.BaseConfig`` takes them (chapters 02 and 03 start servers from these)."""
        return self.model_dump(include=set(SERVER_SETTINGS))


SERVER_SETTINGS = (
    "model_path",
    "draft_model_path",
    "tp_size",
    "port",
    "launcher",
    "extra_args",
    "simulate_no_multicast",
)


class Introduction(ChapterParams):
    """Chapter 00 takes the shared parameters only."""

    chapter = "00_introduction"


class EnvironmentAndGates(ChapterParams):
    chapter = "01_environment_and_gates"

    sglang_root: Path | None = None
    arch: str = Field("sm120", pattern=r"^sm\d{2,3}$")
    apply_patch: bool = False
    probe: bool = Field(True, description="live: run the communication probe on this box's GPUs first")
    probe_gpus: PositiveInt | None = Field(None, description="live: GPUs the probe uses (default: all visible)")


class Benchmarks(_Server):
    chapter = "02_benchmarks"

    variants: list[str] = Field(default_factory=lambda: ["baseline", "fusion", "eagle3", "eagle3_fusion"])
    runs: PositiveInt = 5
    warmup: NonNegativeInt = 2
    max_tokens: PositiveInt = 2048
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], min_length=1)
    sweep_tokens: PositiveInt = 512

    @field_validator("variants")
    @classmethod
    def _variants(cls, value: list[str]) -> list[str]:
        return _known_variants(value)


class VerifyBreakdown(_Server):
    chapter = "03_verify_breakdown"

    server_url: str = "http://127.0.0.1:30000"
    serve_variant: str | None = None
    profile_variants: list[str] = Field(default_factory=list)
    profile_steps: PositiveInt = 5
    draft_tokens: PositiveInt = 4

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

    sglang_version: str = "0.5.9"
    flashinfer_version: str = "0.6.4"
    interconnect: str = "PCIe"
    model_path: str | None = None
    draft_model_path: str | None = None
    tp_size: PositiveInt = 8
    launcher: list[str] = Field(default_factory=lambda: ["python", "-m", "sglang.launch_server"], min_length=1)


CHAPTER_PARAMS: dict[str, type[ChapterParams]] = {
    model.chapter: model
    for model in (Introduction, EnvironmentAndGates, Benchmarks, VerifyBreakdown, FusionVsElimination, Recommendations)
}


def chapter_parameters(chapter: str, **values: Any) -> Any:
    """A notebook's parameters, every one validated; :class:`ParameterError` with one line naming the chapter and
    the parameter otherwise."""
    return CHAPTER_PARAMS[chapter].validated(**values)


def parameters_for(chapter: str, values: dict[str, Any]) -> dict[str, Any]:
    """The values a chapter declares (its parameters cell = its Params model): shared parameters that belong to
    other chapters are left out, so papermill never warns about a parameter the notebook does not take."""
    model = CHAPTER_PARAMS.get(chapter)
    return {k: v for k, v in values.items() if model is None or k in model.model_fields}


def check_pipeline_chapters(shared: dict[str, Any], chapters: dict[str, dict[str, Any]], where: str) -> None:
    """Before any chapter runs: every chapter named exists, its overrides are its parameters with valid values, and
    every shared parameter is one that some chapter takes (papermill gives each chapter only those it declares)."""
    unknown = [name for name in chapters if name not in CHAPTER_PARAMS]
    if unknown:
        raise ParameterError(f"{where}: chapters {unknown} do not exist; chapters are {', '.join(CHAPTER_PARAMS)}")
    taken = {field for model in CHAPTER_PARAMS.values() for field in model.model_fields}
    stray = sorted(set(shared) - taken)
    if stray:
        raise ParameterError(f"{where}: parameters {stray} are taken by no chapter")
    for name, model in CHAPTER_PARAMS.items():
        values = {k: v for k, v in shared.items() if k in model.model_fields} | chapters.get(name, {})
        values.pop("data_dir", None)  # checked where the chapter runs (relative to the project root)
        try:
            model.model_validate(values)
        except ValidationError as exc:
            raise ParameterError(describe_error(exc, f"{where}: {name}")) from None
