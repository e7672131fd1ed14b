"""`verifylab box --verify`: the configurations a box plan chose (the choice, the runner-up, plain decoding) started
one after another on the box and swept at the plan's stream counts into one run, with the plan (the model's
prediction per cell) in the run's parameters. Servers are started and stopped by ``bench.speculation.run_points``:
never two at once, never one left running, a stored cell never measured again (resume by run id)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from verifylab.bench.client import REQUEST_DEADLINE_S
from verifylab.bench.prompts import Prompt, context_prompts
from verifylab.bench.speculation import RunTarget, SweepPlan, run_points
from verifylab.bench.speculation_grid import SpecPoint, TokenMode
from verifylab.errors import ParameterError
from verifylab.launch import FUSION_BACKEND_FLAG, FUSION_FLAG, FUSION_OFF_FLAG, GRAPH_SETTINGS, option_of
from verifylab.model.answers.box_plan import (
    COLLECTIVE_NAMES,
    OTHER_COLLECTIVE,
    BoxPlan,
    CellPrediction,
    Configuration,
)
from verifylab.server.variants import BaseConfig
from verifylab.vocab import BOX_VERIFY_POINTS_TABLE

POINTS = BOX_VERIFY_POINTS_TABLE


class VerifySettings(BaseModel):
    """How the box's servers are started and driven for the check (a YAML file: ``verifylab box --verify FILE``)."""

    model_config = ConfigDict(extra="forbid")

    base: BaseConfig = Field(description="how SGLang starts on this box: model, draft, launcher, extra flags")
    output_tokens: int = Field(128, ge=2, le=65536, description="output tokens per request")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="every request's sampling temperature")
    hold_accept: bool = Field(
        False,
        description="SGLang holds each speculative server's accept length at the plan's (SGLANG_SIMULATE_ACC_LEN): "
        "for a model served with random weights; a real model's own acceptance otherwise",
    )
    token_mode: TokenMode = Field("real-draft-token", description="with hold_accept: which tokens are accepted")
    label: str = Field("", description="the hardware and model, as the run page names them")
    request_deadline_s: float = Field(
        REQUEST_DEADLINE_S,
        ge=10.0,
        le=86400.0,
        description="each request must finish within this many seconds (its prefill and output tokens at the plan's "
        "slowest rate take far less); past it the request fails, named, and its cell is measured again on resume",
    )


FUSION_SWITCHES = (FUSION_FLAG, FUSION_BACKEND_FLAG, FUSION_OFF_FLAG)  # fusion on or off: a server's, not a file's
ENGINE_SETTINGS = tuple((field, option_of(field)) for field in ("attention_backend", "kv_cache_dtype"))
REMOTE_CODE = option_of("trust_remote_code")
DEFAULT_KV = frozenset({"auto", "bf16", "bfloat16"})  # what a plan that names no KV dtype priced (the model's bf16)


def _named(base: BaseConfig, field: str, flag: str) -> str | None:
    """The value the file gives SGLang's ``flag``: its field, else its extra arguments (``--flag X``, ``--flag=X``)."""
    args = base.extra_args
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    value = getattr(base, field)
    return None if value is None else str(value)


def served_as_priced(plan: BoxPlan, settings: VerifySettings, source: str) -> VerifySettings:
    """``settings`` serving the attention backend and KV dtype the plan priced (its launch line's): set where the file
    names none (SGLang's own default may be another), refused, naming both, where it names another; and
    ``--trust-remote-code`` where the plan's launch line has it (the model's config names remote code)."""
    update: dict[str, str | list[str]] = {}
    fusion = next((a.split("=")[0] for a in settings.base.extra_args if a.split("=")[0] in FUSION_SWITCHES), None)
    if fusion is not None:  # each server gets the all-reduce the plan priced for it: a file-wide switch overrides that
        raise ParameterError(
            f"--verify {source}: {fusion} against the plan's all-reduce per server ({plan.launched} launched): the "
            f"check starts each on the one the plan priced for it (drop {fusion} from the file)"
        )
    for field, flag in ENGINE_SETTINGS:
        priced, named = getattr(plan, field), _named(settings.base, field, flag)
        if priced is None and field == "kv_cache_dtype":  # the model's bf16: any spelling of that default matches
            if named is None or named in DEFAULT_KV:
                continue
            priced = "bf16 (SGLang's default)"
        if priced is None or named == priced:
            continue
        if named is not None:
            raise ParameterError(
                f"--verify {source}: {flag} {named} against the plan's {priced}: the check serves what the plan "
                f"launches (give the plan {flag} {named}, or drop it from the file)"
            )
        update[field] = priced
    if plan.trust_remote_code and REMOTE_CODE not in settings.base.extra_args:  # SGLang refuses the model without
        update["extra_args"] = [*settings.base.extra_args, REMOTE_CODE]
    return settings.model_copy(update={"base": settings.base.model_copy(update=update)}) if update else settings


def served_engine_words(base: BaseConfig) -> str:
    """The attention backend, KV dtype and CUDA graphs the check's servers are started with, in words."""
    named = [f"{flag} {v}" for field, flag in ENGINE_SETTINGS if (v := _named(base, field, flag)) is not None]
    graphs = "CUDA graphs as the file sets them" if _sets_graphs(base) else "decode CUDA graphs up to its cap"
    return ", ".join([*named, graphs])


