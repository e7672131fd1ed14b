"""Which stored runs a chapter shows: of the runs that repeat one experiment — the same campaign, hardware label, GPU
and parameters — the newest. The older ones keep their run pages and their rows in the runs index; a chapter's work
then grows with the experiments stored, not with how often each was repeated."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, TypeVar


class RunRecord(Protocol):
    """What identifies a run's experiment (a manifest, or a run as the model reads it)."""

    @property
    def run_id(self) -> str: ...
    @property
    def created(self) -> datetime: ...
    @property
    def label(self) -> str: ...
    @property
    def gpu_name(self) -> str | None: ...
    @property
    def campaign(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, Any]: ...


R = TypeVar("R", bound=RunRecord)


def experiment_key(run: RunRecord) -> tuple[str, str, str, str]:
    """(campaign, label, GPU, parameters as canonical JSON): equal for runs that repeat one experiment."""
    parameters = json.dumps(dict(run.parameters), sort_keys=True, default=str)
    return run.campaign, run.label, run.gpu_name or "", parameters


def newest_of_each_experiment(runs: Iterable[R]) -> list[R]:
    """The newest run (by creation time, then id) of each experiment, in run-id order."""
    newest: dict[tuple[str, str, str, str], R] = {}
    for run in runs:
        key = experiment_key(run)
        if key not in newest or (run.created, run.run_id) > (newest[key].created, newest[key].run_id):
            newest[key] = run
    return sorted(newest.values(), key=lambda r: r.run_id)
