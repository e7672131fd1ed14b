"""`verifylab box --plan / --verify`: the choice by goodput under an SLO on constructed cases whose answer is known, the
budget refused up front, and the check measured against the test double (mechanics only: its numbers are no data)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_bench import free_port
from tests.test_speculation_model import QWEN3_MOE
from verifylab.analysis.box_verify import compare, verdict
from verifylab.bench.box_verify import VerifySettings, plan_record, run_verify, verify_points
from verifylab.cli import app
from verifylab.errors import ModelInputError
from verifylab.launch import PCIE_IPC_ENV, build_command
from verifylab.model.answers.box_plan import Slo, accept_at, choose
from verifylab.model.fits.grid import first_grid_fit
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_runs
from verifylab.server.variants import BaseConfig, variant_launch
from verifylab.store.evidence import Evidence
from verifylab.store.runs import RunStore

DATA = Path(__file__).resolve().parents[1] / "data"
TEST_LAUNCHER = [sys.executable, "-m", "verifylab.testing.server"]


@pytest.fixture(scope="module")
def fitted():
    fit = first_grid_fit(stored_runs(Evidence(DATA).measured))
    assert fit is not None
    return replace(fit.box, routing=Routing.UNIFORM), fit.overheads


def test_accept_length_per_chain_follows_one_acceptance_probability():
    assert accept_at(4, 2.6, 4) == pytest.approx(2.6)
    chain = [accept_at(k, 2.6, 4) for k in (2, 3, 4, 6, 8)]
    assert chain == sorted(chain) and chain[0] < 2 and chain[-1] < 1 / (1 - 0.72) + 0.1
    assert accept_at(6, 4.0, 4) == 6.0 and accept_at(6, 1.0, 4) == 1.0
    with pytest.raises(ModelInputError, match="--accept"):
        accept_at(4, 5.0, 4)


def test_a_drafter_that_accepts_nothing_leaves_plain_decoding_the_choice(fitted):
    """Accept 1: every verify yields one token at the cost of a longer pass, so plain decoding wins at any load."""
    box, overheads = fitted
    plan = choose(box, overheads, 16, Slo(2000, 50), accept=1.0, stated_for=4)
    assert plan.chosen.config.drafter is None
    assert plan.runner_up.config.drafter is not None
    assert plan.chosen.at_load.goodput.low >= plan.runner_up.at_load.goodput.high


def test_a_limit_only_speculation_meets_makes_it_the_choice_and_plain_gets_no_goodput(fitted):
    box, overheads = fitted
    plan = choose(box, overheads, 16, Slo(2000, 10), accept=2.6, stated_for=4)
    assert plan.chosen.config.drafter is not None
    plain_at_16 = next(c for c in plan.plain.cells if c.streams == 16)
    assert plan.chosen.at_load.tpot_ms.high <= 10
    assert plain_at_16.goodput.low == 0 or plan.plain.config.max_running < 16  # plain meets it only capped
    assert [p.config for p in (plan.chosen, plan.runner_up)] == [s.priced.config for s in plan.measured_servers[:2]]


def test_a_budget_too_small_for_the_plan_is_refused_naming_the_minutes(fitted):
    box, overheads = fitted
    with pytest.raises(ModelInputError, match=r"needs about \d+ minutes"):
        choose(box, overheads, 16, Slo(), accept=2.6, stated_for=4, budget_minutes=1.0)


def test_a_plan_where_nothing_meets_the_slo_names_no_choice(tmp_path):
    """With a time per token no configuration reaches, the table's first row was still labelled "choice" (goodput 0)
    above the line saying nothing meets the SLO: the rows are ranked by tok/s, and say so."""
    args = ["box", "--plan", "--data-dir", str(DATA), "--load", "8", "--accept", "2.4", "--gpu", "h200",
            "--config", str(_qwen_config(tmp_path))]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--slo-tpot-ms", "0.5"])
    assert result.exit_code == 0, result.output
    roles = [line.split("│")[1].strip() for line in result.output.splitlines() if line.startswith("│")]
    assert roles[:3] == ["most tok/s", "next", "plain"], roles
    assert "nothing meets the SLO" in result.output and "no launch command" in result.output
    met = CliRunner().invoke(app, args)
    assert [line.split("│")[1].strip() for line in met.output.splitlines() if line.startswith("│")][:2] == [
        "choice",
        "runner-up",
    ]


def test_plan_prints_without_a_gpu_and_refuses_what_it_cannot_price(tmp_path):
    runner = CliRunner()
    args = ["box", "--plan", "--data-dir", str(DATA), "--load", "8", "--accept", "2.4", "--gpu", "h200"]
    result = runner.invoke(app, [*args, "--config", str(_qwen_config(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "choice" in result.output and "runner-up" in result.output and "minutes of GPU time" in result.output
    kimi = runner.invoke(app, args)  # Kimi-K2.5 at TP 1: its weights do not fit one GPU
    assert kimi.exit_code != 0 and "GB of weights per GPU" in kimi.output
    no_gpu = runner.invoke(app, [*args[:-2], "--config", str(_qwen_config(tmp_path))])  # #69: never assumed
    assert no_gpu.exit_code == 2 and "--gpu" in no_gpu.output
    bad = runner.invoke(app, [*args, "--overlap", "1.5"])
    assert bad.exit_code != 0 and "--overlap" in bad.output


@pytest.mark.slow  # starts the test double as each server: make test
def test_verify_measures_the_choice_the_runner_up_and_plain_and_compares(tmp_path, fitted):
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)
    base = BaseConfig(
        model_path="m", draft_model_path="d", port=free_port(), launcher=TEST_LAUNCHER, extra_args=["--step-ms", "2"]
    )
    settings = VerifySettings(base=base, output_tokens=8, hold_accept=True, label="test double (not data)")
    said: list[str] = []
    rows = run_verify(plan, settings, tmp_path, "check", progress=said.append)
    assert len(rows) == len(plan.measured_servers) and not rows.failure.any()
    runs = Evidence(tmp_path).measured
    assert runs.run("check").parameters["box_plan"] == plan_record(plan, settings)
    table = compare(runs, "check")
    assert "chosen" in set(table.role) and any(v.startswith("plain") for v in table.variant)  # plain, whatever role
    assert table.measured_tokens_per_s.notna().all()
    v = verdict(runs, "check", table)
    assert v.measured_cells == v.planned_cells and v.winner
    assert runs.run("check").mechanics_only  # the double marks its runs: never evidence


def _qwen_config(tmp_path: Path) -> Path:
    file = tmp_path / "config.json"
    file.write_text(json.dumps(QWEN3_MOE))
    return file


@pytest.mark.slow  # starts the test double as each server: make test
def test_a_server_that_fails_to_start_is_reported_and_the_check_goes_on(tmp_path, fitted):
    """No draft model: every speculative server of the plan fails to start with SGLang's own refusal recorded, the
    plain server is still measured, and the verdict names what was measured as the winner."""
    box, overheads = fitted
    plan = choose(box, overheads, 2, Slo(2000, 50), accept=2.6, stated_for=4, startup_s=1.0)
    base = BaseConfig(model_path="m", port=free_port(), launcher=TEST_LAUNCHER, extra_args=["--step-ms", "2"])
    settings = VerifySettings(base=base, output_tokens=8, hold_accept=True, label="test double (not data)")
    rows = run_verify(plan, settings, tmp_path, "check").set_index("variant")
    speculative = [v for v in rows.index if not v.startswith("plain")]
    assert speculative and all("draft_model_path" in rows.loc[v, "failure"] for v in speculative)
    runs = Evidence(tmp_path).measured
    table = compare(runs, "check")
    assert table[table["variant"].isin(speculative)]["measured_tokens_per_s"].isna().all()
    v = verdict(runs, "check", table)
    assert v.winner.startswith("plain") and v.measured_cells < v.planned_cells
    assert runs.run("check").parameters["box_plan"]["load"] == 2


@pytest.mark.parametrize(
    ("collective", "tp", "switched"), [("pcie_ipc", 8, True), ("nccl", 8, False), ("pcie_ipc", 1, False)]
)
def test_the_check_starts_every_server_on_the_all_reduce_the_plan_priced(fitted, collective, tp, switched):
    """`--verify` measures what the plan priced: where it priced SGLang's PCIe-IPC all-reduce, every server it starts
    (the choice, the runner-up, plain decoding) sets its switch; elsewhere none does, and the run records which."""
    plan = replace(_check_plan(fitted), collective=collective, tp=tp)
    base = BaseConfig(model_path="m", draft_model_path="d", port=30000, launcher=TEST_LAUNCHER)
    settings = VerifySettings(base=base, output_tokens=8, label="test double (not data)")
    target = Evidence(DATA).launch_target("0.5.22")
    points = verify_points(plan, settings)
    assert len(points) == len(plan.measured_servers) >= 2
    for point in points:
        env = dict(build_command(variant_launch(base, point.variant()), target).env)
        assert (env.get(PCIE_IPC_ENV) == "1") == switched, (point.name, env)
    assert plan_record(plan, settings)["collective"] == collective


def test_where_the_two_all_reduces_tie_the_check_measures_the_others_best_on_it(fitted):
    """A plan whose all-reduces tie launches NCCL and has `--verify` start one server more: the best configuration on
    PCIe-IPC, with its switch, under a name of its own (here the choice's configuration, on the other all-reduce),
    recorded with its role and all-reduce; the plan's three servers stay on NCCL."""
    plan = _check_plan(fitted)
    tie = replace(plan, collective="nccl", tp=8, other_collective=plan.chosen)
    base = BaseConfig(model_path="m", draft_model_path="d", port=30000, launcher=TEST_LAUNCHER)
    settings = VerifySettings(base=base, output_tokens=8, label="test double (not data)")
    target = Evidence(DATA).launch_target("0.5.22")
    points = verify_points(tie, settings)
    assert len(points) == len(verify_points(plan, settings)) + 1 and len({p.name for p in points}) == len(points)
    switched = [dict(build_command(variant_launch(base, p.variant()), target).env).get(PCIE_IPC_ENV) for p in points]
    assert switched == [None] * (len(points) - 1) + ["1"]
    last = plan_record(tie, settings)["configs"][-1]
    assert (last["role"], last["collective"], last["variant"]) == ("other all-reduce", "pcie_ipc", points[-1].name)
    assert last["configuration"].endswith("on SGLang's PCIe-IPC all-reduce")


def test_a_tie_of_the_all_reduces_is_measured_and_a_decided_one_is_not():
    """Kimi-K2.5 at TP 8 on a box decoding 40 tok/s on NCCL: at 4 streams PCIe-IPC's best is not 2% ahead at both
    ends (a tie: NCCL launched, PCIe-IPC's best measured as a fourth server); at one stream it is (launched, three
    servers)."""
    kimi = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "kimi-k2.5-int4")
    plan_file = str(Path(__file__).resolve().parents[1] / "benchmarks" / "box" / "verify-8gpu-tp8.yaml")
    args = ["box", "--plan", "--config", kimi, "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p",
            "--decode-tok-s", "40", "--verify", plan_file, "--dry-run", "--budget-minutes", "60", "--data-dir",
            str(DATA)]  # fmt: skip
    servers = {}
    for load in ("4", "1"):
        result = CliRunner().invoke(app, [*args, "--load", load])
        assert result.exit_code == 0, result.output
        servers[load] = [line for line in result.output.splitlines() if line.startswith("  [")]
        words = " ".join(result.output.split())
        assert ("a tie, neither is" in words) == (load == "4")
    assert len(servers["4"]) == 4 and [PCIE_IPC_ENV in s for s in servers["4"]] == [False, False, False, True]
    assert len(servers["1"]) == 3 and all(PCIE_IPC_ENV in s for s in servers["1"])


