"""The speculation model: costs read from any config, the fit on a grid and its prediction of what it was not fitted
on (the stored H200 runs, and synthetic runs of known overheads), the case study's box per regime, the CLI."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.analysis.grid_agreement import grid_fit_summary, speculative_time_beside_fit
from verifylab.analysis.speculation_load import agreement, crossovers, predicted_beside_measured
from verifylab.cli import app
from verifylab.errors import ModelInputError
from verifylab.model.fits.grid import fit_grid
from verifylab.model.inputs.configs import costs_from_config, kimi_k25_costs, read_config
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.grids import grid_routing
from verifylab.model.inputs.known_models import QWEN3_30B_A3B
from verifylab.model.inputs.model_costs import Layout, Routing, independent_draws
from verifylab.model.inputs.stored import stored_runs
from verifylab.model.pricing.floors import pass_bytes
from verifylab.model.pricing.pricer import Box, Overheads, price_cycle, price_step, scenarios
from verifylab.model.pricing.speculation import crossings, gains
from verifylab.sources import MeasuredRuns
from verifylab.store.evidence import Evidence
from verifylab.vocab import Drafter, Regime

GRID_RUN = "20261202-183005-h200-spec-load"
SPREAD_RUN = "20261203-102200-h200-spec-load-spread"
QWEN3_MOE = {  # Qwen3-30B-A3B's cost-setting fields, a small vocabulary (the stored runs' served shape)
    **{k: v for k, v in QWEN3_30B_A3B.items() if k != "_name_or_path"},
    "vocab_size": 1024,
}
DEEPSEEK_V2_LITE = {  # a config the model was never given before: MLA with q_lora_rank null, shared experts
    "architectures": ["DeepseekV2ForCausalLM"],
    "hidden_size": 2048,
    "num_hidden_layers": 27,
    "first_k_dense_replace": 1,
    "num_attention_heads": 16,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "num_experts_per_tok": 6,
    "n_shared_experts": 2,
    "moe_intermediate_size": 1408,
    "intermediate_size": 10944,
    "vocab_size": 102400,
}


@pytest.fixture(scope="module")
def stored(shipped) -> Evidence:
    return shipped


def test_kimi_costs_from_a_config_equal_the_floors_module():
    kimi = kimi_k25_costs()
    for tokens in (1, 4, 32, 256):
        expected = pass_bytes(tokens, Layout.TP, 8, context=2048).total
        assert kimi.pass_parts(tokens, 1, 2048, tp=8).total == pytest.approx(expected, rel=1e-9)
    # Kimi-K2.5's first layer is dense: 60 layers of experts, not 61
    assert kimi.moe_layers == 60 and kimi.layers == 61


def test_configs_read_and_bad_ones_refused_naming_the_field(tmp_path):
    lite = costs_from_config(DEEPSEEK_V2_LITE)
    assert lite.moe_layers == 26 and lite.attention_replicated > 0 and not lite.kv_sharded
    assert lite.experts_read(1) == pytest.approx(6.0) and lite.experts_read(1000) == pytest.approx(64, rel=1e-3)
    assert lite.experts_read(1000, Routing.COLLAPSED) == 6
    moe = costs_from_config(QWEN3_MOE)
    assert moe.weights_bytes() == pytest.approx(59.8e9, rel=0.01)  # 29.9 B parameters in bf16
    with pytest.raises(ModelInputError, match="'hidden_size' is 'wide'"):
        costs_from_config({**QWEN3_MOE, "hidden_size": "wide"}, "x")
    with pytest.raises(ModelInputError, match="num_experts_per_tok"):
        costs_from_config({k: v for k, v in QWEN3_MOE.items() if k != "num_experts_per_tok"}, "x")
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ModelInputError, match="holds list"):
        read_config(tmp_path)
    with pytest.raises(ModelInputError, match=r"no config\.json"):
        read_config(tmp_path / "missing")


def _synthetic_grid(host0: float, host1: float, c0: float, c1: float, box: Box) -> MeasuredRuns:
    """A grid run made by the model itself at known overheads: what a fit must give back, and predict."""
    ov = Overheads(_span(host0), host1, {Drafter.EAGLE3: (c0, c1)})
    s = scenarios(box)[0]
    points, tables = [], {}
    servers = [
        ("plain", None, 1, 1.0),
        ("eagle3_d4_a2p00", Drafter.EAGLE3, 4, 2.0),
        ("eagle3_d4_a3p00", Drafter.EAGLE3, 4, 3.0),
    ]
    for variant, drafter, k, accept in servers:
        points.append(
            {
                "variant": variant,
                "drafter": drafter.value if drafter else "none",
                "draft_tokens": k,
                "accept_target": accept,
                "active": True,
            }
        )
        for c in (1, 4, 16, 64):
            ms = (
                price_step(box, ov, c, s).total_ms
                if drafter is None
                else price_cycle(box, ov, drafter, k, c, s).total_ms / accept
            )
            tables[f"sweep-{variant}-c{c}"] = pd.DataFrame(
                {
                    "variant": variant,
                    "concurrency": c,
                    "ok": True,
                    "tpot_s": ms / 1e3,
                    "prompt_tokens": 50,
                    "output_tokens": 128,
                    "spec_verify_ct": None if drafter is None else 128 / accept,
                },
                index=range(c),
            )
    tables["speculation_points"] = pd.DataFrame(points)
    params = {"served_config": QWEN3_MOE, "draft_config": {**QWEN3_MOE, "num_hidden_layers": 1, "num_experts": 0}}
    return MeasuredRuns.of_frames({"synthetic": tables}, gpu_name="NVIDIA H200", parameters=params)


def _span(value: float):
    from verifylab.span import Span

    return Span(value, value)


def test_a_fit_gives_back_known_overheads_and_predicts_the_accept_length_it_never_saw():
    target = costs_from_config(QWEN3_MOE)
    draft = costs_from_config({**QWEN3_MOE, "num_hidden_layers": 1, "num_experts": 0})
    box = Box(target, gpu_named("h200"), draft=draft, context=114.0, routing=Routing.COLLAPSED)
    runs = _synthetic_grid(2.5, 0.03, 2.4, 0.19, box)
    fit = fit_grid(stored_runs(runs), "synthetic", Routing.COLLAPSED)
    assert fit.fitted_on == {"host": "plain", "eagle3": "eagle3_d4_a2p00"}
    assert fit.overheads.host0_ms.low == pytest.approx(2.5, rel=1e-6) and fit.overheads.host1_ms == pytest.approx(0.03)
    assert fit.overheads.cycle[Drafter.EAGLE3] == pytest.approx((2.4, 0.19), rel=1e-6)
    three = next(s for s in fit.sweeps if s.variant == "eagle3_d4_a3p00")
    plain = dict(next(s for s in fit.sweeps if s.drafter is None).ms_per_token)
    predicted = gains(fit.box, fit.overheads, Drafter.EAGLE3, 3.0, 4, [c for c, _ in three.ms_per_token])
    for (c, ms), row in zip(three.ms_per_token, predicted, strict=True):
        assert row.gain.low == pytest.approx(plain[c] / ms, rel=1e-6)


def test_the_stored_grids_are_predicted_out_of_sample(stored):
    """Fitted on one H200 run's plain decoding and each drafter's sweep at accept length 2, the model prices the
    other accept lengths, the 2-token chains (a second run) and the spread-forced grid (a third, never fitted on)
    over each run's own plain decoding: out of sample the median cell of every run is within 10 %, every measured
    EAGLE-3 crossover lies in its predicted range, and at accept length 2 that range is at most 2x wide."""
    table = predicted_beside_measured(stored.measured)
    summary = grid_fit_summary(table)
    out = summary[summary["role"] == "out of sample"]
    assert set(out["run"]) == {GRID_RUN, GRID_RUN + "-k2", SPREAD_RUN}
    assert (out["median_error"] <= 0.10).all(), out
    assert set(summary["fitted_run"]) == {GRID_RUN}
    agree, total, _ = agreement(table)
    assert total == 64 and agree >= 58
    spread = table[table["run_id"] == SPREAD_RUN]
    assert set(spread["plain_routing"]) == {"uniform"} and set(spread["routing"]) == {"collapsed"}
    crossings = crossovers(table)
    eagle = crossings[crossings["drafter"] == "eagle3"]
    for row in eagle.itertuples():
        if row.role == "fit":
            continue
        if pd.isna(row.measured):
            assert pd.isna(row.predicted_high)
            continue
        low = row.predicted_low if not pd.isna(row.predicted_low) else 0.0
        high = row.predicted_high if not pd.isna(row.predicted_high) else float("inf")
        assert low <= row.measured <= high, row
    at_two = eagle[(eagle["accept_target"] == 2.0) & eagle["measured"].notna()]
    assert len(at_two) == 3
    assert (at_two["predicted_high"] / at_two["predicted_low"] <= 2.0).all(), at_two


def test_the_spread_grids_speculative_servers_ran_as_the_collapsed_grids(stored):
    """Only plain decoding spread in the spread-forced grid: its speculative servers' time per token sits within
    10 % of the collapsed grid's at the median cell (their tokens are the random draft's, whatever the sampling)."""
    alike = speculative_time_beside_fit(predicted_beside_measured(stored.measured))
    row = alike[alike["run"] == SPREAD_RUN].iloc[0]
    assert abs(row["median_ratio"] - 1) <= 0.10 and row["cells"] == 16


def test_the_spread_forced_grid_spread_plain_decoding_over_the_experts(stored):
    """With every request sampled, plain decoding at 128 streams takes at least what reading nearly every expert once
    allows (the router spread), and uniform routing leaves no measured point below physics."""
    spread = SPREAD_RUN
    assert grid_routing(stored.measured, spread) is Routing.UNIFORM
    assert not fit_grid(stored_runs(stored.measured), spread).below_physics
    before = stored.measured.read_table(spread, "grid_prediction")
    floor = before[before["streams"] == 128]["spread_floor_ms"].iloc[0]
    plain = dict(
        next(s for s in fit_grid(stored_runs(stored.measured), spread).sweeps if s.drafter is None).ms_per_token
    )
    assert plain[128] >= floor


def test_uniform_routing_is_refused_by_physics_on_the_random_weight_runs(stored):
    """Plain decoding at high load was faster than reading every expert allows: the random-weight model's router
    did not spread its tokens (so the stored grid is fitted with collapsed routing)."""
    assert fit_grid(stored_runs(stored.measured), GRID_RUN, Routing.UNIFORM).below_physics
    assert not fit_grid(stored_runs(stored.measured), GRID_RUN, Routing.COLLAPSED).below_physics


def test_case_study_box_regime_answers_and_the_reported_eagle3_rate(stored):
    """Calibrated to the reported plain decode rate only, the model puts the reported EAGLE-3 rate (54.1 against
    92.6 tok/s, never used to calibrate) inside the broken-P2P regime's range and outside the healthy one's."""
    from verifylab.model.answers.words import crossover_words
    from verifylab.model.case.speculation import speculation_case
    from verifylab.model.inputs.stored import stored_inputs

    cases = speculation_case(stored_inputs(stored))
    reported = 54.1 / 92.6
    degraded, healthy = cases[Regime.DEGRADED], cases[Regime.HEALTHY_P2P]
    assert degraded.gain_at(1).low <= reported <= degraded.gain_at(1).high
    assert not healthy.gain_at(1).low <= reported <= healthy.gain_at(1).high
    assert crossover_words(degraded.crossover) == "never pays"
    assert not cases[Regime.HOST_MEMORY].consistent  # 92.6 tok/s is faster than host memory allows
    assert "not the case study's regime" in crossover_words(cases[Regime.HOST_MEMORY].crossover, False)


def test_cli_answers_for_a_config_it_has_never_seen(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V2_LITE))
    args = ["model", "speculation", "--config", str(tmp_path), "--gpu", "rtx-pro-6000", "--accept", "2"]
    result = CliRunner().invoke(app, [*args, "--tp", "4", "--regime", "healthy-p2p", "--decode-tok-s", "150", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert [r["streams"] for r in out["rows"]] == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128]
    for row in out["rows"]:
        assert 0 < row["gain_low"] <= row["gain_high"]
    low, high = out["crossover_streams_low"], out["crossover_streams_high"]
    assert low is not None and (high is None or low <= high)
    assert "healthy P2P, 4 ranks" in out["inputs"]["allreduce"] and "150 tok/s" in out["inputs"]["host_overhead"]
    assert out["provenance"] == "modelled"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--tp", "8"], "--regime"),
        (["--tp", "8", "--regime", "healthy-p2p", "--latency", "x"], "one of --regime"),
        (["--regime", "fast"], "--regime 'fast'"),
        (["--streams", "1,two"], "--streams"),
        (["--accept", "5"], "accept length 5"),
        (["--drafter", "medusa"], "--drafter 'medusa'"),
        (["--gpu", "a100"], "--gpu 'a100'"),
        (["--decode-tok-s", "-3"], "--decode-tok-s"),
    ],
)
def test_cli_refuses_bad_input_in_one_line(tmp_path, repo_root, monkeypatch, extra, named):
    monkeypatch.chdir(repo_root)
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_MOE))
    base = ["model", "speculation", "--config", str(tmp_path), "--gpu", "h200", "--accept", "2"]
    result = CliRunner().invoke(app, [*base, *extra])
    assert result.exit_code != 0
    assert named in result.output and "Traceback" not in result.output


def test_a_grid_measured_twice_still_reads_as_one_finding(tmp_path, repo_root):
    """A store holding the same speculation grid twice (a run repeated, a fleet's copies) keeps chapter 02's
    finding: the newest run speaks for the grid and is the one the tables list (the older keeps its run page)."""
    import json
    import shutil

    from verifylab.analysis import speculation_load
    from verifylab.chapters.ch02_benchmarks import speculation_finding
    from verifylab.store.evidence import Evidence

    data = tmp_path / "data"
    shutil.copytree(repo_root / "data", data)
    grid = next(p for p in (data / "runs").iterdir() if p.name.endswith("-spec-load"))
    again = shutil.copytree(grid, grid.with_name(grid.name.replace("-spec-load", "-spec-load-again")))
    manifest = json.loads((again / "manifest.json").read_text())
    (again / "manifest.json").write_text(json.dumps(manifest | {"run_id": again.name}))

    ev = Evidence(data)
    assert "EAGLE-3" in speculation_finding(ev)
    runs = set(speculation_load.crossover_table(speculation_load.speculation_view(ev))["run"])
    assert again.name in runs and grid.name not in runs  # same experiment, same time: the later id stands for it


def test_serving_metrics_count_only_requests_within_the_slo(monkeypatch):
    """Goodput keeps the tokens of requests within both limits; p50 and p99 are over the cell's requests."""
    from verifylab.analysis import speculation_load
    from verifylab.sources import MeasuredRuns

    def request(ttft: float, tpot: float) -> dict:
        fields = {"variant": "plain", "concurrency": 2, "ok": True, "output_tokens": 100, "ttft_s": ttft}
        return fields | {"tpot_s": tpot, "drafter": "none", "draft_tokens": float("nan"), "active": True}

    requests = pd.DataFrame([request(0.1, 0.01), request(3.0, 0.01)]).assign(accept_target=float("nan"))
    monkeypatch.setattr(speculation_load, "grid_runs", lambda runs: ["run-1"])
    monkeypatch.setattr(speculation_load, "grid_requests", lambda runs, run_id: requests)
    metrics = speculation_load.serving_metrics(MeasuredRuns([]), {"ttft_s": 2.0, "tpot_s": 0.05})
    (row,) = metrics.to_dict("records")
    assert row["server"] == "plain decoding" and row["within_slo_pct"] == 50.0
    assert row["goodput_tokens_per_s"] == pytest.approx(2 / 0.01 * 0.5)  # half the tokens met the SLO
    assert row["ttft_p50_ms"] == pytest.approx(1550.0) and row["ttft_p99_ms"] > 2900


def test_a_chains_shared_experts_lie_between_the_two_physical_extremes():
    """Overlap 0: each of a chain's tokens draws its own experts; 1: the chain reads what one token reads; between
    them the experts read grow with less overlap, and never beyond every expert."""
    moe = costs_from_config(
        {
            "hidden_size": 2048,
            "num_hidden_layers": 4,
            "num_attention_heads": 32,
            "vocab_size": 1024,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 768,
        }
    )
    assert independent_draws(16, 4, 0.0) == 16 and independent_draws(16, 4, 1.0) == 4
    shared = moe.experts_read(16, Routing.UNIFORM, streams=4, overlap=1.0)
    half = moe.experts_read(16, Routing.UNIFORM, streams=4, overlap=0.5)
    own = moe.experts_read(16, Routing.UNIFORM, streams=4, overlap=0.0)
    assert shared == moe.experts_read(4, Routing.UNIFORM) < half < own == moe.experts_read(16, Routing.UNIFORM)
    assert moe.experts_read(10_000, Routing.UNIFORM) <= 128
    with pytest.raises(ModelInputError, match="overlap"):
        independent_draws(4, 1, 1.5)


def test_crossings_report_a_gain_that_comes_back_above_one():
    """A curve that dips, pays, and stops again is reported as three crossings, not its first."""
    found = crossings([(1, 0.8), (4, 0.9), (16, 1.2), (64, 1.1), (128, 0.7)])
    assert [what for _, what in found] == ["stops", "pays", "stops"]
    assert 4 < found[1][0] < 16 and 64 < found[2][0] < 128
    assert crossings([(1, 1.5), (128, 1.2)]) == []


def test_calibrating_to_a_grids_own_plain_rate_moves_predictions_toward_it(stored):
    """The fit of one run, calibrated to another grid's measured one-stream plain rate (as `box` calibrates to a
    box's), predicts that grid's speculative rates at least as well as uncalibrated (a grid never fitted on)."""
    from verifylab.analysis.grid_agreement import calibration_effect

    effect = calibration_effect(stored.measured)
    assert GRID_RUN + "-k2" in set(effect["run"]) and GRID_RUN not in set(effect["run"])
    assert (effect["calibrated_median_error"] <= effect["fitted_median_error"]).all(), effect
