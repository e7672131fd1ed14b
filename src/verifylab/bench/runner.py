"""Run the single-stream method and sweeps against a URL, storing into a run (resumable), with progress."""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from verifylab.bench.client import REQUEST_DEADLINE_S, Client
from verifylab.bench.method import (
    BenchRecorder,
    SingleStreamConfig,
    cell_summary,
    single_stream,
    single_stream_summary,
    sweep_cell,
)
from verifylab.bench.prompts import Prompt, load_prompts
from verifylab.errors import BenchmarkError
from verifylab.server.aio import run_coroutine
from verifylab.store.runs import RunStore

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class RunPlace:
    """Where a campaign's measurements go: the run (created, or resumed by its id) in ``data_dir``, its label, and
    whether it measures the mechanism only and of which campaign it is."""

    data_dir: Path
    run_id: str
    label: str
    mechanics_only: bool = False
    campaign: str = ""


BENCH_PURPOSE = "benchmark of an SGLang server"  # what a benchmark's runs say they are (their manifest's purpose)


def open_recorder(
    data_dir: Path, run_id: str, label: str, parameters: dict, mechanics_only: bool = False, campaign: str = ""
) -> BenchRecorder:
    """The run to write into: resumed when it exists and a benchmark made it, created (status partial) otherwise; a
    stored run another command made (a probe, a grid, a check) is refused, naming it: a benchmark never writes into
    it, nor marks it a test double."""
    store = RunStore(Path(data_dir) / "runs")
    if store.exists(run_id) and store.manifest(run_id).purpose != BENCH_PURPOSE:
        raise BenchmarkError(
            f"--run-id {run_id}: a stored run that a benchmark did not make ({store.manifest(run_id).purpose}): "
            "measure into a new run id"
        )
    store.open_or_create(
        run_id,
        label,
        parameters,
        BENCH_PURPOSE,
        status="partial",
        with_torch=False,
        mechanics_only=mechanics_only,
        campaign=campaign,
    )
    return BenchRecorder(store, run_id)


def run_single(
    url: str,
    cfg: SingleStreamConfig,
    api: str = "generate",
    prompts: list[Prompt] | None = None,
    recorder: BenchRecorder | None = None,
    variant: str = "server",
    progress: Progress | None = None,
    stall_s: float = 60.0,
) -> dict:
    """The single-stream method against ``url``; the summary (and, with a recorder, stored tables)."""
    if recorder:
        recorder.check_names(variant)
    prompts = prompts or load_prompts()

    async def go() -> dict:
        async with Client(url, api, stall_s=stall_s) as client:
            results, server_accept = await single_stream(
                client, cfg, prompts, (lambda d, t: progress(variant, d, t)) if progress else None
            )
        if recorder and client.saw_test_double:
            recorder.store.mark_test_double(recorder.run_id)
        summary = single_stream_summary(results, server_accept)
        if recorder:
            recorder.save_single(variant, results, summary)
        return summary

    with recorder.measuring() if recorder else contextlib.nullcontext():
        return run_coroutine(go())


def ensure_open_files(concurrency: int, spare: int = 64) -> None:
    """C streams hold C sockets: raise the soft open-file limit to cover them (up to the hard limit), or refuse
    before any request with one line that says what to change."""
    need = concurrency + spare
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    allowed = need if hard == resource.RLIM_INFINITY else min(need, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (allowed, hard))
    if allowed < need:
        raise BenchmarkError(
            f"concurrency {concurrency} needs about {need} open files, and this process may open at most {hard} "
            "(ulimit -Hn): lower --concurrency or raise the hard limit"
        )


def run_sweep(
    url: str,
    concurrency: list[int],
    max_tokens: int,
    requests_per_cell: int | None = None,
    api: str = "generate",
    prompts: list[Prompt] | None = None,
    recorder: BenchRecorder | None = None,
    variant: str = "server",
    progress: Progress | None = None,
    stall_s: float = 60.0,
    temperature: float = 0.0,
    deadline_s: float = REQUEST_DEADLINE_S,
    stalled: Callable[[str], None] | None = None,
) -> dict:
    """Closed-loop cells at each concurrency; stored cells are skipped (resume); returns the cells and which of
    them failed (a request failed: stored with its errors, not a result, measured again on resume). ``temperature``:
    every request's sampling temperature (0: greedy); ``deadline_s``: each request's (past it, it fails, named);
    ``stalled``: a line while requests wait for a token, before the stall limit fails them."""
    if recorder:
        recorder.check_names(variant, concurrency)
    ensure_open_files(max(concurrency))
    prompts = prompts or load_prompts()
    cells, skipped = [], []

    async def go() -> None:
        async with Client(url, api, timeout_s=deadline_s, stall_s=stall_s, temperature=temperature) as client:
            for c in concurrency:
                if recorder and recorder.has_cell(variant, c):
                    skipped.append(c)
                    continue
                n = requests_per_cell or max(2 * c, 8)
                results, wall = await sweep_cell(
                    client,
                    c,
                    n,
                    max_tokens,
                    prompts,
                    partial(progress, f"{variant} C={c}") if progress else None,
                    partial(_stalled_line, stalled, f"{variant} C={c}", stall_s) if stalled else None,
                )
                summary = cell_summary(results, wall, c)
                cells.append(summary)
                if recorder:
                    if client.saw_test_double:  # before the cell is stored: it never counts as evidence
                        recorder.store.mark_test_double(recorder.run_id)
                    recorder.save_cell(variant, c, results, summary)

    with recorder.measuring() if recorder else contextlib.nullcontext():
        run_coroutine(go())
    failed = [c for c in cells if c.get("failed")]
    return {"cells": cells, "skipped_concurrency": skipped, "failed_cells": failed}


def _stalled_line(say: Callable[[str], None], cell: str, stall_s: float, waiting: int, longest: float) -> None:
    say(
        f"  {cell}: {waiting} request(s) waiting for a token, the longest {longest:.0f} s (a request fails at "
        f"{stall_s:g} s without one)"
    )


def failure_line(cells: list[dict]) -> str:
    """One line for the failed cells of a sweep (or the runs of a bench): which, how many requests, why."""
    parts = []
    for cell in cells:
        errors = "; ".join(cell.get("errors") or []) or "no error text"
        parts.append(f"C={cell['concurrency']}: {cell['failed']} of {cell['requests']} requests failed ({errors})")
    return "; ".join(parts) + " — not results: measured again on resume"


def mark_complete(recorder: BenchRecorder, status: Literal["complete", "failed"] = "complete") -> None:
    """Close the run: ``complete`` when it holds what was asked, ``failed`` when nothing was measured."""
    recorder.store.set_status(recorder.run_id, status)