def test_the_all_reduce_alone_within_the_slo_at_its_pessimistic_end_is_launched():
    """Kimi-K2.5 at TP 8, 8k of context, 32 streams: NCCL's best misses the SLO at its pessimistic end (goodput 0),
    PCIe-IPC's meets it, though its optimistic end is not 2% ahead: PCIe-IPC is launched, as a plan ranks configurations
    (the pessimistic end first), not measured as a tie."""
    kimi = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "kimi-k2.5-int4")
    args = ["box", "--plan", "--config", kimi, "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p",
            "--context", "8192", "--load", "32", "--data-dir", str(DATA)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    assert "chosen over NCCL by goodput at 32 streams" in words and "against NCCL's 0-" in words
    assert f"launch the choice: {PCIE_IPC_ENV}=1 " in words


def _check_plan(fitted, load: int = 2):
    box, overheads = fitted
    return choose(box, overheads, load, Slo(2000, 50), accept=2.0, stated_for=4, startup_s=1.0)


@pytest.mark.slow  # starts the test double: make test
def test_a_server_that_dies_mid_sweep_leaves_its_cells_failed_and_the_run_partial(tmp_path, fitted):
    """Every server drops its stream after a few requests: the failed cells are stored as failures (measured again
    when the same run id is given), the run stays partial, and no server is left running."""
    port = free_port()
    base = BaseConfig(
        model_path="m", draft_model_path="d", port=port, launcher=TEST_LAUNCHER,
        extra_args=["--step-ms", "2", "--fault", "drop", "--fault-after", "2"],
    )  # fmt: skip
    settings = VerifySettings(base=base, output_tokens=8, hold_accept=True, label="test double (not data)")
    rows = run_verify(_check_plan(fitted), settings, tmp_path, "check")
    assert (rows["failed_cells"] > 0).any()
    assert RunStore(tmp_path / "runs").manifest("check").status == "partial"
    assert _port_free(port)


@pytest.mark.slow  # starts the test double: make test
def test_ctrl_c_keeps_every_measured_cell_and_stops_the_server(tmp_path, fitted):
    port = free_port()
    base = BaseConfig(
        model_path="m", draft_model_path="d", port=port, launcher=TEST_LAUNCHER, extra_args=["--step-ms", "2"]
    )
    settings = VerifySettings(base=base, output_tokens=8, hold_accept=True, label="test double (not data)")
    said: list[str] = []

    def interrupt_after_a_cell(line: str) -> None:
        said.append(line)
        if line.startswith("[2/") and ": serving" in line:
            raise KeyboardInterrupt  # the first server's cells are stored, the second is serving: Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        run_verify(_check_plan(fitted), settings, tmp_path, "check", progress=interrupt_after_a_cell)
    assert _port_free(port)
    cells = RunStore(tmp_path / "runs").read_table("check", "sweep_cells")
    assert len(cells) >= 1  # what was measured is kept; the same run id resumes from there
    assert any(line.endswith("measured") for line in said)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_before_the_box_is_probed_a_named_regime_prices_tp_8(tmp_path):
    """8 x RTX PRO 6000 at TP 8 with healthy P2P: an answer, labelled modelled, from chapter 4's curves; a TP without
    a regime is refused naming the regimes."""
    runner = CliRunner()
    args = ["box", "--plan", "--data-dir", str(DATA), "--tp", "8", "--gpu", "rtx-pro-6000", "--accept", "1.95"]
    result = runner.invoke(app, [*args, "--regime", "healthy P2P"])
    assert result.exit_code == 0, result.output
    assert "8 ranks" in result.output and "modelled: the box is not probed" in result.output
    refused = runner.invoke(app, args)
    assert refused.exit_code != 0 and "--regime" in refused.output


def test_plan_for_a_given_probe_prices_the_boxs_own_curve():
    """`box --plan --probe RUN`: the probe's GPUs, TP and own NCCL curve price the plan (not a regime's)."""
    probe = "20261201-092338-2xh200-probe-p2p"
    qwen = Path(__file__).resolve().parent / "data" / "spec_models" / "target" / "config.json"
    args = ["box", "--plan", "--probe", probe, "--config", str(qwen), "--decode-tok-s", "200", "--load", "16"]
    result = CliRunner().invoke(app, [*args, "--data-dir", str(DATA), "--accept", "2.4"])
    assert result.exit_code == 0, result.output
    assert "h200 x 2" in result.output and f"this box: run {probe}" in result.output.replace("\n", " ")
    launch = " ".join(result.output.split()).split("launch the choice: ", 1)[1]
    assert "--tp-size 2" in launch and "PCIE_IPC" not in launch  # launched on the NCCL it priced, as `box --probe`
    assert "PCIe-IPC all-reduce not launched: no public curve prices it at 2 ranks" in " ".join(result.output.split())


def test_a_probed_box_whose_nccl_is_slow_is_planned_on_the_pcie_ipc_its_decision_names_first(tmp_path):
    """NCCL slow while P2P works: `box --probe` names SGLang's PCIe-IPC all-reduce as the fix, so `box --plan --probe`
    with an SGLang that runs it prices and launches it (its public curve at 8 ranks, P2P working on this box; this
    box's own slow NCCL past the workspace); an SGLang without it keeps the NCCL the probe measured and says why; on
    the healthy box the two tie at 32 streams (NCCL launched, both measured); `box --probe`'s all-reduce answer names
    the plan."""
    import shutil

    from verifylab.testing.probe_double import RUN_ID, write_probe_double

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    slow = write_probe_double(data, "20261206-000001-8xrtx-pro-6000-nccl-slow-double", nccl_slowdown=3.0)
    write_probe_double(data)
    kimi = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "kimi-k2.5-int4")

    def plan(probe: str, *extra: str) -> tuple[str, str]:
        args = ["box", "--plan", "--probe", probe, "--config", kimi, "--context", "8192", "--load", "32", *extra]
        result = CliRunner().invoke(app, [*args, "--data-dir", str(data)])
        assert result.exit_code == 0, result.output
        words = " ".join(result.output.split())
        return words.split("all-reduce: ", 1)[1].split(" weights: ", 1)[0], words.split("launch the choice: ", 1)[1]

    probed = CliRunner().invoke(app, ["box", "--probe", slow, "--config", kimi, "--decode-tok-s", "40", "--out",
                                      str(tmp_path / "page"), "--data-dir", str(data)])  # fmt: skip
    assert probed.exit_code == 0, probed.output
    words = " ".join(probed.output.split())
    assert "PCIe-IPC all-reduce" in words.split("fix first: ", 1)[1].split(" fusion: ", 1)[0]  # the probe's fix
    assert f"`verifylab box --plan --probe {slow}` chooses between the two" in words.split("all-reduce: ", 1)[1]
    priced, launched = plan(slow)
    assert priced.startswith("PCIe-IPC all-reduce") and f"to NCCL: NCCL all-reduce on p2p, run {slow}" in priced
    assert launched.startswith(f"{PCIE_IPC_ENV}=1 ")
    priced, launched = plan(slow, "--sglang", "0.5.21")  # its FlashInfer pin has no PCIe-IPC kernel
    assert priced.startswith("NCCL all-reduce on p2p") and PCIE_IPC_ENV not in launched
    priced, launched = plan(RUN_ID)
    assert priced.startswith("NCCL all-reduce on p2p") and "not launched: a tie" in priced
    assert PCIE_IPC_ENV not in launched


