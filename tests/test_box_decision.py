"""`verifylab box`: the decision page for one box from its own probe and decode rate (replay from stored runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.model.answers.box_decision import BoxInputs, decide_box
from verifylab.publish.box_page import box_json, box_page_html
from verifylab.store.evidence import Evidence
from verifylab.vocab import RECOMMENDED_STACK, Regime

ROOT = Path(__file__).resolve().parents[1]
P2P, SHM = "20261201-092338-2xh200-probe-p2p", "20261201-091704-2xh200-probe-shm"
# a model two H200s hold (Kimi-K2.5 needs about 298 GB a GPU at TP 2: refused, tested below)
QWEN = ROOT / "tests" / "data" / "spec_models" / "target" / "config.json"


@pytest.fixture(scope="module")
def runs():
    return Evidence(ROOT / "data")  # what decide_box reads: the stored runs and the public evidence


TARGET = Evidence(ROOT / "data").launch_target(RECOMMENDED_STACK[0])  # the command's SGLang, its audited flags


def test_two_boxes_in_different_regimes_get_different_answers(runs):
    healthy = decide_box(runs, BoxInputs(P2P, 60.0, "given", 2.4, config=QWEN, target=TARGET))
    host = decide_box(runs, BoxInputs(SHM, 60.0, "given", 2.4, config=QWEN, target=TARGET))
    assert (healthy.regime, host.regime) == (Regime.HEALTHY_P2P, Regime.HOST_MEMORY)
    assert healthy.fix_first != host.fix_first and "NCCL_P2P_DISABLE" in host.fix_first
    # host memory: custom all-reduce and fusion cannot run, and the variable that caused it is unset at launch
    assert "--disable-custom-all-reduce" in host.launch_command and "-u NCCL_P2P_DISABLE" in host.launch_command
    assert "--disable-custom-all-reduce" not in healthy.launch_command
    assert host.fusion_answer.startswith("off") and "need healthy P2P" in host.fusion_answer
    # each box's own curve prices its speculation: the slower all-reduce gives the smaller gain
    assert host.gain_one_stream.high < healthy.gain_one_stream.high
    assert host.inputs["allreduce"] != healthy.inputs["allreduce"] and SHM in host.inputs["allreduce"]


def test_the_decode_rate_moves_the_speculation_answer(runs):
    slow = decide_box(runs, BoxInputs(P2P, 40.0, "given", 2.4, config=QWEN, target=TARGET))
    fast = decide_box(runs, BoxInputs(P2P, 80.0, "given", 2.4, config=QWEN, target=TARGET))
    assert slow.gain_one_stream.low > fast.gain_one_stream.low  # more host overhead: speculation hides more of it


def test_a_decode_rate_the_box_cannot_reach_is_not_priced(runs):
    d = decide_box(
        runs, BoxInputs("20261201-091704-2xh200-probe-socket", 1500.0, "given", 2.4, config=QWEN, target=TARGET)
    )
    assert d.speculation_answer.startswith("not priced") and "--speculative" not in d.launch_command


@pytest.mark.parametrize("bad", [{"decode_tok_s": 0.0}, {"decode_tok_s": float("nan")}, {"accept": 9.0}])
def test_bad_inputs_are_refused_by_name(bad):
    from verifylab.errors import ModelInputError

    args = {"probe_run": P2P, "decode_tok_s": 60.0, "decode_source": "given", "accept": 2.0, **bad}
    with pytest.raises(ModelInputError, match=r"decode rate|--accept"):
        BoxInputs(**args)


def test_the_page_opens_with_the_finding_and_escapes_every_value(runs):
    d = decide_box(runs, BoxInputs(SHM, 60.0, "given", 2.4, config=QWEN, target=TARGET, model_path="/m/<b>x</b>"))
    page = box_page_html(d)
    assert page.index("class='finding'") < page.index("Table 1.")
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert [f"Table {n}." in page for n in range(1, 6)] == [True] * 5


def test_the_command_renders_the_page_and_the_json_in_replay(tmp_path: Path):
    result = CliRunner().invoke(
        app,
        [
            "box",
            "--probe",
            SHM,
            "--decode-tok-s",
            "60",
            "--accept",
            "2.4",
            "--config",
            str(QWEN),
            "--data-dir",
            str(ROOT / "data"),
            "--out",
            str(tmp_path / "box"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "host-memory fallback" in result.output
    decision = json.loads((tmp_path / "box" / "decision.json").read_text())
    assert decision["regime"] == "host-memory fallback" and decision["policy"]["custom_allreduce"] is False
    assert (tmp_path / "box" / "decision.html").is_file()


def test_the_command_wants_a_decode_rate_or_a_server(tmp_path: Path):
    result = CliRunner().invoke(app, ["box", "--probe", SHM, "--data-dir", str(ROOT / "data")])
    assert result.exit_code == 2 and "--decode-tok-s" in result.output


LIVE = "20261202-203301-box-probe"  # `verifylab box --gpus 1 --server` on one H200 (SGLang 0.5.17, random weights)


@pytest.mark.parametrize("accept", [2.0, 3.0])
def test_the_box_page_brackets_the_crossovers_measured_on_the_same_engine(runs, accept: float):
    """The live box probe's own decode rate, the served model's shape (collapsed routing: random weights) and a
    short context: the page's crossover range holds the one measured on the H200 grid with that accept length."""
    from verifylab.analysis.speculation_load import crossovers, speculation_view
    from verifylab.model.answers.box_decision import stored_decode_rate
    from verifylab.model.inputs.model_costs import Routing

    models = ROOT / "tests" / "data" / "spec_models"  # the served configs (benchmarks/speculation/make_models.py)
    measured = crossovers(speculation_view(Evidence(ROOT / "data")))
    row = measured[(measured["drafter"] == "eagle3") & (measured["draft_tokens"] == 4)]
    point = float(row[row["accept_target"] == accept]["measured"].iloc[0])
    rate, source = stored_decode_rate(runs.measured, LIVE)
    inputs = BoxInputs(
        LIVE,
        rate,
        source,
        accept,
        4,
        models / "target" / "config.json",
        None,
        draft_config=models / "draft" / "config.json",
        routing=Routing.COLLAPSED,
        context=256.0,
    )
    low, high = decide_box(runs, inputs).speculation.crossover
    assert low is not None and low <= point and (high is None or point <= high)


