"""The stored engine runs as the model reads them (``benchmarks/engine_reads``): every context cell (one per GPU,
target shape, backend, mode, context and streams; a later run's cell wins, never over another GPU's) and each target
shape's config as its run recorded it. Read once into the record (:mod:`verifylab.model.inputs.stored`); the fits of
the verify kernels take it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from verifylab.model.inputs.gpus import gpu_key_or_name
from verifylab.sources import MeasuredRuns

CONTEXT_CELLS = "context_cells"
KEY = ["gpu", "shape", "backend", "mode", "context", "streams"]


@dataclass(frozen=True)
class EngineCells:
    """The context cells of every stored engine run (with their run and GPU) and each target's recorded config."""

    cells: pd.DataFrame = field(repr=False)
    configs: Mapping[str, dict] = field(default_factory=dict)

    def layers(self, shape: str) -> int | None:
        """The layer count of target ``shape`` as its run recorded it."""
        config = self.configs.get(shape)
        return int(config["num_hidden_layers"]) if config and "num_hidden_layers" in config else None


def read_engine_cells(runs: MeasuredRuns) -> EngineCells:
    """The engine runs' cells and configs, read once."""
    frames: list[pd.DataFrame] = []
    configs: dict[str, dict] = {}
    for run_id in runs.runs_with_table(CONTEXT_CELLS):
        run = runs.run(run_id)
        frames.append(runs.read_table(run_id, CONTEXT_CELLS).assign(run=run_id, gpu=gpu_key_or_name(run.gpu_name)))
        for shape, pair in run.parameters.get("configs", {}).items():
            configs.setdefault(shape, pair.get("target", pair))
    cells = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not cells.empty:
        cells = cells.drop_duplicates(KEY, keep="last").reset_index(drop=True)
    return EngineCells(cells, configs)