def test_box_probe_names_the_plan_exactly_where_the_plan_prices_pcie_ipc(tmp_path):
    """`box --probe` launches NCCL (it has no load to choose by); its all-reduce answer names `box --plan --probe`
    as the command that chooses where, and only where, that plan prices SGLang's PCIe-IPC on the box, and otherwise
    says why it is no option, with the plan's reason: an SGLang or FlashInfer without it, P2P broken (host memory),
    no public curve at the TP (2 ranks)."""
    import shutil

    from verifylab.testing.probe_double import RUN_ID, write_probe_double

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    slow = write_probe_double(data, "20261206-000001-8xrtx-pro-6000-nccl-slow-double", nccl_slowdown=3.0)
    write_probe_double(data)
    kimi = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "kimi-k2.5-int4")
    qwen = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "qwen3-30b-a3b")
    cases = [  # (probe, config, extra arguments, the reason PCIe-IPC is no option, or None where it is priced)
        (RUN_ID, kimi, [], None),
        (slow, kimi, [], None),
        (RUN_ID, kimi, ["--sglang", "0.5.21"], "the FlashInfer SGLang 0.5.21 pins"),
        (RUN_ID, kimi, ["--sglang", "0.5.9"], "SGLang 0.5.9 has none"),
        ("20261201-091704-2xh200-probe-shm", qwen, [], "P2P does not work on this box"),
        ("20261201-092338-2xh200-probe-p2p", qwen, [], "no public curve prices it at 2 ranks"),
    ]
    for probe, config, extra, reason in cases:
        common = ["--probe", probe, "--config", config, "--decode-tok-s", "40", *extra, "--data-dir", str(data)]
        decided = CliRunner().invoke(app, ["box", *common, "--out", str(tmp_path / probe)])
        planned = CliRunner().invoke(app, ["box", "--plan", *common])
        assert decided.exit_code == 0 and planned.exit_code == 0, (decided.output, planned.output)
        answer = " ".join(decided.output.split()).split("all-reduce: ", 1)[1].split(" launch: ", 1)[0]
        chosen = " ".join(planned.output.split()).split("all-reduce: ", 1)[1].split(" weights: ", 1)[0]
        assert answer.startswith("NCCL, SGLang's default"), (probe, extra, answer)
        names_plan = f"`verifylab box --plan --probe {probe}` chooses between the two" in answer
        assert names_plan == (reason is None), (probe, extra, answer)
        if reason is None:  # the plan priced PCIe-IPC: it launched it, or NCCL with both goodputs beside it
            assert "PCIe-IPC" in chosen and "tok/s against NCCL's" in chosen, (probe, extra, chosen)
        else:
            assert f"not an option here: {reason}" in answer, (probe, extra, answer)
            assert "tok/s against NCCL's" not in chosen, (probe, extra, chosen)
            if "SGLang" not in reason:  # the SGLang named has it: the plan says why it is not launched on this box
                assert f"SGLang's PCIe-IPC all-reduce not launched: {reason}" in chosen, (probe, extra, chosen)


