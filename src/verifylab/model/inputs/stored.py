"""What the model fits and prices from, one record read lazily (each part on its first use, once per evidence): the
stored runs' part (:class:`StoredRuns`: each speculation grid, the GPU ceilings, the norm kernel, the communication
curves and probes, the in-pass points, the engine runs' cells) and the evidence's (:class:`StoredInputs`: that, the
public tables and the reported figures). The fits and the case study's pricing take a record; none of them reads the
store."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

import pandas as pd

from verifylab.derived import DerivedCache, derived
from verifylab.errors import ModelInputError, VerifylabError
from verifylab.model.inputs.curves import (
    BoxProbe,
    Curve,
    NormRead,
    in_pass_factors,
    norm_read,
    norm_us_measured,
    stored_curves,
)
from verifylab.model.inputs.engine_cells import EngineCells, read_engine_cells
from verifylab.model.inputs.gpus import Ceilings, gpu_key_in, gpu_key_or_name
from verifylab.model.inputs.grids import POINTS_TABLE, GridRead, grid_read, grid_runs, measured_ceilings
from verifylab.model.inputs.probes import box_probe, campaign_host_nccl, host_memory_curve, nccl_eager_over_graph
from verifylab.model.inputs.public_curves import PublicCurve, public_curves
from verifylab.model.inputs.traces import InPassPoint, LivePair, live_pairs, live_points, synthetic_points
from verifylab.sources import MeasuredRuns, ModelSources
from verifylab.vocab import KIMI_K2_HIDDEN


@dataclass(frozen=True)
class NvlinkRead:
    """NVLink's all-reduce curves from the newest stored run that timed one (2 x H200): NCCL's and the fused
    one-shot kernel's."""

    run_id: str
    nccl: Curve
    fused: Curve | None


T = TypeVar("T")


