"""Speculation grids as the model reads them: each sweep (plain, or a drafter at its draft tokens and accept length,
ms per token by stream count), the configs a run served, how its router routed, and a GPU's measured ceilings."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.model.inputs.configs import costs_from_config
from verifylab.model.inputs.gpus import Ceilings, gpu_key_in
from verifylab.model.inputs.model_costs import ModelCosts, Routing
from verifylab.selection import newest_of_each_experiment
from verifylab.sources import MeasuredRun, MeasuredRuns
from verifylab.span import Span
from verifylab.vocab import SPECULATION_POINTS_TABLE, Drafter

POINTS_TABLE = SPECULATION_POINTS_TABLE


@dataclass(frozen=True)
class Sweep:
    """One server of a speculation grid: its decode-phase ms per token (mean over requests) at each stream count."""

    run_id: str
    variant: str
    drafter: Drafter | None
    draft_tokens: int
    accept_target: float
    accept_measured: float | None
    ms_per_token: tuple[tuple[int, float], ...]

    @property
    def key(self) -> tuple[str, int, float]:
        return (self.drafter.value if self.drafter else "none", self.draft_tokens, self.accept_target)


ACCEPT_TOLERANCE = 0.05  # a sweep whose measured accept length misses its target by more is no sweep at it


def grid_runs(runs: MeasuredRuns) -> list[str]:
    """Runs that hold a speculation grid and may be evidence, oldest first: a run marked mechanics only (a test
    double's) is never one, and of a grid measured again with the same parameters the newest run stands for it
    (:mod:`verifylab.selection`)."""
    grids = [runs.run(r) for r in runs.runs_with_table(POINTS_TABLE) if not runs.run(r).mechanics_only]
    return [r.run_id for r in newest_of_each_experiment(grids)]


def grid_requests(runs: MeasuredRuns, run_id: str) -> pd.DataFrame:
    """Every request of a grid run, with its server's drafter, draft tokens and accept length asked for (a copy:
    the caller may change it)."""
    return _grid_requests(runs, run_id).copy()


@derived
def _grid_requests(runs: MeasuredRuns, run_id: str) -> pd.DataFrame:
    run = runs.run(run_id)
    points = runs.read_table(run_id, POINTS_TABLE)
    frames = [runs.read_table(run_id, t) for t in sorted(run.tables) if t.startswith("sweep-")]
    if not frames:
        return pd.DataFrame()
    requests = pd.concat(frames, ignore_index=True)
    requests = requests[requests["ok"].astype(bool) & requests["tpot_s"].notna()]
    keep = ["variant", "drafter", "draft_tokens", "accept_target", "active"]
    return requests.merge(points[keep], on="variant", how="inner").assign(run_id=run_id)


@derived
def sweeps(runs: MeasuredRuns, run_id: str) -> tuple[Sweep, ...]:
    """The run's sweeps of servers that were active and held the accept length asked of them (within
    :data:`ACCEPT_TOLERANCE`: a server that ignored it is no sweep at that length), each with its mean ms per token
    by stream count."""
    return _sweeps_of(run_id, _grid_requests(runs, run_id))


def _sweeps_of(run_id: str, requests: pd.DataFrame) -> tuple[Sweep, ...]:
    """The sweeps of a grid run's requests (:func:`sweeps`)."""
    out = []
    keys = ["variant", "drafter", "draft_tokens", "accept_target"]
    for (variant, drafter, k, target), part in requests.groupby(keys):
        if not part["active"].astype(bool).all():
            continue
        by_c = part.groupby("concurrency")["tpot_s"].mean().sort_index()
        accept = token_weighted_accept(part)
        if drafter != "none" and (accept is None or abs(accept / float(target) - 1) > ACCEPT_TOLERANCE):
            continue
        out.append(
            Sweep(
                run_id,
                str(variant),
                None if drafter == "none" else Drafter(drafter),
                int(k),
                float(target),
                accept,
                tuple((int(c), float(v) * 1e3) for c, v in by_c.items()),
            )
        )
    return tuple(out)


def token_weighted_accept(requests: pd.DataFrame) -> float | None:
    """Tokens over verify passes of the requests that report passes; None when none does."""
    counted = requests.dropna(subset=["spec_verify_ct"])
    return float(counted["output_tokens"].sum() / counted["spec_verify_ct"].sum()) if not counted.empty else None


def _mean_context_of(run_id: str, requests: pd.DataFrame) -> float:
    """Tokens of KV a stream attends over on average in a run: its prompt plus half its output."""
    if requests.empty:
        raise ModelInputError(f"run {run_id}: no successful request to take the context from")
    return float((requests["prompt_tokens"] + requests["output_tokens"] / 2).mean())


def _served_costs_of(run: MeasuredRun) -> tuple[ModelCosts, ModelCosts | None]:
    """The target (and draft) the run served, from the configs its manifest records."""
    params = run.parameters
    if not isinstance(params.get("served_config"), dict):
        raise ModelInputError(f"run {run.run_id} records no served_config: its model cannot be priced")
    target = costs_from_config(params["served_config"], f"run {run.run_id} served_config")
    draft = params.get("draft_config")
    return target, costs_from_config(draft, f"run {run.run_id} draft_config") if isinstance(draft, dict) else None


