"""What the model fits and prices from, read once into one record: the stored runs' part (:class:`StoredRuns`: each
speculation grid, the GPU ceilings, the norm kernel, the communication curves and probes, the in-pass points) and the
evidence's (:class:`StoredInputs`: that, the public tables and the reported figures). The fits and the case study's
pricing take a record; none of them reads the store."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from verifylab.derived import DerivedCache, derived
from verifylab.errors import ModelInputError, VerifylabError
from verifylab.model.inputs.curves import BoxProbe, Curve, NormRead, norm_read, stored_curves
from verifylab.model.inputs.engine_cells import EngineCells, read_engine_cells
from verifylab.model.inputs.gpus import Ceilings
from verifylab.model.inputs.grids import POINTS_TABLE, GridRead, grid_read, grid_runs, measured_ceilings
from verifylab.model.inputs.probes import box_probe, host_memory_curve
from verifylab.model.inputs.public_curves import PublicCurve, public_curves
from verifylab.model.inputs.traces import InPassPoint, live_points, synthetic_points
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.vocab import KIMI_K2_HIDDEN


@dataclass(frozen=True)
class NvlinkRead:
    """NVLink's all-reduce curves from the newest stored run that timed one (2 x H200): NCCL's and the fused
    one-shot kernel's."""

    run_id: str
    nccl: Curve
    fused: Curve | None


class _CachedRecord:
    """A record the :func:`verifylab.derived.derived` functions key their values on: it lends the cache of the
    evidence it was read from, which is never pickled with it (the interactive commands keep records on disk)."""

    _cache: DerivedCache | None = None

    @property
    def derived_cache(self) -> DerivedCache:
        if self._cache is None:
            raise ModelInputError("a stored-inputs record is used before it was read from an evidence")
        return self._cache

    def lend(self, cache: DerivedCache) -> None:
        object.__setattr__(self, "_cache", cache)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_cache", None)
        return state


@dataclass(frozen=True, eq=False)
class StoredRuns(_CachedRecord):
    """What the model takes from the stored runs, read once (:func:`stored_runs`). A part whose tables did not read
    is kept as its error and raised where the part is used, so an answer that needs none of it is still given."""

    where: str
    grids: tuple[GridRead, ...]  # the grids that are evidence, oldest first (a grid measured again: its newest run)
    other_grids: tuple[GridRead, ...]  # the runs of a grid measured again, and those marked mechanics only
    unread: Mapping[str, str]  # a part's name -> what it is and why its tables did not read
    _ceilings: Ceilings | None = None
    _grid_ceilings: Mapping[str, Ceilings | None] = field(default_factory=dict)
    _norm: NormRead | None = None
    _host_memory: tuple[Curve | None, str | None] = (None, None)
    _probe: BoxProbe | None = None
    _in_pass_points: tuple[InPassPoint, ...] = ()
    _nvlink: NvlinkRead | None = None
    _engine: EngineCells | None = None

    def grid(self, run_id: str) -> GridRead:
        """Grid run ``run_id`` as read, or an error naming the grids there are."""
        found = next((g for g in (*self.grids, *self.other_grids) if g.run_id == run_id), None)
        if found is None:
            have = ", ".join(g.run_id for g in self.grids) or "none"
            raise ModelInputError(f"run {run_id} is no speculation grid under {self.where} (grids: {have})")
        return found

    def _read(self, part: str) -> None:
        if part in self.unread:
            raise ModelInputError(f"{self.where}: {self.unread[part]}")

    @property
    def ceilings(self) -> Ceilings | None:
        """The newest measured GPU ceilings, of any GPU."""
        self._read("ceilings")
        return self._ceilings

    @property
    def grid_ceilings(self) -> Mapping[str, Ceilings | None]:
        """The measured ceilings by the GPU key of every grid run read."""
        self._read("grid_ceilings")
        return self._grid_ceilings

    @property
    def norm(self) -> NormRead | None:
        self._read("norm")
        return self._norm

    @property
    def host_memory(self) -> tuple[Curve | None, str | None]:
        self._read("host_memory")
        return self._host_memory

    @property
    def probe(self) -> BoxProbe | None:
        self._read("probe")
        return self._probe

    @property
    def in_pass_points(self) -> tuple[InPassPoint, ...]:
        """The synthetic passes' points, then the live ones'."""
        self._read("in_pass_points")
        return self._in_pass_points

    @property
    def nvlink(self) -> NvlinkRead | None:
        self._read("nvlink")
        return self._nvlink

    @property
    def engine(self) -> EngineCells:
        """The engine runs' context cells and target configs (empty where none is stored)."""
        self._read("engine")
        return self._engine if self._engine is not None else EngineCells(pd.DataFrame())


