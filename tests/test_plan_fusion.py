"""`box --plan` prices FlashInfer's fused all-reduce + RMSNorm beside NCCL and SGLang's PCIe-IPC all-reduce, launches
it where it is ahead, and `--verify` serves and checks it: the first command's fusion answer is one the second
measures. Probes are test doubles (`verifylab.testing.probe_double`) in a scratch data folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.launch import FUSION_BACKEND_FLAG, FUSION_OFF_FLAG
from verifylab.model.answers.all_reduce_choice import choose_all_reduce
from verifylab.model.answers.box_plan import CellPrediction, Configuration, Priced
from verifylab.model.pricing.regimes import Collective
from verifylab.span import Span
from verifylab.testing.probe_double import RUN_ID, write_probe_double

ROOT = Path(__file__).resolve().parents[1]
KIMI = str(ROOT / "examples" / "configs" / "kimi-k2.5-int4")
CHECK_FILE = str(ROOT / "benchmarks" / "box" / "verify-8gpu-tp8.yaml")
FUSED_RUN = "20261206-000002-8xrtx-pro-6000-fused-double"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A scratch data folder with three 8 x RTX PRO 6000 probe doubles: no fused kernel checked, a fused kernel at
    0.3 times NCCL's latency, and one at 3 times."""
    folder = tmp_path_factory.mktemp("fusion") / "data"
    shutil.copytree(ROOT / "data", folder)
    write_probe_double(folder)
    write_probe_double(folder, FUSED_RUN, fused_factor=0.3)
    write_probe_double(folder, "20261206-000003-8xrtx-pro-6000-slow-fused-double", fused_factor=3.0)
    return folder


