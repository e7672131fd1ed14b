"""Speculation under load with controlled acceptance: plain decoding and speculative servers (EAGLE-3 and an NGRAM
chain, each at a chosen number of draft tokens) whose mean accept length SGLang itself fixes
(``SGLANG_SIMULATE_ACC_LEN``), each swept over the same stream counts into one run.

The cost side is real (every verify pass processes every draft token; EAGLE-3's draft model runs) and only the
acceptance is chosen, so gain against concurrency can be measured per accept length on any model shape served
with random weights. One server at a time holds the GPU while it is measured; a stored cell is never measured
again (resume by run id)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verifylab.bench.client import REQUEST_DEADLINE_S, Client
from verifylab.bench.method import server_accept_length
from verifylab.bench.prompts import Prompt
from verifylab.bench.runner import RunPlace, mark_complete, open_recorder, run_sweep
from verifylab.bench.speculation_grid import SpecPoint, SpeculationGrid
from verifylab.errors import BenchmarkError, ServerError
from verifylab.server.aio import run_coroutine
from verifylab.server.launch import launcher_help, serve
from verifylab.server.server_log import effective_state
from verifylab.server.variants import BaseConfig
from verifylab.vocab import SPECULATION_POINTS_TABLE

POINTS_TABLE = SPECULATION_POINTS_TABLE


Progress = Callable[[str], None]


def _progress_log(path: Path, also: Progress | None) -> Progress:
    """Each progress line appended to ``path`` (the run's logs/speculation.log, with the time of day) and given to
    ``also``: what a GPU box did is kept with the run, whatever shows it."""

    def say(line: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        if also is not None:
            also(line)

    return say


def run_speculation_grid(
    base: BaseConfig,
    grid: SpeculationGrid,
    place: RunPlace,
    seed: int = 0,
    health_timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Start each server of ``grid`` in a seeded random order, sweep it, store its cells and a row of
    :data:`POINTS_TABLE` (drafter, draft tokens, accept length asked for, measured and reported by the server);
    skip a server whose cells are all stored. A server that fails is recorded and the grid goes on (the run stays
    ``partial`` until a later call measures it); raises ServerError (rows stored) when none started."""
    parameters = {"base": base.model_dump(), "speculation": grid.model_dump(mode="json"), "seed": seed}
    points = grid.points()
    random.Random(seed).shuffle(points)  # drift must not masquerade as an effect of speculation
    return run_points(
        base,
        points,
        SweepPlan(grid.concurrency, grid.tokens, grid.requests_per_cell, grid.temperature),
        RunTarget(place.data_dir, place.run_id, place.label, parameters, place.mechanics_only, place.campaign),
        health_timeout_s,
        progress,
    )


@dataclass(frozen=True)
class SweepPlan:
    """What each server is swept over: stream counts, output tokens per request, requests per cell, temperature."""

    concurrency: list[int]
    tokens: int
    requests_per_cell: int | None = None
    temperature: float = 0.0
    prompts: tuple[Prompt, ...] = ()  # what each request sends (default: the shipped prompt set)
    deadline_s: float = REQUEST_DEADLINE_S  # each request's: past it, it fails, named


@dataclass(frozen=True)
class RunTarget:
    """The run the servers' cells go into (created, or resumed by its id)."""

    data_dir: Path
    run_id: str
    label: str
    parameters: dict
    mechanics_only: bool = False
    campaign: str = ""
    points_table: str = POINTS_TABLE  # one row per server (box --verify keeps its own: never a grid to fit)


def run_points(
    base: BaseConfig,
    points: list[SpecPoint],
    sweep: SweepPlan,
    target: RunTarget,
    health_timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Start each server of ``points`` in turn (never two at once), sweep it and store its cells and its row of
    :data:`POINTS_TABLE`; a server whose cells are all stored is skipped (resume). A server that fails is recorded
    with its error and the next one starts; raises ServerError (rows stored) when none started. The server is stopped
    whatever happens, Ctrl-C included (the cells measured so far are stored)."""
    help_text = launcher_help(base.launcher)
    recorder = open_recorder(
        target.data_dir,
        target.run_id,
        target.label,
        {**target.parameters, **served_configs(base)},
        mechanics_only=target.mechanics_only,
        campaign=target.campaign,
    )
    run_id = target.run_id
    stored = recorder.store.table_or_none(run_id, target.points_table)
    rows = [] if stored is None else stored.to_dict("records")
    log_dir = recorder.store.path(run_id) / "logs"
    say = _progress_log(log_dir / "speculation.log", progress)
    with recorder.measuring():
        for i, point in enumerate(points, 1):
            done = all(recorder.has_cell(point.name, c) for c in sweep.concurrency)
            if done:
                say(f"[{i}/{len(points)}] {point.name}: stored, skipped")
                continue
            say(f"[{i}/{len(points)}] {point.name}: starting")
            row = _point_row(point)
            try:
                with serve(base, point.variant(), log_dir, health_timeout_s, help_text) as (server, state):
                    row |= state.as_row()
                    say(f"[{i}/{len(points)}] {point.name}: serving ({state.speculative_algorithm or 'plain'})")
                    result = run_sweep(
                        server.url,
                        sweep.concurrency,
                        sweep.tokens,
                        sweep.requests_per_cell,
                        recorder=recorder,
                        variant=point.name,
                        progress=_cells_to(say),
                        temperature=sweep.temperature,
                        prompts=list(sweep.prompts) or None,
                        deadline_s=sweep.deadline_s,
                        stalled=say,
                    )
                    if point.drafter is not None:  # the server's own running average, a cross-check of the target
                        row["server_accept_length"] = run_coroutine(_server_accept(server.url))
                    row["failed_cells"] = len(result["failed_cells"])
                    # the log as the sweep left it: a collective that fell back after start-up (PCIe-IPC sizes its
                    # workspace on the first reduction) measured another one, and the state says so
                    row |= effective_state(point.variant(), state.server_args, server.log_text()).as_row()
            except ServerError as exc:
                row |= {"active": False, "failure": str(exc)}
            except BenchmarkError as exc:  # the server started but could not be measured: the grid goes on
                row |= {"failure": f"measuring failed: {exc}"}
            rows = [r for r in rows if r["variant"] != point.name] + [row]
            recorder.store.write_table(run_id, target.points_table, pd.DataFrame(rows))
            say(f"[{i}/{len(points)}] {point.name}: {row['failure'] or 'measured'}")
    nothing = bool(rows) and all(r.get("failure") for r in rows)
    short = any(r.get("failure") or r.get("failed_cells") for r in rows)  # resumable: measured again on the next call
    if nothing:
        mark_complete(recorder, "failed")
    elif short:
        recorder.store.set_status(run_id, "partial")
    else:
        mark_complete(recorder, "complete")
    if nothing:
        raise ServerError(f"no server started, nothing was measured; first failure: {rows[0]['failure']}")
    return pd.DataFrame(rows)


def served_configs(base: BaseConfig) -> dict[str, dict]:
    """The served models' ``config.json`` (target and draft) where readable here: what the cost model prices a
    run's measurements from (``served_config``, ``draft_config``); nothing for a hub name or an unreadable file."""
    out = {}
    for key, folder in (("served_config", base.model_path), ("draft_config", base.draft_model_path)):
        file = Path(folder) / "config.json" if folder else None
        if file is None or not file.is_file() or file.stat().st_size > 1_000_000:
            continue
        try:
            value = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(value, dict):
            out[key] = value
    return out


def _cells_to(say: Progress) -> Callable[[str, int, int], None]:
    """A sweep's per-request progress as one line per finished cell."""

    def cell(label: str, done: int, total: int) -> None:
        if done == total:
            say(f"  {label}: {done} requests")

    return cell


def _point_row(point: SpecPoint) -> dict:
    return {
        "variant": point.name,
        "drafter": point.drafter.value if point.drafter else "none",
        "draft_tokens": point.draft_tokens or 1,
        "accept_target": point.accept_length or 1.0,
        "server_accept_length": None,
        "failed_cells": 0,
    }


async def _server_accept(url: str) -> float | None:
    async with Client(url) as client:
        return await server_accept_length(client)
