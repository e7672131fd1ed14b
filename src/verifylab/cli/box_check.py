"""``verifylab box --plan`` / ``--verify``: the plan's answer printed (the choice, the runner-up and the plan that
measures them; :mod:`verifylab.model.answers.plan_answer` computes it, no GPU), then the measurement on the box and
the model's error."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.table import Table

from verifylab.cli._shared import console, err_console
from verifylab.errors import ParameterError, VerifylabError
from verifylab.launch import (
    FUSION_BACKEND_FLAG,
    FUSION_FLAG,
    FUSION_OFF_FLAG,
    PCIE_IPC_ENV,
    AllReduce,
    LaunchError,
    LaunchTarget,
    SglangLaunch,
    build_command,
)
from verifylab.model.answers.box_plan import COLLECTIVE_NAMES, COLLECTIVE_WORDS, BoxPlan, Priced
from verifylab.redact import redact_text
from verifylab.span import Span
from verifylab.vocab import streams_words

PCIE_IPC_REASON = "SGLang's PCIe-IPC all-reduce: the collective the plan priced its all-reduces on (it needs P2P)"


class CheckError(VerifylabError):
    """A `box --verify` whose measurement cannot be trusted: a server died, left cells, or ignored its accept
    length (the command ends non-zero, naming the cells)."""


def parse_overlap(text: str) -> Span:
    """``0.3`` or ``0.2-0.6``: how much a verify chain's tokens share experts (0..1)."""
    try:
        parts = [float(p) for p in text.split("-")] if text.count("-") <= 1 else []
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or not all(0.0 <= p <= 1.0 for p in parts):
        raise ParameterError(f"--overlap {text!r}: a share from 0 to 1, or a range such as 0.2-0.6")
    return Span.of(*parts)


def print_plan(plan: BoxPlan, target: LaunchTarget, loop_error: str = "") -> None:
    """The choice, the runner-up and plain decoding at the owner's load, then what measuring them costs."""
    table = Table(title=f"at {streams_words(plan.load)}, {plan.inputs['slo']}", title_justify="left")
    for column in ("", "configuration", "goodput tok/s", "tok/s", "ms per token", "first token ms"):
        table.add_column(column, overflow="fold")
    meets = plan.chosen.at_load.goodput.high > 0  # where nothing meets the SLO nothing is chosen: ranked by tok/s
    first, second = ("choice", "runner-up") if meets else ("most tok/s", "next")
    rows = [(first, plan.chosen), (second, plan.runner_up), ("plain", plan.plain)]
    if plan.other_collective is not None:  # the two all-reduces tie: the other's best is measured too
        rows.append((f"on {COLLECTIVE_WORDS[plan.measured_servers[-1].collective]}", plan.other_collective))
    for role, priced in rows:
        c = priced.at_load
        table.add_row(
            role,
            priced.config.words(),
            c.goodput.text(0),
            c.tokens_per_s.text(0),
            c.tpot_ms.text(1),
            c.ttft_ms.text(0),
        )
    console.print(table)
    servers = len(plan.measured_servers)
    over = (
        f", over the {plan.budget_minutes:g} allowed: --verify needs --budget-minutes {math.ceil(plan.minutes)}"
        if plan.minutes > plan.budget_minutes
        else f" of the {plan.budget_minutes:g} minutes of GPU time allowed"
    )
    console.print(
        f"plan: {servers} servers one after another, each at {', '.join(map(str, plan.streams))} streams: about "
        f"{plan.minutes:.1f}{' minutes of GPU time' if plan.minutes > plan.budget_minutes else ''}{over}",
        highlight=False,
    )
    for name, value in plan.inputs.items():
        console.print(f"  {name}: {value}", highlight=False, markup=False)
    if loop_error:
        console.print(f"  this loop's last check: {loop_error}", highlight=False, markup=False)
    chosen, runner = plan.chosen.at_load.goodput, plan.runner_up.at_load.goodput
    if chosen.high <= 0:
        console.print(
            f"nothing meets the SLO at {streams_words(plan.load)} ({plan.inputs['slo']}): no launch command. Relax the "
            "SLO or the load; the table shows how far each configuration is from it.",
            highlight=False,
            markup=False,
        )
        return
    if runner.high >= chosen.low:  # overlapping goodput: the model cannot tell them apart
        console.print(
            f"a tie: the choice's goodput ({chosen.text(0)}) and the runner-up's ({runner.text(0)}) overlap; "
            "`verifylab box --plan --verify FILE` breaks it on the box (the plan above)",
            highlight=False,
            markup=False,
        )
    if plan.launch_refusal is not None:
        console.print(f"no launch command: {plan.launch_refusal}", highlight=False, markup=False)
        return
    command, reasons = launch_words(
        plan.chosen,
        plan.tp,
        target,
        collective=plan.collective,
        attention_backend=plan.attention_backend,
        trust_remote_code=plan.trust_remote_code,
        kv_cache_dtype=plan.kv_cache_dtype,
        with_reasons=True,
    )
    console.print(f"  launch the choice: {command}", highlight=False, markup=False, soft_wrap=True)
    for flag, reason in reasons:
        console.print(f"    {flag}: {reason}", highlight=False, markup=False)
    console.print("modelled: `verifylab box --verify FILE` measures these on the box", highlight=False)


