"""#51: one launch command per SGLang version, with only that version's flags, and never at odds with the page's
answers: fusion only where the decision turns it on, EAGLE-3 unless the speculation answer turns it off, SGLang's
PCIe-IPC all-reduce where the version pair has it."""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from verifylab.analysis.facts import case_study_facts
from verifylab.analysis.launch_command import deployed_variant, launch_command
from verifylab.analysis.recommendation import Recommendation, Topic
from verifylab.launch import AllReduce, SglangLaunch, build_command
from verifylab.model.answers.decision import FusionSaving, fusion_switch
from verifylab.server.variants import BaseConfig
from verifylab.span import Span
from verifylab.vocab import Regime

VERSIONS = {"0.5.9": "0.6.4", "0.5.22": "0.7.1", "0.5.23": "0.7.2"}  # the case study's pair; the newest audited


@pytest.fixture(scope="module")
def facts(shipped):
    base = BaseConfig(model_path="/models/kimi", tp_size=8, draft_model_path="/models/draft")
    return replace(case_study_facts(shipped), base=base)


def _speculation(keep: bool | None = None) -> Recommendation:
    return Recommendation(Topic.SPECULATION, "", [], "low", keep_speculation=keep)


def _command(facts, sglang: str, shipped) -> tuple[list[str], str]:
    target = shipped.launch_target(sglang)
    rec = launch_command(replace(facts, upgrade=(sglang, VERSIONS[sglang]), launch_target=target), _speculation())
    return shlex.split(rec.command), rec.recommendation


@pytest.mark.parametrize("sglang", list(VERSIONS))
def test_each_version_gets_only_its_own_flags(shipped, facts, sglang):
    """Every option of the printed command is one that version's server accepts, as read from its published wheel
    (data/gates/sglang_flags.csv, `verifylab gates matrix`), and one the replayed command may use."""
    words, _ = _command(facts, sglang, shipped)
    used = {w for w in words if w.startswith("--")}
    in_wheel = shipped.sglang_flags[sglang]
    assert used <= in_wheel, f"SGLang {sglang}'s server has no {sorted(used - in_wheel)}"
    ipc = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1"
    assert (ipc in words) == shipped.launch_target(sglang).has_pcie_ipc
    assert (ipc in words) == (sglang != "0.5.9")  # 0.5.9 has no PCIe-IPC path; 0.5.22+ pin FlashInfer 0.7.1+


def test_the_command_never_contradicts_the_answers(facts, shipped):
    healthy = facts.answers[Regime.HEALTHY_P2P]
    words, text = _command(facts, "0.5.22", shipped)
    fusion_on = fusion_switch(healthy.fusion_gain_ms) == "on"
    assert ("--flashinfer-allreduce-fusion-backend" in words) == fusion_on
    if not fusion_on:
        assert "--enforce-disable-flashinfer-allreduce-fusion" in words and "fusion off" in text
    assert "--speculative-algorithm" in words  # the speculation answer keeps EAGLE-3 at light load


@pytest.mark.parametrize(
    ("saving", "keep", "variant"),
    [
        (Span(0.1, 0.4), None, "eagle3_fusion"),
        (Span(-0.4, 0.1), None, "eagle3"),
        (Span(-0.4, -0.1), False, "baseline"),
        (Span(0.1, 0.4), False, "fusion"),
    ],
)
def test_the_variant_follows_the_fusion_and_speculation_answers(facts, saving, keep, variant):
    healthy = replace(facts.answers[Regime.HEALTHY_P2P], fusion_gain_by_load={1: FusionSaving({4: saving})})
    changed = replace(facts, answers={**facts.answers, Regime.HEALTHY_P2P: healthy})
    assert deployed_variant(changed, _speculation(keep)) == variant


def test_the_wheel_reading_finds_options_both_ways_sglang_registers_them():
    """0.5.9 registers options with parser.add_argument, 0.5.2x from dataclass fields (name, cli_name, aliases); a
    field marked no_cli or without A[...] is not an option."""
    from verifylab.gates.sglang_flags import flags_in_source

    old = 'parser.add_argument("--tensor-parallel-size", "--tp-size", type=int)\n'
    new = (
        "class Parallel:\n"
        '    tp_size: A[int, Arg(help="tp", aliases=["--tensor-parallel-size"])] = 1\n'
        '    pp_size: A[int, "pipeline"] = 1\n'
        '    dp_size: A[int, Arg(help="dp", cli_name="--data-parallel-size")] = 1\n'
        '    hidden: A[int, Arg(help="x", no_cli=True)] = 1\n'
        "    plain: int = 0\n"
    )
    assert flags_in_source(old, "old") == {"--tensor-parallel-size", "--tp-size"}
    assert flags_in_source(new, "new") == {"--tp-size", "--tensor-parallel-size", "--pp-size", "--data-parallel-size"}


def test_the_fusion_backend_flag_is_used_from_the_first_wheel_that_has_it(shipped):
    """The check can fail: 0.5.9's server has no fusion-backend option; a fused command uses it in every audited
    version whose wheel registers it, the older flag before, and every flag it prints is that version's."""
    flags = shipped.sglang_flags
    assert "--flashinfer-allreduce-fusion-backend" not in flags["0.5.9"]
    fused = SglangLaunch(model_path="/m", tp_size=8, allreduce=AllReduce.FUSED)
    for version, accepted in flags.items():
        args = build_command(fused, shipped.launch_target(version)).args
        backend = "--flashinfer-allreduce-fusion-backend" in accepted
        assert ("--flashinfer-allreduce-fusion-backend" in args) == backend
        assert ("--enable-flashinfer-allreduce-fusion" in args) == (not backend)
        assert set(a for a in args if a.startswith("--")) <= accepted


def test_a_wheel_that_is_not_sglang_s_is_refused_by_name(tmp_path):
    """A wheel from outside is read within bounds: no parser source (no --model-path), a source far larger than any
    parser, or a file that is not a zip are one error naming the wheel."""
    import zipfile

    from verifylab.errors import GateError
    from verifylab.gates.sglang_flags import flags_in_wheel
    from verifylab.gates.wheel import MAX_MEMBER_BYTES

    empty = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("sglang/srt/server_args.py", "x = 1\n")
    with pytest.raises(GateError, match="no server options found"):
        flags_in_wheel(empty)
    huge = tmp_path / "sglang-9.9.8-py3-none-any.whl"
    with zipfile.ZipFile(huge, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("sglang/srt/server_args.py", " " * (MAX_MEMBER_BYTES + 1))
    with pytest.raises(GateError, match="more than any source"):
        flags_in_wheel(huge)
    broken = tmp_path / "sglang-9.9.7-py3-none-any.whl"
    broken.write_text("not a zip")
    with pytest.raises(GateError, match="not a readable wheel"):
        flags_in_wheel(broken)
