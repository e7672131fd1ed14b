"""The parameters every chapter shares and the one-line description of a validation error (each chapter's own
model is in ``chapter_params``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


class ChapterParameters(BaseModel):
    """Parameters every chapter notebook shares. Chapters may pass extra, chapter-specific keys."""

    model_config = ConfigDict(extra="allow")

    mode: Literal["replay", "live"] = "replay"
    run_id: str | None = None
    data_dir: Path = Path("data")

    @field_validator("data_dir")
    @classmethod
    def _data_dir_exists(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"folder '{value}' does not exist (cwd {Path.cwd()})")
        return value


def describe_error(exc: ValidationError, where: str) -> str:
    """One line naming the parameter(s), the value given and what is allowed."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "(parameters)"
        allowed = ""
        ctx = err.get("ctx") or {}
        if "expected" in ctx and str(ctx["expected"]) not in err["msg"]:
            allowed = f"; allowed: {ctx['expected']}"
        parts.append(f"parameter '{name}' = {err.get('input')!r}: {err['msg']}{allowed}")
    return f"{where}: " + "; ".join(parts)