def _engine_flags(launch: str) -> tuple[str | None, str | None, bool]:
    """A launch line's attention backend, KV dtype and whether it trusts remote code."""
    args = launch.split()

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args else None

    return value("--attention-backend"), value("--kv-cache-dtype"), "--trust-remote-code" in args


def test_box_probe_launches_the_backend_and_kv_dtype_its_answer_priced(tmp_path):
    """`box --probe`'s launch line serves what its answers priced, as `box --plan --probe`'s does: where the decision
    page's band answers (a public matrix ran the box: Triton, fp8 KV), that matrix's backend and KV dtype; where the
    model answers (NCCL slow: no matrix of that regime), SGLang's default backend on bf16; remote code as the config
    names it. Before, it named neither backend nor KV dtype, so SGLang's defaults ran whatever the answer priced."""
    import shutil

    from verifylab.testing.probe_double import RUN_ID, write_probe_double

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    slow = write_probe_double(data, "20261206-000001-8xrtx-pro-6000-nccl-slow-double", nccl_slowdown=3.0)
    write_probe_double(data)
    kimi = str(Path(__file__).resolve().parents[1] / "examples" / "configs" / "kimi-k2.5-int4")
    seen = {}
    for probe in (RUN_ID, slow):
        common = ["--probe", probe, "--config", kimi, "--context", "8192", "--data-dir", str(data)]
        decided = CliRunner().invoke(app, ["box", *common, "--decode-tok-s", "40", "--out", str(tmp_path / probe)])
        planned = CliRunner().invoke(app, ["box", "--plan", *common])
        assert decided.exit_code == 0 and planned.exit_code == 0, (decided.output, planned.output)
        launch = " ".join(decided.output.split()).split("launch: ", 1)[1].split(" the decision page: ", 1)[0]
        plan_launch = " ".join(planned.output.split()).split("launch the choice: ", 1)[1]
        seen[probe] = _engine_flags(launch)
        assert seen[probe] == _engine_flags(plan_launch), (probe, launch, plan_launch)
    assert seen[RUN_ID] == ("triton", "fp8_e4m3", True)  # the public matrix's engine settings
    assert seen[slow][1] is None and seen[slow][2]  # the model's bf16, SGLang's default backend named
    args = ["--config", kimi, "--context", "8192", "--engine", "vllm", "--decode-tok-s", "40", "--data-dir", str(data)]
    vllm = CliRunner().invoke(app, ["box", "--probe", RUN_ID, *args, "--out", str(tmp_path / "vllm")])
    assert vllm.exit_code == 0 and "launch: no command: vLLM answers" in " ".join(vllm.output.split()), vllm.output