def _plan(data: Path, probe: str, load: str = "1") -> tuple[str, str, list[str]]:
    """The plan's all-reduce line, its launch line and its dry run's servers."""
    args = ["box", "--plan", "--probe", probe, "--config", KIMI, "--load", load, "--accept", "2.0", "--decode-tok-s",
            "80", "--verify", CHECK_FILE, "--dry-run", "--budget-minutes", "60", "--data-dir", str(data)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    servers = [line for line in result.output.splitlines() if line.startswith("  [")]
    line = words.split("all-reduce: ", 1)[1].split(" weights: ", 1)[0]
    return line, words.split("launch the choice: ", 1)[1].split(" modelled: ", 1)[0], servers


def test_a_probed_box_whose_fused_kernel_is_ahead_is_planned_launched_and_checked_on_it(data):
    """The box's own fused curve (0.3 x its NCCL) is priced as `box --probe` prices fusion and, at one stream, is
    ahead of NCCL and of PCIe-IPC: the plan launches it (the backend flag, not the switch that keeps fusion off, with
    its reason) and `--verify` starts every server on it; `box --probe` names the plan as the command that chooses."""
    line, launch, servers = _plan(data, FUSED_RUN)
    assert line.startswith(
        f"FlashInfer fused all-reduce + RMSNorm on p2p, as this box's probe measured it (run {FUSED_RUN})"
    )
    assert "chosen over NCCL by goodput at 1 stream" in line
    assert "SGLang's PCIe-IPC all-reduce not launched: fusion is ahead by goodput" in line
    assert f"{FUSION_BACKEND_FLAG} trtllm" in launch and FUSION_OFF_FLAG not in launch
    assert (
        f"{FUSION_BACKEND_FLAG}: FlashInfer's fused all-reduce + RMSNorm (its trtllm workspace): the all-reduce"
        in launch
    )
    assert len(servers) == 3 and all(
        s.endswith("(FlashInfer's fused all-reduce + RMSNorm, as priced)") for s in servers
    )
    probed = CliRunner().invoke(app, ["box", "--probe", FUSED_RUN, "--config", KIMI, "--decode-tok-s", "80", "--out",
                                      str(data.parent / "page"), "--data-dir", str(data)])  # fmt: skip
    assert probed.exit_code == 0, probed.output
    said = " ".join(probed.output.split())
    assert "fusion: on" in said and f"{FUSION_BACKEND_FLAG} trtllm" in said.split("launch: ", 1)[1]
    assert f"`verifylab box --plan --probe {FUSED_RUN}` chooses among NCCL, fusion and PCIe-IPC" in said


def test_fusion_not_launched_says_why(data):
    """A probe that checked no fused kernel: the plan says fusion is not launched and why (the probe's policy); a
    slow fused kernel (3 x NCCL) is priced and behind, as `box --probe` answers fusion off there; both keep fusion off
    in the launch line and serve no fused server."""
    line, launch, servers = _plan(data, RUN_ID)
    assert (
        "FlashInfer's fused all-reduce + RMSNorm not launched: FlashInfer's fused kernel was not checked correct"
        in line
    )
    assert FUSION_OFF_FLAG in launch and FUSION_BACKEND_FLAG not in launch
    line, launch, servers = _plan(data, "20261206-000003-8xrtx-pro-6000-slow-fused-double")
    assert "FlashInfer's fused all-reduce + RMSNorm not launched: " in line and "is ahead by goodput" in line
    assert line.split("FlashInfer's fused all-reduce + RMSNorm not launched: ", 1)[1].split(" is ahead", 1)[0] in (
        "NCCL",
        "PCIe-IPC",
    )
    assert FUSION_OFF_FLAG in launch and not any("fused" in s for s in servers)
    probed = CliRunner().invoke(app, ["box", "--probe", "20261206-000003-8xrtx-pro-6000-slow-fused-double", "--config",
                                      KIMI, "--decode-tok-s", "80", "--out", str(data.parent / "slow-page"),
                                      "--data-dir", str(data)])  # fmt: skip
    assert probed.exit_code == 0, probed.output
    said = " ".join(probed.output.split())  # the first command answers fusion as the plan priced it: off
    assert "fusion: off: it costs" in said and FUSION_BACKEND_FLAG not in said.split("launch: ", 1)[1]


def _priced(low: float, high: float, draft_tokens: int = 4) -> Priced:
    cell = CellPrediction(8, Span(low, high), Span(20, 30), Span(100, 120), Span(low, high))
    return Priced(Configuration(None, draft_tokens, 1.0, 8), cell, (cell,))


@pytest.mark.parametrize(
    ("best", "launched", "too"),
    [
        # fusion and NCCL tie; PCIe-IPC behind both: NCCL (SGLang's default) launched, fusion's best measured too
        ({Collective.NCCL: (100, 120), Collective.FUSED: (101, 121), Collective.PCIE_IPC: (80, 90)}, "NCCL", "FUSED"),
        # both ahead of NCCL and level with each other: the better-ranked launched, the other measured too
        (
            {Collective.NCCL: (80, 90), Collective.FUSED: (110, 130), Collective.PCIE_IPC: (109, 131)},
            "FUSED",
            "PCIE_IPC",
        ),
        # one decided ahead of everything: launched, nothing else measured
        ({Collective.NCCL: (80, 90), Collective.FUSED: (130, 150), Collective.PCIE_IPC: (100, 110)}, "FUSED", None),
        # NCCL decided ahead of both
        ({Collective.NCCL: (130, 150), Collective.FUSED: (80, 90), Collective.PCIE_IPC: (100, 110)}, "NCCL", None),
    ],
)
def test_one_rule_chooses_among_three_all_reduces(best, launched, too):
    """The rule on the best configuration's goodput on each: another all-reduce is launched only where it is decided
    ahead of NCCL, and the one that ties the launched one (not decided behind it) is measured as one server more."""
    choice = choose_all_reduce({c: _priced(*g) for c, g in best.items()})
    assert choice.launched is Collective[launched]
    assert choice.measured_too is (None if too is None else Collective[too])
    assert sum("`--verify` measures" in c for c in choice.clauses) == (too is not None)
    assert sum("not launched" in c for c in choice.clauses) == 2 - (launched != "NCCL")


def test_box_probe_without_pcie_ipc_names_the_plan_for_fusion_alone(data):
    """An SGLang whose FlashInfer has no PCIe-IPC kernel (0.5.21): `box --probe` with fusion on launches it (not called
    SGLang's default) and names the plan that chooses between fusion and NCCL; that plan launches fusion at one
    stream and prices no PCIe-IPC."""
    page = str(data.parent / "page-0521")
    probed = CliRunner().invoke(app, ["box", "--probe", FUSED_RUN, "--config", KIMI, "--decode-tok-s", "80", "--sglang",
                                      "0.5.21", "--out", page, "--data-dir", str(data)])  # fmt: skip
    assert probed.exit_code == 0, probed.output
    said = " ".join(probed.output.split()).split("all-reduce: ", 1)[1]
    assert said.startswith("NCCL with FlashInfer's fused all-reduce + RMSNorm (fusion on, above); SGLang's PCIe-IPC")
    assert f"`verifylab box --plan --probe {FUSED_RUN}` chooses between fusion and NCCL" in said
    args = ["box", "--plan", "--probe", FUSED_RUN, "--config", KIMI, "--load", "1", "--accept", "2.0", "--decode-tok-s",
            "80", "--sglang", "0.5.21", "--data-dir", str(data)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    line = words.split("all-reduce: ", 1)[1].split(" weights: ", 1)[0]
    assert line.startswith("FlashInfer fused all-reduce + RMSNorm on p2p") and "PCIe-IPC" not in line
    assert f"{FUSION_BACKEND_FLAG} trtllm" in words.split("launch the choice: ", 1)[1]


def test_model_speculation_prices_fusion_as_the_plan_does():
    """`model speculation --fusion` prices the all-reduces on the regime's fused curve less the norm kernel (the
    plan's fused box); it is refused beside --pcie-ipc, without a regime, and where fusion cannot run (host memory)."""
    base = ["model", "speculation", "--config", KIMI, "--gpu", "rtx-pro-6000", "--tp", "8", "--accept", "2.0",
            "--decode-tok-s", "80", "--streams", "1", "--json"]  # fmt: skip
    fused = CliRunner().invoke(app, [*base, "--regime", "healthy-p2p", "--fusion"])
    nccl = CliRunner().invoke(app, [*base, "--regime", "healthy-p2p"])
    assert fused.exit_code == 0 and nccl.exit_code == 0, fused.output + nccl.output
    import json

    said, plain = json.loads(fused.output), json.loads(nccl.output)
    assert said["inputs"]["allreduce"].startswith("FlashInfer fused all-reduce + RMSNorm, healthy P2P, 8 ranks")
    assert said["rows"][0] != plain["rows"][0]  # another all-reduce, another price
    for extra, named in (
        (["--regime", "healthy-p2p", "--fusion", "--pcie-ipc"], "not --pcie-ipc"),
        (["--fusion"], "give one of --regime"),
        (["--regime", "host-memory", "--fusion"], "--fusion: no curve prices fusion at 8 ranks"),
    ):
        refused = CliRunner().invoke(app, [*base, *extra])
        assert refused.exit_code != 0 and named in " ".join(refused.output.split()), refused.output