@derived
def measured_ceilings(runs: MeasuredRuns, gpu: str | None = None) -> Ceilings | None:
    """The newest measured copy and matrix ceilings (of ``gpu`` when given): the copy bandwidth, and the matrix
    rate as the range over the runs of that GPU (a repeated experiment: its newest run)."""
    stored = [runs.run(r) for r in runs.runs_with_table("ceilings")]
    measured = [r.run_id for r in newest_of_each_experiment(stored)]
    for run_id in sorted(measured, reverse=True):
        run = runs.run(run_id)
        key = gpu_key_in(run.gpu_name or run.label or run_id) or gpu_key_in(run_id)
        if key is None or (gpu is not None and key != gpu):
            continue
        same = [
            runs.read_table(r, "ceilings")
            for r in measured
            if (gpu_key_in(runs.run(r).gpu_name or runs.run(r).label or r) or gpu_key_in(r)) == key
        ]
        table = pd.concat(same, ignore_index=True)
        copy = float(np.median(table["copy_bandwidth_gbs"]))
        tf = Span(float(table["matmul_tflops"].min()), float(table["matmul_tflops"].max()))
        return Ceilings(key, copy, tf, f"{len(same)} measured run(s), newest {run_id}")
    return None


def grid_routing(runs: MeasuredRuns, run_id: str) -> Routing:
    """How a grid run's random router routed plain decoding: uniform where its tokens diverged (requests sampled at
    a temperature > 0, speculative servers accepting the draft's own tokens), collapsed otherwise (greedy, one
    repeated token)."""
    return _routing_of(runs.run(run_id))


def _routing_of(run: MeasuredRun) -> Routing:
    """How the run's router routed plain decoding (:func:`grid_routing`)."""
    spec = run.parameters.get("speculation")
    if not isinstance(spec, dict):
        return Routing.COLLAPSED
    temperature = spec.get("temperature", 0.0)
    spread = isinstance(temperature, int | float) and temperature > 0 and spec.get("token_mode") == "real-draft-token"
    return Routing.UNIFORM if spread else Routing.COLLAPSED


def _speculative_routing_of(run: MeasuredRun) -> Routing:
    """How a grid run's speculative servers routed: collapsed where the draft model loaded random weights (its
    greedy picks repeat one token, and the simulated acceptance keeps them as the stream's tokens, whatever the
    sampling), else as plain decoding did."""
    base = run.parameters.get("base")
    args = base.get("extra_args", []) if isinstance(base, dict) else []
    random_draft = any(a == "--speculative-draft-load-format" and b == "dummy" for a, b in pairwise(args))
    return Routing.COLLAPSED if random_draft else _routing_of(run)


@dataclass(frozen=True)
class GridRead:
    """One speculation grid run as read once: the GPU it ran on, how its routers routed, its sweeps, the models it
    served and the context its streams held (a read that failed keeps its message, raised where the value is used)."""

    run_id: str
    gpu_key: str  # h200 where the run names no GPU
    gpu_name: str | None
    served_config: object
    routing: Routing
    speculative_routing: Routing
    sweeps: tuple[Sweep, ...]
    served: tuple[ModelCosts, ModelCosts | None] | None
    served_error: str
    context: float | None
    context_error: str

    def same_box(self, other: GridRead) -> bool:
        """The same served model on the same GPU, its speculative servers routed alike (one's fit prices the
        other's speculative cycles)."""
        return (
            self.served_config == other.served_config
            and self.gpu_name == other.gpu_name
            and self.speculative_routing is other.speculative_routing
        )

    def served_costs(self) -> tuple[ModelCosts, ModelCosts | None]:
        """The target (and draft) the run served, or the error its manifest gave."""
        if self.served is None:
            raise ModelInputError(self.served_error)
        return self.served

    def mean_context(self) -> float:
        """Tokens of KV a stream attended over on average, or the error its requests gave."""
        if self.context is None:
            raise ModelInputError(self.context_error)
        return self.context


def grid_read(runs: MeasuredRuns, run_id: str) -> GridRead:
    """Grid run ``run_id`` read once: its manifest and its requests, and all the model takes from them."""
    run, requests = runs.run(run_id), _grid_requests(runs, run_id)
    served: tuple[ModelCosts, ModelCosts | None] | None
    try:
        served, served_error = _served_costs_of(run), ""
    except ModelInputError as exc:
        served, served_error = None, str(exc)
    context: float | None
    try:
        context, context_error = _mean_context_of(run_id, requests), ""
    except ModelInputError as exc:
        context, context_error = None, str(exc)
    return GridRead(
        run_id=run_id,
        gpu_key=gpu_key_in(run.gpu_name or run.label) or "h200",
        gpu_name=run.gpu_name,
        served_config=run.parameters.get("served_config"),
        routing=_routing_of(run),
        speculative_routing=_speculative_routing_of(run),
        sweeps=_sweeps_of(run_id, requests),
        served=served,
        served_error=served_error,
        context=context,
        context_error=context_error,
    )