def test_a_layout_whose_weights_do_not_fit_is_refused(runs):
    """Kimi-K2.5 (INT4 experts) on the two H200s of a stored probe: about 298 GB of weights a GPU, 141 GB there."""
    from verifylab.errors import ModelInputError

    with pytest.raises(ModelInputError, match=r"at TP 2 needs \d+ GB of weights per GPU; a h200 holds 141 GB"):
        decide_box(runs, BoxInputs(P2P, 60.0, "given", 2.4))


@pytest.fixture(scope="module")
def probed_case_box(tmp_path_factory):
    """A scratch data folder with an 8 x RTX PRO 6000 probe of the case study's box (a test double)."""
    import shutil

    from verifylab.testing.probe_double import write_probe_double

    data = tmp_path_factory.mktemp("case-box") / "data"
    shutil.copytree(ROOT / "data", data)
    return Evidence(data), write_probe_double(data)


@pytest.mark.parametrize(("context", "setting"), [(1024, "on under load"), (32768, "off")])
def test_a_probe_of_a_box_a_public_matrix_ran_takes_its_band_the_model_beside_it(probed_case_box, context, setting):
    """#78: the probe measured no speculation, so EAGLE-3's answer is the decision page's band for the box (the public
    matrix moved to the context), the model on the box's own curve and decode rate beside it, labelled; the launch
    line speculates only where the band is on at light load."""
    from verifylab.model.answers.box_switch import Switch

    ev, run_id = probed_case_box
    kimi = ROOT / "examples" / "configs" / "kimi-k2.5-int4"
    d = decide_box(ev, BoxInputs(run_id, 50.0, "given", 2.0, config=kimi, target=TARGET, context=float(context),
                                 accept_stated=False))  # fmt: skip
    assert d.speculation_setting is Switch(setting)
    assert "(public, the same GPUs and model family" in d.speculation_answer
    assert "beside it, modelled on this box's own curve and decode rate: on at light load" in d.speculation_answer
    assert "--speculative-algorithm" not in d.launch_command  # neither is on at light load
    page, record = box_page_html(d), box_json(d)
    assert "EAGLE-3&#x27;s is the decision page&#x27;s band" in page or "EAGLE-3's is the decision page's band" in page
    assert d.speculation_band is not None and record["speculation"] == setting
    assert record["speculation_off_from_streams"]["low"] == d.speculation_band.stops[0]  # the answer's, not the model's
    assert "modelled_speculation_off_from_streams" in record and "public" in record["speculation_evidence"]
    assert record["gain_one_stream"]["low"] == d.speculation_band.gain_one.low and "modelled_gain_one_stream" in record
    other = decide_box(ev, BoxInputs(P2P, 60.0, "given", 2.4, config=QWEN, target=TARGET))
    assert "public" not in other.speculation_answer  # no public matrix ran two H200s: the model answers


def test_a_one_gpu_probe_says_fusion_is_off_for_want_of_an_all_reduce(runs):
    """A probe of one GPU allows no tensor parallelism: fusion is off because there is no all-reduce to fuse, said as
    such (it said 'the probe's policy rules it out', which sends the owner to a probe with --extra in vain)."""
    one = decide_box(runs, BoxInputs("20261202-203301-box-probe", 90.0, "given", 2.4, config=QWEN, target=TARGET))
    assert one.fusion_answer == "off: one GPU: no all-reduce to fuse"


def test_a_page_folder_named_where_a_file_is_is_refused_in_one_line(tmp_path):
    """`box --out FILE` died in mkdir with a traceback after the decision was made: refused before anything runs."""
    taken = tmp_path / "page"
    taken.write_text("mine\n")
    result = CliRunner().invoke(
        app,
        ["box", "--probe", "20261202-203301-box-probe", "--config", str(ROOT / "examples/configs/qwen3-30b-a3b"),
         "--out", str(taken), "--data-dir", str(ROOT / "data")],
    )  # fmt: skip
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.exception
    assert f"--out {taken}: a file is there; give a folder" in " ".join(result.output.split())
    assert taken.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["page"]