PLAN_FUSION_REASON = (  # fusion off in a plan's line: where it priced fusion, it was not ahead
    "all-reduce fusion stays off: the plan launches the all-reduce its all-reduce line names (fusion only where it "
    "prices fusion ahead), and `--verify` measures this line as printed; this version turns it on by itself once its "
    "gates open"
)
PLAN_FUSED_REASON = (  # fusion on in a plan's line
    "FlashInfer's fused all-reduce + RMSNorm (its trtllm workspace): the all-reduce the plan priced ahead (its "
    "all-reduce line); on SM120 SGLang runs it only once `verifylab gates apply` has opened its gates"
)


def launch_words(
    priced: Priced,
    tp: int,
    target: LaunchTarget,
    model_path: str = "<model-path>",
    draft_path: str = "<EAGLE-3-draft-path>",
    collective: str = "nccl",
    attention_backend: str | None = None,
    trust_remote_code: bool = False,
    kv_cache_dtype: str | None = None,
    with_reasons: bool = False,
) -> Any:
    """The command that serves a configuration at TP ``tp``, built for ``target`` and shell-quoted (why not, where the
    target cannot run it); ``collective`` ``pcie_ipc``: SGLang's PCIe-IPC all-reduce where the target runs it;
    ``attention_backend`` and ``kv_cache_dtype``: what the answer priced, named; CUDA graphs up to the running cap.
    ``with_reasons``: the command and why each flag that needs one stands there."""
    c = priced.config
    settings: dict = {
        "model_path": model_path,
        "tp_size": tp,
        "max_running_requests": c.max_running,
        "cuda_graph_max_bs": c.max_running,
        "trust_remote_code": trust_remote_code,
        "attention_backend": attention_backend,
        "kv_cache_dtype": kv_cache_dtype,
    }
    if collective == "pcie_ipc" and tp > 1 and target.has_pcie_ipc:
        settings["allreduce"] = AllReduce.PCIE_IPC
    if collective == "fused" and tp > 1:
        settings["allreduce"] = AllReduce.FUSED
    launch = (
        SglangLaunch(**settings)
        if c.drafter is None
        else SglangLaunch.speculative(c.drafter.algorithm, c.draft_tokens, draft_path, **settings)
    )
    try:
        built = build_command(launch, target)
    except LaunchError as exc:
        return (f"no command: {exc}", []) if with_reasons else f"no command: {exc}"
    if not with_reasons:
        return built.shell()
    ipc = [(f"{k}={v}", PCIE_IPC_REASON) for k, v in built.env if k == PCIE_IPC_ENV]
    fused = [(f, PLAN_FUSED_REASON) for f in built.args if f in (FUSION_FLAG, FUSION_BACKEND_FLAG)]
    return built.shell(), ipc + fused + [
        (f, PLAN_FUSION_REASON if f == FUSION_OFF_FLAG else r) for f, r in built.reasons()
    ]


def _port_free(host: str, port: int) -> bool:
    import socket

    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host or "127.0.0.1", port)) != 0


