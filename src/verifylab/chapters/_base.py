"""What every chapter shares: the three common parameters, the error line a bad value gets, and the one place
that decides between replaying stored evidence and running an experiment on the box."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from verifylab.errors import ParameterError, describe_error
from verifylab.report.section import Section


class ChapterParams(BaseModel):
    """Parameters every chapter takes; each chapter's model adds its own and refuses unknown names."""

    model_config = ConfigDict(extra="forbid")
    chapter: ClassVar[str] = ""  # the notebook's name, e.g. "02_benchmarks"

    mode: Literal["replay", "live"] = "replay"
    run_id: str | None = None
    data_dir: Path = Path("data")

    @field_validator("data_dir")
    @classmethod
    def _data_dir_exists(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"folder '{value}' does not exist (cwd {Path.cwd()})")
        return value

    @classmethod
    def validated(cls, **values: Any) -> Any:
        """The notebook's parameters, every one validated; :class:`ParameterError` with one line naming the
        chapter and the parameter otherwise."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ParameterError(describe_error(exc, cls.chapter)) from None


def live_section(params: ChapterParams, title: str, replay_note: str, experiment: Callable[[], Section]) -> Section:
    """The chapter's live part: ``experiment()`` in live mode; in replay mode a section that says what live mode
    would do (the only place a chapter looks at ``mode``)."""
    if params.mode != "live":
        return Section(title).add(replay_note, "")
    return experiment()