def _sets_graphs(base: BaseConfig) -> bool:
    """Whether the file sets the servers' CUDA graphs itself (their batch sizes, their cap, or none at all)."""
    return any(a.split("=")[0] in GRAPH_SETTINGS for a in base.extra_args)


def _graphs(config: Configuration, settings: VerifySettings) -> int | None:
    """Decode CUDA graphs up to the configuration's cap, as the plan's launch line sets them, where the file sets none
    of its own (its batch sizes, its cap, or none at all)."""
    return None if _sets_graphs(settings.base) else config.max_running


def point_of(config: Configuration, settings: VerifySettings, collective: str = "nccl") -> SpecPoint:
    """The server of one configuration (its cap on running requests and CUDA graphs up to it, its held accept length
    where asked; SGLang's PCIe-IPC all-reduce or FlashInfer's fusion where the plan priced it: ``collective``)."""
    graphs = _graphs(config, settings)
    pcie_ipc, fusion = collective == "pcie_ipc", collective == "fused"
    if config.drafter is None:
        return SpecPoint(max_running=config.max_running, pcie_ipc=pcie_ipc, cuda_graph_max_bs=graphs, fusion=fusion)
    return SpecPoint(
        config.drafter,
        config.draft_tokens,
        round(config.accept, 2),
        settings.token_mode,
        config.max_running,
        settings.hold_accept,
        pcie_ipc,
        graphs,
        fusion,
    )


def verify_points(plan: BoxPlan, settings: VerifySettings) -> list[SpecPoint]:
    """The servers the check starts, in order: each on the all-reduce the plan priced for it (the one its launch line
    runs; the other all-reduce's best, where the two tie, on that one)."""
    return [point_of(s.priced.config, settings, s.collective) for s in plan.measured_servers]


def plan_record(plan: BoxPlan, settings: VerifySettings) -> dict:
    """The plan as the run's parameters keep it: every measured configuration with its role, its server's name, its
    all-reduce and the model's prediction per stream count (what the page compares the measurement with)."""
    configs = []
    for server in plan.measured_servers:
        config, priced = server.priced.config, server.priced
        configs.append(
            {
                "role": server.role,
                "variant": point_of(config, settings, server.collective).name,
                "configuration": config.words()
                + (f", on {COLLECTIVE_NAMES[server.collective]}" if server.role == OTHER_COLLECTIVE else ""),
                "collective": server.collective,
                "drafter": config.drafter.value if config.drafter else "none",
                "draft_tokens": config.draft_tokens,
                "accept": config.accept,
                "max_running": config.max_running,
                "cells": [_cell(c) for c in priced.cells],
            }
        )
    return {
        "load": plan.load,
        "slo_ttft_ms": plan.slo.ttft_ms,
        "slo_tpot_ms": plan.slo.tpot_ms,
        "streams": list(plan.streams),
        "minutes": plan.minutes,
        "budget_minutes": plan.budget_minutes,
        "context_tokens": plan.context_tokens,
        "stream_cap": plan.stream_cap,
        "collective": plan.collective,
        "configs": configs,
        "inputs": plan.inputs,
    }


def _cell(c: CellPrediction) -> dict:
    return {
        "streams": c.streams,
        "tokens_per_s": [c.tokens_per_s.low, c.tokens_per_s.high],
        "tpot_ms": [c.tpot_ms.low, c.tpot_ms.high],
        "ttft_ms": [c.ttft_ms.low, c.ttft_ms.high],
        "goodput_tokens_per_s": [c.goodput.low, c.goodput.high],
    }


def run_verify(
    plan: BoxPlan,
    settings: VerifySettings,
    data_dir: Path,
    run_id: str,
    progress: Callable[[str], None] | None = None,
    health_timeout_s: float = 900.0,
) -> pd.DataFrame:
    """Measure the plan's configurations into run ``run_id`` (created, or resumed); the servers' rows."""
    base = settings.base.model_copy(update={"extra_args": _without_cap(settings.base.extra_args)})
    points = verify_points(plan, settings)
    parameters = {"base": base.model_dump(), "box_plan": plan_record(plan, settings), "verify": settings.model_dump()}
    prompts = verify_prompts(plan)
    return run_points(
        base,
        points,
        SweepPlan(
            list(plan.streams),
            settings.output_tokens,
            None,
            settings.temperature,
            tuple(prompts),
            settings.request_deadline_s,
        ),
        RunTarget(data_dir, run_id, settings.label or "box --verify", parameters, points_table=POINTS),
        health_timeout_s,
        progress,
    )


def verify_prompts(plan: BoxPlan) -> list[Prompt]:
    """What the check sends: at a stated context, prompts of exactly that many tokens with prefixes of their own (as
    many as the largest cell sends, so no two requests share a cached prefix); else the shipped prompt set (empty)."""
    if plan.context_tokens is None:
        return []
    return context_prompts(max(2 * max(plan.streams), 8), plan.context_tokens)


def _without_cap(args: list[str]) -> list[str]:
    """The base's flags less its own ``--max-running-requests N``: each configuration sets its cap."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--max-running-requests":
            skip = True
            continue
        out.append(arg)
    return out
