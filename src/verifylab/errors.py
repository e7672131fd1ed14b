"""Every error a user can meet, named. Messages say what is wrong (file, field, parameter) and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class VerifylabError(Exception):
    """Base class: the CLI prints these as one line, without a traceback."""


class ParameterError(VerifylabError):
    """A notebook, CLI or model parameter has an invalid value."""


class ManifestError(VerifylabError):
    """A run manifest or stored table is missing, unreadable or violates the schema."""


class RunNotFoundError(VerifylabError):
    """A run id that is not in the run store."""

    LISTED = 8  # a store with more runs is not listed in one line: the ids that look like the one asked for are

    @classmethod
    def naming(cls, run_id: str, where: object, known: Sequence[str]) -> RunNotFoundError:
        """The error for ``run_id`` missing from ``where``: the stored ids it may have meant (it starts them, or
        is close to one), else every id of a small store, else how many there are and how to list them."""
        close = [r for r in known if r.startswith(run_id)] or difflib.get_close_matches(run_id, known, n=3)
        if close:
            hint = f"did you mean {' or '.join(close[:3])}?"
        elif len(known) <= cls.LISTED:
            hint = f"stored runs: {', '.join(known) or 'none'}"
        else:
            hint = f"{len(known)} stored runs, none like it: verifylab runs list names them"
        return cls(f"run '{run_id}' not found in {where} ({hint})")


class RunExistsError(VerifylabError):
    """Creating a run whose id is already taken."""


class ReferenceDataError(VerifylabError):
    """The reported-figures table is malformed."""


class TraceError(VerifylabError):
    """A profiler trace is truncated, not JSON, empty or otherwise unreadable."""


class GateError(VerifylabError):
    """Gate audit/apply/verify/revert refused to act or found an inconsistent tree."""


class ServerError(VerifylabError):
    """An SGLang server failed to start, crashed or answered badly."""


class BenchmarkError(VerifylabError):
    """A benchmark request failed in a way the harness records."""


class ModelInputError(VerifylabError):
    """A cost-model input is out of its valid range."""


class BookBuildError(VerifylabError):
    """Executing a chapter notebook or rendering the book failed."""


class StorageError(VerifylabError, OSError):
    """A file could not be written (disk full, quota, read-only): nothing was replaced. Still an ``OSError``, so
    code that rolls back on a failed write keeps doing so."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class CacheFolderRefused(VerifylabError):
    """A cache folder (or an entry name) that is not safe to use: another user owns or can write it or a folder
    above it, or a link stands in its path. The command runs without the cache."""


class SynthError(VerifylabError):
    """A rank of the synthetic verify pass failed, died or stopped making progress."""


class CommProbeError(VerifylabError):
    """The communication probe cannot run here (no CUDA, one GPU) or a rank failed or stopped making progress."""


SHOWN_VALUE = 60  # characters of a refused value an error repeats: enough to recognise it, never a whole file


def _shown(value: object) -> str:
    """A refused value as an error names it: a mapping or list by its size, anything else cut short."""
    if isinstance(value, dict | list | tuple):
        return f"<{type(value).__name__} of {len(value)}>"
    text = repr(value)
    return text if len(text) <= SHOWN_VALUE else text[: SHOWN_VALUE - 1] + "…"


def describe_error(exc: ValidationError, where: str) -> str:
    """One line naming the parameter(s), the value given and what is allowed."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "(parameters)"
        allowed = ""
        ctx = err.get("ctx") or {}
        if "expected" in ctx and str(ctx["expected"]) not in err["msg"]:
            allowed = f"; allowed: {ctx['expected']}"
        parts.append(f"parameter '{name}' = {_shown(err.get('input'))}: {err['msg']}{allowed}")
    return f"{where}: " + "; ".join(parts)


class FleetError(VerifylabError):
    """A fleet campaign that cannot run as written (its file, a host, a version mismatch, a returned run)."""