UNREADABLE = (VerifylabError, KeyError, ValueError, TypeError, IndexError)  # what a table that does not hold its
# columns or values raises in a reader


@dataclass(frozen=True, eq=False)
class StoredInputs(_CachedRecord):
    """What the model takes from one evidence, read once (:func:`stored_inputs`): the stored runs' part, the public
    tables (measurements, speculation curves, per-context matrices) and the case study's reported figures."""

    runs: StoredRuns
    figures: pd.DataFrame
    public: pd.DataFrame
    public_curves: tuple[PublicCurve, ...]
    public_context: pd.DataFrame = field(repr=False)


def _nvlink_read(runs: MeasuredRuns) -> NvlinkRead | None:
    for run_id in reversed(runs.runs_with_table("allreduce_latency")):
        curves = [c for c in stored_curves(runs, run_id, KIMI_K2_HIDDEN) if c.path == "nvlink"]
        nccl = next((c for c in curves if c.impl == "nccl"), None)
        if nccl is not None:
            return NvlinkRead(run_id, nccl, next((c for c in curves if c.impl == "fused"), None))
    return None


@derived
def _read_runs(runs: MeasuredRuns) -> StoredRuns:
    evidence = grid_runs(runs)
    read: dict[str, GridRead] = {}
    for run_id in runs.runs_with_table(POINTS_TABLE):
        try:
            read[run_id] = grid_read(runs, run_id)
        except VerifylabError:  # a grid that does not read is no evidence; naming it is an error at its use
            if run_id in evidence:
                raise
    keys = sorted({g.gpu_key for g in read.values()})
    readers: dict[str, tuple[str, Callable[[], object]]] = {  # each part: what it is (its tables), how it is read
        "ceilings": ("the GPU ceilings (table ceilings)", lambda: measured_ceilings(runs)),
        "grid_ceilings": (
            "the ceilings of the grid runs' GPUs (table ceilings)",
            lambda: {key: measured_ceilings(runs, key) for key in keys},
        ),
        "norm": ("the norm kernel (table norm_fusion)", lambda: norm_read(runs)),
        "host_memory": (
            "the curve through host memory (tables verdict, allreduce_latency)",
            lambda: host_memory_curve(runs),
        ),
        "probe": ("the box's probe (tables verdict, allreduce_latency)", lambda: box_probe(runs)),
        "in_pass_points": (
            "the in-pass points (tables verify_pass_trace, allreduce_latency, trace_steps)",
            lambda: (*synthetic_points(runs), *live_points(runs)),
        ),
        "nvlink": ("the NVLink curves (table allreduce_latency)", lambda: _nvlink_read(runs)),
        "engine": ("the engine runs' cells (table context_cells)", lambda: read_engine_cells(runs)),
    }
    parts: dict[str, Any] = {}
    unread: dict[str, str] = {}
    for name, (what, reader) in readers.items():
        try:
            parts[f"_{name}"] = reader()
        except UNREADABLE as exc:
            unread[name] = f"{what} did not read: {type(exc).__name__}: {exc}"
    return StoredRuns(
        where=runs.where,
        grids=tuple(read[r] for r in evidence),
        other_grids=tuple(g for r, g in read.items() if r not in evidence),
        unread=unread,
        **parts,
    )


def stored_runs(runs: MeasuredRuns) -> StoredRuns:
    """Everything the model takes from ``runs``, read once per set of runs."""
    record = _read_runs(runs)
    record.lend(runs.derived_cache)
    return record


@derived
def _read_inputs(ev: ModelSources) -> StoredInputs:
    return StoredInputs(stored_runs(ev.measured), ev.figures, ev.public, tuple(public_curves(ev)), ev.public_context)


def stored_inputs(ev: ModelSources) -> StoredInputs:
    """Everything the model takes from ``ev``, read once per evidence."""
    record = _read_inputs(ev)
    record.lend(ev.derived_cache)
    record.runs.lend(ev.measured.derived_cache)
    return record
