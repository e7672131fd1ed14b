"""The launch settings, declared once: what a chapter's parameters, a variant's base configuration and `verifylab
serve` all start SGLang with, so their defaults are the same by construction. A new launch setting is one field
here (and the option it becomes one field of :class:`verifylab.launch.SglangLaunch`, set in
``variants.variant_launch``)."""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field, field_validator

from verifylab.server import launch_defaults as defaults
from verifylab.server.launch_defaults import HELP


def running_interpreter_launcher() -> list[str]:
    """SGLang started by the interpreter running verifylab (never whatever ``python`` is first on PATH)."""
    return [sys.executable, "-m", "sglang.launch_server"]


class LaunchSettings(BaseModel):
    """How SGLang is started, whatever starts it (defaults and help: ``server.launch_defaults``)."""

    draft_model_path: str | None = Field(None, description=HELP["draft_model_path"])
    tp_size: int = Field(defaults.TP_SIZE, ge=1, description=HELP["tp_size"])
    port: int = Field(defaults.PORT, ge=1, le=65535, description=HELP["port"])
    mem_fraction_static: float | None = Field(None, gt=0, le=1, description=HELP["mem_fraction_static"])
    attention_backend: str | None = Field(None, pattern=r"^[a-z0-9_]+$", description=HELP["attention_backend"])
    launcher: list[str] = Field(
        default_factory=running_interpreter_launcher,
        min_length=1,
        description=HELP["launcher"],
        json_schema_extra={"notebook_default": None},  # a notebook says None, not this machine's interpreter path
    )
    extra_args: list[str] = Field(default_factory=list, description=HELP["extra_args"])
    simulate_no_multicast: bool = Field(defaults.SIMULATE_NO_MULTICAST, description=HELP["simulate_no_multicast"])

    @field_validator("launcher", mode="before")
    @classmethod
    def _this_interpreter(cls, value: object) -> object:
        return running_interpreter_launcher() if value is None else value


LAUNCH_FIELDS = tuple(LaunchSettings.model_fields)