def _print_dry_run(plan: BoxPlan, settings) -> None:
    """What `--verify` would start, where and in which order, without starting anything."""
    from verifylab.bench.box_verify import served_engine_words

    base = settings.base
    console.print(
        f"dry run: {len(plan.measured_servers)} servers one after another on {' '.join(base.launcher)} at TP "
        f"{base.tp_size}, port {base.port}, model {base.model_path}; each swept at {', '.join(map(str, plan.streams))} "
        f"streams, {settings.output_tokens} output tokens a request (about {plan.minutes:.1f} minutes):",
        highlight=False,
        markup=False,
    )
    for n, server in enumerate(plan.measured_servers, start=1):
        on = f" (with {PCIE_IPC_ENV}=1: SGLang's PCIe-IPC all-reduce, as priced)" if server.pcie_ipc else ""
        on = f" ({COLLECTIVE_NAMES[server.collective]}, as priced)" if server.fused else on
        console.print(f"  [{n}] {server.priced.config.words()}{on}", highlight=False, markup=False)
    console.print(f"  each server: {served_engine_words(base)}, as the plan priced", highlight=False, markup=False)
    prompts = (
        f"{plan.context_tokens:,}-token prompts (synthetic token ids, each with a prefix of its own: distinct sessions)"
        if plan.context_tokens is not None
        else "the shipped prompt set (short prompts: give --context for prompts of your length)"
    )
    cap = f"; the KV pool holds {plan.stream_cap:,} distinct streams of that context" if plan.stream_cap else ""
    console.print(f"  prompts: {prompts}{cap}", highlight=False, markup=False)


def verify_on_box(plan: BoxPlan, settings_file: Path, data_dir: Path, run_id: str, dry_run: bool = False) -> None:
    """Measure the plan on this box into run ``run_id``, store the comparison and print the verdict."""
    from verifylab.analysis.box_verify import compare, untrusted_cells, verdict
    from verifylab.bench.box_verify import VerifySettings, run_verify, served_as_priced
    from verifylab.sources import MeasuredRuns as Runs
    from verifylab.store.evidence import Evidence
    from verifylab.store.runs import RunStore
    from verifylab.strict_yaml import read_strict_yaml_file

    raw = read_strict_yaml_file(settings_file, "verify settings", ParameterError)
    try:
        settings = VerifySettings.model_validate(raw)
    except ValueError as exc:
        raise ParameterError(f"--verify {settings_file}: {str(exc).splitlines()[0]}") from None
    store = RunStore(data_dir / "runs")
    if settings.base.tp_size != plan.tp:
        raise ParameterError(
            f"--verify {settings_file}: tp_size {settings.base.tp_size} against the plan's TP {plan.tp}: the check "
            "measures the layout the plan priced (give --tp, or fix the file)"
        )
    settings = served_as_priced(plan, settings, str(settings_file))  # the backend and KV dtype the plan priced
    if not _port_free(settings.base.host, settings.base.port):
        raise ParameterError(
            f"--verify {settings_file}: port {settings.base.port} is in use: stop the production server first (the "
            "check starts its servers on the same GPUs and port, one at a time)"
        )
    if dry_run:
        _print_dry_run(plan, settings)
        return
    if store.exists(run_id) and "box_plan" not in store.manifest(run_id).parameters:
        raise ParameterError(
            f"--run-id {run_id}: a stored run that `box --verify` did not create (it holds no box plan): measure into "
            "a new run id; a check never writes into a run it did not make"
        )
    err_console.print(f"measuring into run {run_id} (resumable: the same --run-id continues)", highlight=False)

    def say(line: str) -> None:  # a cell's outcome, with a server's error where it failed
        err_console.print(redact_text(line), highlight=False)

    run_verify(plan, settings, data_dir, run_id, progress=say)
    runs: Runs = Evidence(data_dir).measured
    table = compare(runs, run_id)
    problems, refused = untrusted_cells(runs, run_id, table)
    table.loc[table["variant"].isin(refused), [c for c in table.columns if c.startswith("measured_")]] = float("nan")
    store.write_table(run_id, "box_verify", table)
    if table["measured_tokens_per_s"].notna().any():
        v = verdict(runs, run_id, table)
        console.print(
            f"measured at {streams_words(v.load)}: {v.winner} served the most goodput ({v.winner_goodput:.0f} "
            f"tok/s); the choice {v.chosen_goodput:.0f}, the runner-up {v.runner_up_goodput:.0f}",
            highlight=False,
            markup=False,
        )
        if not problems:
            console.print(
                "the model chose right" if v.model_right else f"the model chose wrongly: {v.winner} won, measured",
                highlight=False,
                markup=False,
            )
        console.print(
            f"predicted tok/s: median miss {v.median_error:.0%} over {v.measured_cells} of {v.planned_cells} cells",
            highlight=False,
        )
    if problems:
        raise CheckError(
            f"run {run_id}: the check cannot be trusted (no verdict on the model's choice): " + "; ".join(problems)
        )