@pytest.mark.parametrize("slowdown", [3.0, None])
def test_pcie_ipc_on_a_probed_box_past_its_workspace_is_that_boxs_nccl(tmp_path, slowdown):
    """A reduction past PCIe-IPC's workspace runs on the box's own NCCL, as its probe measured it: on a box whose NCCL
    is slow at the probe's slow curve, never at the healthy public NCCL; on a healthy box likewise its own curve."""
    import shutil

    from verifylab.model.fits.in_pass import regime_curves
    from verifylab.model.inputs.probes import probe_run
    from verifylab.model.inputs.stored import stored_inputs
    from verifylab.model.pricing.regimes import PCIE_IPC_WORKSPACE_ROWS, Collective, Price
    from verifylab.testing.probe_double import write_probe_double
    from verifylab.vocab import KIMI_K2_HIDDEN, Regime

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    probed = write_probe_double(data, "20261206-000001-8xrtx-pro-6000-nccl-probe-double", nccl_slowdown=slowdown)
    ev = Evidence(data)
    curves = regime_curves(stored_inputs(ev))
    curves.box = probe_run(ev.measured, probed)  # priced as this box (a test double is never the book's box)
    past = 4.0 * PCIE_IPC_WORKSPACE_ROWS * KIMI_K2_HIDDEN * 2
    ipc, box_nccl, healthy = (
        curves.price(regime, collective, 8, past)
        for regime, collective in (
            (Regime.MEASURED, Collective.PCIE_IPC),
            (Regime.MEASURED, Collective.NCCL),
            (Regime.HEALTHY_P2P, Collective.NCCL),
        )
    )
    assert isinstance(ipc, Price) and isinstance(box_nccl, Price) and isinstance(healthy, Price)
    assert (ipc.low_us, ipc.high_us) == (box_nccl.low_us, box_nccl.high_us) and "this box" in ipc.basis
    assert (box_nccl.low_us > healthy.high_us) == (slowdown is not None)
    within = curves.price(Regime.MEASURED, Collective.PCIE_IPC, 8, 8.0 * KIMI_K2_HIDDEN * 2)
    assert isinstance(within, Price) and within.basis.startswith("public PCIe-IPC curve at 8 ranks")
