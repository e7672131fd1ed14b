"""Live mode of chapter 02: every variant on the box, in randomized order per repeat, stored in one run."""

from __future__ import annotations

import random
from dataclasses import asdict

import pandas as pd

from verifylab.bench.method import SingleStreamConfig
from verifylab.bench.runner import RunPlace, mark_complete, open_recorder, run_single, run_sweep
from verifylab.errors import ServerError
from verifylab.server.launch import launcher_help, serve
from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig


def run_campaign(
    base: BaseConfig,
    variants: list[str],
    single: SingleStreamConfig,
    concurrency: list[int],
    sweep_tokens: int,
    place: RunPlace,
    repeats: int = 1,
    seed: int = 0,
    health_timeout_s: float = 1800.0,
) -> pd.DataFrame:
    """Run each variant (a server each) ``repeats`` times in a seeded random order; store tables as they finish.

    A variant whose server fails is recorded with its failure and the campaign goes on; returns the variant
    states (requested vs in effect, active or not, failure). Raises ServerError (states stored) when no
    variant started at all."""
    unknown = [v for v in variants if v not in DEFAULT_VARIANTS]
    if unknown:
        raise ServerError(f"unknown variant(s) {unknown}: choose from {', '.join(DEFAULT_VARIANTS)}")
    help_text = launcher_help(base.launcher)
    data_dir, run_id = place.data_dir, place.run_id
    recorder = open_recorder(
        data_dir,
        run_id,
        place.label,
        {
            "base": base.model_dump(),
            "variants": variants,
            "single_stream": asdict(single),
            "concurrency": concurrency,
            "sweep_tokens": sweep_tokens,
            "repeats": repeats,
            "seed": seed,
        },
        mechanics_only=place.mechanics_only,
        campaign=place.campaign,
    )
    rng = random.Random(seed)
    states = []
    log_dir = recorder.store.path(run_id) / "logs"
    with recorder.measuring():  # another process measuring into this run is refused
        for repeat in range(repeats):
            order = variants[:]
            rng.shuffle(order)  # drift must not masquerade as an effect
            for name in order:
                tag = name if repeats == 1 else f"{name}-r{repeat}"
                row = {"variant": name, "repeat": repeat, "order": order.index(name)}
                try:
                    with serve(base, DEFAULT_VARIANTS[name], log_dir, health_timeout_s, help_text) as (server, state):
                        row |= state.as_row()
                        run_single(server.url, single, recorder=recorder, variant=tag)
                        run_sweep(server.url, concurrency, sweep_tokens, recorder=recorder, variant=tag)
                except ServerError as exc:
                    row |= {"active": False, "failure": str(exc)}
                states.append(row)
                recorder.store.write_table(run_id, "variant_state", pd.DataFrame(states), fmt="csv")
    nothing = bool(states) and all(row.get("failure") for row in states)
    mark_complete(recorder, "failed" if nothing else "complete")  # never "complete" with nothing in it
    if nothing:
        raise ServerError(f"no variant started, nothing was measured; first failure: {states[0]['failure']}")
    return pd.DataFrame(states)
