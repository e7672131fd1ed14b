"""What the cost model reads, as values: reported figures, public measurements and measured runs (each run's id,
label, when it was made and its tables, read on first use). The model (``model``) reads runs through
:class:`MeasuredRuns` only, so it can be called with frames built in memory (:meth:`MeasuredRuns.of_frames`,
:class:`SourcesInMemory`) as well as with a data folder (``store.evidence.Evidence``); it never sees files."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Protocol

import pandas as pd

from verifylab.derived import DerivedCache
from verifylab.errors import ManifestError, RunNotFoundError


@dataclass(frozen=True)
class MeasuredRun:
    """One run: what identifies it and its tables by name (each loaded by ``load(name)`` on first use)."""

    run_id: str
    tables: frozenset[str]
    load: Callable[[str], pd.DataFrame] = field(repr=False, compare=False)
    created: datetime = datetime(1970, 1, 1, tzinfo=UTC)
    label: str = ""
    mechanics_only: bool = False
    gpu_name: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict, compare=False)
    campaign: str = ""


class MeasuredRuns:
    """The runs a model call reads, sorted by id; ``where`` says where they came from (for errors)."""

    def __init__(self, runs: Iterable[MeasuredRun], where: str = "the runs given") -> None:
        self.runs: tuple[MeasuredRun, ...] = tuple(sorted(runs, key=lambda r: r.run_id))
        self.where = where
        self._by_id = {r.run_id: r for r in self.runs}
        self._loaded: dict[tuple[str, str], pd.DataFrame] = {}
        self.derived_cache = DerivedCache()  # values derived from these runs alone (a grid's sweeps and fit)

    @classmethod
    def of_frames(cls, frames: Mapping[str, Mapping[str, pd.DataFrame]], **run_fields: Any) -> MeasuredRuns:
        """Runs from frames in memory: ``{run_id: {table: frame}}`` (runs made in id order)."""
        runs = []
        for n, (run_id, tables) in enumerate(sorted(frames.items())):
            created = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=n)
            runs.append(MeasuredRun(run_id, frozenset(tables), partial(_copy_of, tables), created, **run_fields))
        return cls(runs, "frames given in memory")

    def __repr__(self) -> str:
        return f"MeasuredRuns({len(self.runs)} runs from {self.where})"

    def exists(self, run_id: str) -> bool:
        return run_id in self._by_id

    def run(self, run_id: str) -> MeasuredRun:
        """One run by id; an unknown id names what is there."""
        if run_id not in self._by_id:
            raise RunNotFoundError.naming(run_id, self.where, list(self._by_id))
        return self._by_id[run_id]

    def read_table(self, run_id: str, name: str) -> pd.DataFrame:
        """Table ``name`` of run ``run_id`` (a copy: callers may change it)."""
        run = self.run(run_id)
        if name not in run.tables:
            have = ", ".join(sorted(run.tables)) or "none"
            raise ManifestError(f"run '{run_id}' has no table '{name}' (tables: {have})")
        if (run_id, name) not in self._loaded:
            self._loaded[(run_id, name)] = run.load(name)
        return self._loaded[(run_id, name)].copy()

    def table_or_none(self, run_id: str, name: str) -> pd.DataFrame | None:
        """Like :meth:`read_table`, but None when the run has no such table."""
        return self.read_table(run_id, name) if name in self.run(run_id).tables else None

    def runs_with_table(self, name: str) -> list[str]:
        """Ids of the runs holding table ``name``, sorted."""
        return [r.run_id for r in self.runs if name in r.tables]

    def runs_with_all(self, names: Sequence[str]) -> list[str]:
        """Ids of the runs holding every table in ``names``, sorted."""
        return [r.run_id for r in self.runs if all(n in r.tables for n in names)]

    def newest_with(self, *names: str) -> str | None:
        """The most recently made run holding every table in ``names``, or None."""
        holding = [r for r in self.runs if all(n in r.tables for n in names)]
        return max(holding, key=lambda r: r.created).run_id if holding else None


def _copy_of(tables: Mapping[str, pd.DataFrame], name: str) -> pd.DataFrame:
    return tables[name].copy()


class ModelSources(Protocol):
    """What the cost model reads: reported figures, public measurements, measured runs (as values) and the cache of
    values derived from them (``verifylab.derived``). ``store.evidence.Evidence`` is one; :class:`SourcesInMemory`
    is another."""

    @property
    def figures(self) -> pd.DataFrame: ...

    @property
    def public(self) -> pd.DataFrame: ...

    @property
    def public_speculation(self) -> pd.DataFrame: ...

    @property
    def public_context(self) -> pd.DataFrame: ...

    @property
    def measured(self) -> MeasuredRuns: ...

    @property
    def fusion_forensics(self) -> pd.DataFrame: ...

    @property
    def has_gate_matrix(self) -> bool: ...

    @property
    def derived_cache(self) -> DerivedCache: ...


@dataclass
class SourcesInMemory:
    """:class:`ModelSources` from values: call the model with numbers and frames, no data folder."""

    figures: pd.DataFrame
    public: pd.DataFrame
    measured: MeasuredRuns
    fusion_forensics: pd.DataFrame = field(default_factory=pd.DataFrame)
    public_speculation: pd.DataFrame = field(default_factory=pd.DataFrame)
    public_context: pd.DataFrame = field(default_factory=pd.DataFrame)
    derived_cache: DerivedCache = field(default_factory=DerivedCache, repr=False)

    @property
    def has_gate_matrix(self) -> bool:
        return not self.fusion_forensics.empty
