"""What every chapter shares: the three common parameters, the error line a bad value gets, and the one place
that decides between replaying stored evidence and running an experiment on the box."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, ParamSpec

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from verifylab.errors import ParameterError, describe_error
from verifylab.report.section import Prose, Section
from verifylab.report.tables import Table, as_table
from verifylab.store.evidence import Evidence

P = ParamSpec("P")


class ChapterParams(BaseModel):
    """Parameters every chapter takes; each chapter's model adds its own and refuses unknown names."""

    model_config = ConfigDict(extra="forbid")
    chapter: ClassVar[str] = ""  # the notebook's name, e.g. "02_benchmarks"

    mode: Literal["replay", "live"] = Field(
        "replay", description="replay: show the stored evidence; live: measure on this box first"
    )
    run_id: str | None = Field(None, description="live: the run to write (default: a new id from the date)")
    data_dir: Path = Field(Path("data"), description="the evidence folder (runs/, reported figures)")

    @field_validator("data_dir")
    @classmethod
    def _data_dir_exists(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"folder '{value}' does not exist (cwd {Path.cwd()})")
        return value

    def evidence(self) -> Evidence:
        """The evidence the chapter reads: the stored runs and reported figures under ``data_dir``."""
        return Evidence(self.data_dir)

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> Any:
        """The parameters the notebook's parameters cell (written from this model) and papermill set, validated:
        ``chapter.Params.from_notebook(globals())``."""
        return cls.validated(**{name: namespace[name] for name in cls.model_fields if name in namespace})

    @classmethod
    def validated(cls, **values: Any) -> Any:
        """The notebook's parameters, every one validated; :class:`ParameterError` with one line naming the
        chapter and the parameter otherwise."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ParameterError(describe_error(exc, cls.chapter)) from None


def live_section(params: ChapterParams, experiment: Callable[[], Section]) -> Section | None:
    """The chapter's live part: ``experiment()`` in live mode; nothing in replay mode, where the page shows the
    stored evidence (each chapter's method section says what live mode does). The only place that looks at
    ``mode``."""
    if params.mode != "live":
        return None
    return experiment()


def shown_as_table(function: Callable[P, pd.DataFrame]) -> Callable[P, Table]:
    """A chapter function whose DataFrame the page shows through the book's one table renderer."""

    @functools.wraps(function)
    def shown(*args: P.args, **kwargs: P.kwargs) -> Table:
        return as_table(function(*args, **kwargs))

    return shown


def nothing_stored(ev: Evidence, what: str, remedy: str) -> Prose:
    """What an exhibit shows when the data folder holds no run of the kind it draws (a box's own folder before its
    first measurement of that kind): which kind, where, and what measures one. The exhibit keeps its number."""
    return Prose(f"Nothing to show yet: no run under `{ev.runs.root}` holds {what}; {remedy}.")
