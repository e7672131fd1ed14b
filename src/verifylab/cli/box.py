"""``verifylab box``: the decision for the box this runs on (or for a stored probe of it), in one command."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from verifylab.cli._shared import console, engine_options, err_console, evidence_at, fail
from verifylab.errors import ModelInputError, ParameterError, VerifylabError
from verifylab.vocab import RECOMMENDED_STACK

if TYPE_CHECKING:
    from verifylab.model.answers.plan_answer import PlanRequest
    from verifylab.store.evidence import Evidence


_PLAN_ENGINE = engine_options("--plan and --probe: ")


def box_cmd(
    probe: str | None = typer.Option(
        None, help="A stored probe run to decide from (replay, any machine). Default: probe this box's GPUs now."
    ),
    gpus: str | None = typer.Option(None, help="Probe now: how many GPUs (8 = GPUs 0-7) or which (0,2,4,6)."),
    server: str | None = typer.Option(
        None, help="A running plain (no speculation) SGLang server of the served model: its one-stream decode rate."
    ),
    decode_tok_s: float | None = typer.Option(
        None, help="Or give the plain decode rate at one stream yourself (tok/s), e.g. from your own benchmark."
    ),
    accept: float | None = typer.Option(
        None,
        help="Mean accepted tokens per verify on your traffic (SGLang logs it as accept len); 2 if unknown. --plan: "
        "where a public per-context matrix ran your box, its own accept length when you give none.",
    ),
    draft_tokens: int = typer.Option(4, min=2, max=64, help="Draft tokens per verify (the root included)."),
    config: Path | None = typer.Option(
        None, help="The served model's config.json (or its folder). Default: the case study's Kimi-K2.5."
    ),
    gpu: str | None = typer.Option(None, help="h200, h100 or rtx-pro-6000 (default: from the probe's GPU name)."),
    model_path: str = typer.Option("<model-path>", help="Put into the launch command."),
    draft_model_path: str = typer.Option("<EAGLE-3-draft-path>", help="Put into the launch command."),
    draft_config: Path | None = typer.Option(
        None, help="The EAGLE-3 draft's config.json (default: one Llama layer of the target's width)."
    ),
    routing: str = typer.Option(
        "uniform", help="uniform (a trained router) or collapsed (random weights fed identical tokens)."
    ),
    expert_bits: float | None = typer.Option(
        None,
        help="The routed experts' width in bits (4: INT4 with group-32 scales, 8, 16). Default: what the config's "
        "quantization_config says (compressed-tensors, AWQ, GPTQ, FP8, NVFP4), else bf16.",
    ),
    context: int | None = typer.Option(
        None,
        min=1,
        max=10_000_000,
        help="Tokens of KV each stream attends over while it decodes (default: 2048; --plan: the prompt and half the "
        "output). Where a public per-context matrix ran your box (same GPUs, model shape, regime, tokens per verify), "
        "--plan's rates are that matrix moved to this context (chapter 4).",
    ),
    label: str | None = typer.Option(None, help="Probe now: the hardware label (default: from the box)."),
    out: Path | None = typer.Option(None, help="Where decision.html and decision.json go (default: box/<run id>)."),
    data_dir: Path = typer.Option(Path("data"), help="Folder with runs/ (the probe is stored there) and reference/."),
    plan: bool = typer.Option(
        False,
        "--plan",
        help="Choose the configuration with the most goodput under your SLO (no GPU), and the all-reduce it runs "
        "on where the SGLang named has more than NCCL (its PCIe-IPC all-reduce, FlashInfer's fusion): print it, the "
        "runner-up and the plan that measures them.",
    ),
    verify: Path | None = typer.Option(
        None, help="Then measure the plan on this box: a YAML of how SGLang starts here (see benchmarks/box/)."
    ),
    load: int = typer.Option(32, min=1, max=1024, help="Concurrent streams you serve (the plan's load)."),
    slo_ttft_ms: float = typer.Option(2000.0, help="SLO: time to first token, ms."),
    slo_tpot_ms: float = typer.Option(50.0, help="SLO: time per output token, ms."),
    tp: int | None = typer.Option(
        None, min=1, max=64, help="--plan: the tensor-parallel size (default 1; with --probe, the probe's)."
    ),
    regime: str | None = typer.Option(
        None,
        help="--plan at TP > 1 before the box is probed: its communication regime ('healthy P2P', 'host-memory "
        "fallback', 'degraded'); the all-reduces are priced from chapter 4's curves (modelled).",
    ),
    overlap: str | None = typer.Option(
        None,
        help="--plan: how much a verify chain's tokens share experts, 0 (each its own) to 1, or a range 0.2-0.6 "
        "(default: as fitted on a stored grid of the box itself, else 0).",
    ),
    prompt_tokens: int = typer.Option(256, min=1, max=1_000_000, help="--plan: prompt tokens per request."),
    output_tokens: int = typer.Option(128, min=2, max=65536, help="--plan: output tokens per request."),
    budget_minutes: float = typer.Option(10.0, min=0.1, max=600.0, help="--verify: GPU minutes the check may take."),
    run_id: str | None = typer.Option(None, help="--verify: the run to measure into (the same id resumes)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="--verify: print what would start, where and in which order; start nothing."
    ),
    engine: str = _PLAN_ENGINE["engine"],
    attention_backend: str | None = _PLAN_ENGINE["attention_backend"],
    verify_kernel: str | None = _PLAN_ENGINE["verify_kernel"],
    kv_cache_dtype: str | None = _PLAN_ENGINE["kv_cache_dtype"],
    sglang: str = typer.Option(
        RECOMMENDED_STACK[0],
        help="The SGLang version the printed launch command is built for, its flags checked against that version's "
        f"audited wheel (data/gates; {RECOMMENDED_STACK[0]}: the first with FlashInfer's SM12x fused build and the "
        "PCIe-IPC all-reduce; the case study ran 0.5.9).",
    ),
) -> None:
    """The decision for one box from its own numbers: which communication regime it is in and what to fix first,
    whether all-reduce fusion pays, up to how many streams EAGLE-3 pays, and the launch command its probe allows.

    On the GPU box, one command probes the GPUs (stored as a run), measures one stream of plain decoding on your
    running server, and renders the page:

      verifylab box --gpus 8 --server http://127.0.0.1:30000 --accept 2.4 --config /models/kimi/config.json

    Anywhere, from a stored probe and your numbers (replay):

      verifylab box --probe 20261201-092338-2xh200-probe-p2p --decode-tok-s 90 --accept 2.4 \\
        --config examples/configs/qwen3-30b-a3b

    A probe made by `verifylab box --server` keeps its decode measurement: `--probe RUN` and the served model's config
    replay it:

      verifylab box --probe 20261202-203301-box-probe --config examples/configs/qwen3-30b-a3b

    The plan and the check (no GPU for the plan):

      verifylab box --plan --config examples/configs/kimi-k2.5-int4 --gpu rtx-pro-6000 --tp 8 \\
        --regime healthy-p2p --context 32768

    Modelled from measured inputs (every input is listed on the page, Table 5). The probe's verdict and policy are
    the ones `verifylab comm probe` gives; the speculation model is chapter 2's, fitted on the stored H200 grid.
    """
    tp_given, tp = tp is not None, tp if tp is not None else 1
    if (plan or verify is not None) and gpus is not None and (not gpus.isdigit() or int(gpus) < tp):
        raise fail(
            ParameterError(f"--gpus {gpus!r}: with --plan, the box's GPU count, a whole number of at least --tp ({tp})")
        )
    if plan or verify is not None:
        from verifylab.cli.box_check import parse_overlap
        from verifylab.model.answers.box_plan import Slo
        from verifylab.model.answers.context_answer import evidence_context_terms
        from verifylab.model.answers.plan_answer import PlanRequest

        try:
            ev = evidence_at(data_dir)  # read once: the plan and its context terms share it
            request = PlanRequest(
                load,
                Slo(slo_ttft_ms, slo_tpot_ms),
                accept,
                draft_tokens,
                config,
                draft_config,
                gpu,
                tp,
                decode_tok_s,
                parse_overlap(overlap) if overlap is not None else None,
                prompt_tokens,
                output_tokens,
                budget_minutes,
                expert_bits,
                regime,
                probe,
                sglang,
                context,
                evidence_context_terms(ev),
                measured=verify is not None,
                tp_given=tp_given,
                engine=engine,
                attention_backend=attention_backend,
                verify_kernel=verify_kernel,
                kv_cache_dtype=kv_cache_dtype,
                pcie_ipc=engine == "sglang" and ev.launch_target(sglang).has_pcie_ipc,  # an SGLang switch
                fusion=engine == "sglang" and ev.launch_target(sglang).has_fusion,  # likewise
            )
            if verify is not None and engine == "vllm":
                raise ParameterError(
                    "--engine vllm --verify: vLLM answers are the public matrices' prices only; --verify serves SGLang"
                )
        except ModelInputError as exc:
            raise fail(ParameterError(str(exc))) from None
        except VerifylabError as exc:
            raise fail(exc) from None
        _plan_and_verify(request, verify, data_dir, run_id, dry_run, ev)
        return
    from verifylab.intake import refuse_write_into_data, require_evidence_folder
    from verifylab.model.answers.box_decision import BoxInputs, decide_box, stored_decode_rate
    from verifylab.model.answers.context_answer import evidence_context_terms
    from verifylab.model.answers.speculation_answer import ROUTINGS, Routing
    from verifylab.publish.box_page import write_box_page

    try:
        if out is not None:  # before a probe or a measurement runs: where the page goes is known now
            refuse_write_into_data(out, "--out", data_dir, writes_folder=True)
        if decode_tok_s is not None and server is not None:
            raise ParameterError("give one of --decode-tok-s (your rate) or --server URL (measured now), not both")
        if probe is not None and gpus is not None:
            raise ParameterError("--probe decides from a stored probe; --gpus probes now: give one of them")
        if routing not in ROUTINGS:
            raise ParameterError(f"--routing {routing!r}: choose {', '.join(ROUTINGS)}")
        if probe is None and decode_tok_s is None and server is None:
            raise ParameterError(_NO_RATE)
        if probe is None:
            require_evidence_folder(data_dir)  # before the GPUs are probed: the decision needs its evidence
            probe = _probe_now(gpus, label, data_dir)
        ev = evidence_at(data_dir)
        ev.measured.run(probe)  # a probe that is not stored is named first, with the ids it may have meant
        if server is not None:
            decode_tok_s, source = _measure_decode(server, probe, data_dir)
            ev = evidence_at(data_dir)  # the run now holds the measurement
        elif decode_tok_s is not None:
            source = "given (--decode-tok-s)"
        elif (stored := stored_decode_rate(ev.measured, probe)) is not None:
            decode_tok_s, source = stored
        else:
            raise ParameterError(_NO_RATE + f" (run {probe} holds no decode measurement of its own)")
        inputs = BoxInputs(
            probe,
            decode_tok_s,
            source,
            accept if accept is not None else 2.0,
            draft_tokens,
            config,
            gpu,
            model_path,
            draft_model_path,
            draft_config,
            Routing(routing),
            float(context or 2048),
            expert_bits,
            ev.launch_target(sglang),
            evidence_context_terms(ev),
            accept_stated=accept is not None,
            engine=engine,
            attention_backend=attention_backend,
            verify_kernel=verify_kernel,
            kv_cache_dtype=kv_cache_dtype,
        )
        decision = decide_box(ev, inputs)
        if accept is None:
            decision.inputs["accept"] += " (the default: give --accept from your traffic)"
        page = write_box_page(decision, out or Path("box") / probe)
    except ModelInputError as exc:
        raise fail(ParameterError(str(exc))) from None
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(
        f"[bold]{decision.regime.value}[/] ({decision.world} x {escape(decision.gpu)}, run {escape(probe)})",
        highlight=False,
        markup=True,
    )
    for question, text in (
        ("fix first", decision.fix_first),
        ("fusion", decision.fusion_answer),
        ("speculation", decision.speculation_answer),
        *((("all-reduce", decision.all_reduce_answer),) if decision.all_reduce_answer else ()),
    ):
        console.print(f"  {question}: {text}", highlight=False, markup=False)
    console.print(f"  launch: {decision.launch_command}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"the decision page: {page}", highlight=False, markup=False)


def _plan_and_verify(
    req: PlanRequest,
    verify: Path | None,
    data_dir: Path,
    run_id: str | None,
    dry_run: bool = False,
    ev: Evidence | None = None,
) -> None:
    """``--plan``: print the choice and its plan; ``--verify FILE``: then measure it on this box."""
    from verifylab.analysis.box_verify import loop_error_words
    from verifylab.cli.box_check import print_plan, verify_on_box
    from verifylab.model.answers.plan_answer import plan_box
    from verifylab.store.manifest import new_run_id

    try:
        ev = ev or evidence_at(data_dir)
        target = ev.launch_target(req.sglang)
        chosen = plan_box(ev, req)
        print_plan(chosen, target, loop_error_words(ev.measured))
        if verify is not None:
            verify_on_box(chosen, verify, data_dir, run_id or new_run_id("box-verify"), dry_run)
    except ModelInputError as exc:
        raise fail(ParameterError(str(exc))) from None
    except VerifylabError as exc:
        raise fail(exc) from None


_NO_RATE = (
    "give --decode-tok-s (your plain decoding at one stream) or --server URL (a running plain server to measure it on)"
)


def _measure_decode(server: str, probe: str, data_dir: Path) -> tuple[float, str]:
    """One stream of plain decoding on ``server``, added to the probe's run's ``box_decode`` with its time (an
    earlier measurement is kept: nothing stored is ever replaced)."""
    from datetime import UTC, datetime

    import pandas as pd

    from verifylab.bench.decode_rate import measure_decode_rate
    from verifylab.store.runs import RunStore

    with err_console.status(f"measuring one stream of plain decoding on {server}"):
        rate = measure_decode_rate(server)
    frame = pd.DataFrame(
        {
            "request": range(len(rate.tpot_ms)),
            "tpot_ms": rate.tpot_ms,
            "tokens_per_s": [1e3 / t for t in rate.tpot_ms],
            "max_tokens": rate.max_tokens,
            "url": rate.url,
            "measured_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        }
    )
    RunStore(data_dir / "runs").upsert_rows(probe, "box_decode", frame)
    return rate.tokens_per_s, rate.source


def _probe_now(gpus: str | None, label: str | None, data_dir: Path) -> str:
    """Probe this box's GPUs with the probe's defaults and store the run; its id."""
    from verifylab.cli.comm import _check_new_run, _gpus, _measure, _record
    from verifylab.comm.config import ProbeConfig
    from verifylab.comm.probe import require_gpu_devices
    from verifylab.errors import CommProbeError
    from verifylab.store.manifest import new_run_id

    try:
        require_gpu_devices()
    except CommProbeError as exc:
        raise CommProbeError(f"{exc}; to decide from a stored probe, give --probe RUN") from None
    cfg = ProbeConfig(gpus=_gpus(gpus))
    run_id = new_run_id("box-probe")
    _check_new_run(data_dir, run_id)
    with tempfile.TemporaryDirectory(prefix="verifylab-probe-") as tmp:
        raw = _measure(cfg, Path(tmp))
        _record(raw, data_dir, run_id, label, True)
    return run_id