class Part(Generic[T]):
    """A part of the stored runs' record, read on its first use, once per set of runs, by its reader in
    :data:`PARTS` (:func:`_read_part`): the record's one accessor."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, record: None, owner: type) -> Part[T]: ...

    @overload
    def __get__(self, record: StoredRuns, owner: type) -> T: ...

    def __get__(self, record: StoredRuns | None, owner: type) -> Part[T] | T:
        if record is None:
            return self
        part: T = _read_part(record._runs, self.name)
        return part


@dataclass(frozen=True)
class RunTable:
    """One run's table as the record read it: the run, its GPU's key (``h200``; the GPU's name where none is known)
    and the table (shared by every reader: never changed in place)."""

    run_id: str
    gpu: str
    frame: pd.DataFrame


@dataclass(frozen=True, eq=False)
class StoredRuns:
    """What the model takes from the stored runs (:func:`stored_runs`), each part read on its first use and once per
    set of runs (kept with the runs' derived values). A part whose tables do not read raises where it is used, naming
    what it is and why, so an answer that needs none of it is still given."""

    where: str
    _runs: MeasuredRuns = field(repr=False)

    grid_ids = Part[tuple[str, ...]]()  # the grids that are evidence, oldest first (measured again: the newest)
    ceilings = Part[Ceilings | None]()  # the newest measured GPU ceilings, of any GPU
    norm = Part[NormRead | None]()
    host_memory = Part[tuple[Curve | None, str | None]]()
    probe = Part[BoxProbe | None]()
    in_pass_points = Part[tuple[InPassPoint, ...]]()  # the synthetic passes' points, then the live ones'
    nvlink = Part[NvlinkRead | None]()
    engine = Part[EngineCells]()  # the engine runs' context cells and target configs (empty where none is stored)
    campaign_host_nccl = Part[tuple[str, pd.Series] | None]()  # the newest campaign's NCCL without P2P by tokens

    @property
    def derived_cache(self) -> DerivedCache:
        """The runs' cache: a value derived from this record is kept with the runs it was read from."""
        return self._runs.derived_cache

    def grid(self, run_id: str) -> GridRead:
        """Grid run ``run_id`` as read (on its first use, once), or an error naming the grids there are: a grid that
        is evidence and does not read names itself; another run's grid that does not read is no grid."""
        found = _grid(self._runs, run_id) if run_id in self._runs.runs_with_table(POINTS_TABLE) else None
        if found is None:
            have = ", ".join(self.grid_ids) or "none"
            raise ModelInputError(f"run {run_id} is no speculation grid under {self.where} (grids: {have})")
        return found

    def grids(self) -> Iterator[GridRead]:
        """The grids that are evidence, oldest first, each read when the caller comes to it."""
        return (self.grid(run_id) for run_id in self.grid_ids)

    def run_tables(self, name: str) -> tuple[RunTable, ...]:
        """Every run's table ``name``, oldest first, each read once."""
        return _run_tables(self._runs, name)

    def stacked(self, name: str) -> pd.DataFrame:
        """Every run's table ``name`` in one frame with its run id and GPU key (a frame of the caller's own)."""
        frames = [t.frame.assign(run=t.run_id, gpu=t.gpu) for t in self.run_tables(name)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def parameters(self, run_id: str) -> Mapping[str, Any]:
        """What run ``run_id``'s manifest records it ran with."""
        return self._runs.run(run_id).parameters

    def gpu_key_of(self, run_id: str) -> str:
        """The table's key of the GPU run ``run_id`` ran on (its GPU name, else its label; h200 where neither names
        one), as its grid would be keyed."""
        run = self._runs.run(run_id)
        return gpu_key_in(run.gpu_name or run.label) or "h200"

    def newest_with(self, *names: str) -> str | None:
        """The newest run holding every table in ``names`` (None: no run does)."""
        return self._runs.newest_with(*names)

    def runs_with_all(self, names: tuple[str, ...]) -> list[str]:
        """The runs holding every table in ``names``, oldest first."""
        return self._runs.runs_with_all(names)

    def table(self, run_id: str, name: str) -> pd.DataFrame:
        """Run ``run_id``'s table ``name`` (a frame of the caller's own), or an error naming what the run holds."""
        return self._runs.read_table(run_id, name)

    def curves(self, run_id: str) -> list[Curve]:
        """Run ``run_id``'s all-reduce curves at Kimi-K2's hidden size (read and built once)."""
        return list(stored_curves(self._runs, run_id, KIMI_K2_HIDDEN))

    def eager_over_graph(self, tokens: int) -> tuple[float, str] | None:
        """NCCL eager / graph at ``tokens`` on the newest healthy-P2P probe that timed both, and its run id."""
        return nccl_eager_over_graph(self._runs, tokens)

    def norm_us(self, tokens: float) -> tuple[float, str] | None:
        """The measured norm kernel at ``tokens`` and its source (None: no run measured it)."""
        return norm_us_measured(self._runs, tokens)

    def in_pass_factors(self) -> dict[tuple[str, str], float]:
        """One all-reduce inside a synthetic pass over its isolated latency, per (path, impl), from the newest
        campaign's traces."""
        return in_pass_factors(self._runs)

    def live_pairs(self) -> tuple[LivePair, ...]:
        """The live TP-2 runs' baseline and fusion passes, paired."""
        return live_pairs(self._runs)

    def ceilings_of(self, gpu_key: str) -> Ceilings | None:
        """The newest measured ceilings of the GPU ``gpu_key`` names (None where none was measured), read once."""
        return measured_ceilings(self._runs, gpu_key)


UNREADABLE = (VerifylabError, KeyError, ValueError, TypeError, IndexError)  # what a table that does not hold its
# columns or values raises in a reader


@derived
def _public_curves(ev: ModelSources) -> tuple[PublicCurve, ...]:
    return tuple(public_curves(ev))


class FromEvidence(Generic[T]):
    """A table of the evidence as the record gives it: read by the evidence itself on its first use."""

    def __init__(self, read: Callable[[ModelSources], T]) -> None:
        self.read = read

    @overload
    def __get__(self, record: None, owner: type) -> FromEvidence[T]: ...

    @overload
    def __get__(self, record: StoredInputs, owner: type) -> T: ...

    def __get__(self, record: StoredInputs | None, owner: type) -> FromEvidence[T] | T:
        return self if record is None else self.read(record._ev)


@dataclass(frozen=True, eq=False)
class StoredInputs:
    """What the model takes from one evidence (:func:`stored_inputs`): the stored runs' part, the public tables
    (measurements, speculation curves, per-context matrices) and the case study's reported figures, each read on
    its first use."""

    runs: StoredRuns
    _ev: ModelSources = field(repr=False)

    figures = FromEvidence[pd.DataFrame](lambda ev: ev.figures)  # the case study's reported figures
    public = FromEvidence[pd.DataFrame](lambda ev: ev.public)  # public all-reduce measurements by transport
    public_curves = FromEvidence[tuple[PublicCurve, ...]](lambda ev: _public_curves(ev))  # read once per evidence
    public_context = FromEvidence[pd.DataFrame](lambda ev: ev.public_context)  # public per-context matrices
    fusion_forensics = FromEvidence[pd.DataFrame](  # chapter 1's audited wheels (empty without a gate matrix)
        lambda ev: ev.fusion_forensics if ev.has_gate_matrix else pd.DataFrame()
    )

    @property
    def derived_cache(self) -> DerivedCache:
        """The evidence's cache: a value derived from this record is kept with the evidence it was read from."""
        return self._ev.derived_cache


def _nvlink_read(runs: MeasuredRuns) -> NvlinkRead | None:
    for run_id in reversed(runs.runs_with_table("allreduce_latency")):
        curves = [c for c in stored_curves(runs, run_id, KIMI_K2_HIDDEN) if c.path == "nvlink"]
        nccl = next((c for c in curves if c.impl == "nccl"), None)
        if nccl is not None:
            return NvlinkRead(run_id, nccl, next((c for c in curves if c.impl == "fused"), None))
    return None


@derived
def _run_tables(runs: MeasuredRuns, name: str) -> tuple[RunTable, ...]:
    return tuple(
        RunTable(r, gpu_key_or_name(runs.run(r).gpu_name), runs.read_table(r, name)) for r in runs.runs_with_table(name)
    )


@derived
def _grid(runs: MeasuredRuns, run_id: str) -> GridRead | None:
    """Grid run ``run_id`` read once: a grid that is evidence and does not read raises its own error; another run's
    grid that does not read is None (no grid; naming it is an error at its use)."""
    try:
        return grid_read(runs, run_id)
    except VerifylabError:
        if run_id in grid_runs(runs):
            raise
        return None


PARTS: dict[str, tuple[str, Callable[[MeasuredRuns], object]]] = {  # each part: what it is (its tables), its reader
    "grid_ids": ("the speculation grids (table points)", lambda runs: tuple(grid_runs(runs))),
    "ceilings": ("the GPU ceilings (table ceilings)", measured_ceilings),
    "norm": ("the norm kernel (table norm_fusion)", norm_read),
    "host_memory": ("the curve through host memory (tables verdict, allreduce_latency)", host_memory_curve),
    "probe": ("the box's probe (tables verdict, allreduce_latency)", box_probe),
    "in_pass_points": (
        "the in-pass points (tables verify_pass_trace, allreduce_latency, trace_steps)",
        lambda runs: (*synthetic_points(runs), *live_points(runs)),
    ),
    "nvlink": ("the NVLink curves (table allreduce_latency)", _nvlink_read),
    "engine": ("the engine runs' cells (table context_cells)", read_engine_cells),
    "campaign_host_nccl": ("the campaign's NCCL without P2P (table allreduce_latency)", campaign_host_nccl),
}


@derived
def _read_part(runs: MeasuredRuns, name: str) -> Any:
    """Part ``name`` of the record, read from ``runs`` once; a part whose tables do not read is one error naming
    it (a grid is read on its own, :meth:`StoredRuns.grid`: a grid that is evidence and does not read names itself)."""
    what, reader = PARTS[name]
    try:
        return reader(runs)
    except UNREADABLE as exc:
        raise ModelInputError(f"{runs.where}: {what} did not read: {type(exc).__name__}: {exc}") from None


def stored_runs(runs: MeasuredRuns) -> StoredRuns:
    """Everything the model takes from ``runs``, each part read on its first use, once per set of runs."""
    return StoredRuns(runs.where, runs)


def stored_inputs(ev: ModelSources) -> StoredInputs:
    """Everything the model takes from ``ev``, each part read on its first use, once per evidence."""
    return StoredInputs(stored_runs(ev.measured), ev)
