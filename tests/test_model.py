import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ModelInputError
from verifylab.model.costmodel import (
    LinkLatency,
    case_inputs,
    eagle3_tokens_per_s,
    max_oneshot_tokens,
    pass_terms,
    scenarios_frame,
    solve_allreduce_us,
    uses_oneshot,
    whatif_scenarios,
)
from verifylab.model.inputs import compute_validation
from verifylab.model.reconcile import reconcile
from verifylab.store.reference import load_reported_figures


def simple_case(**over):
    values = dict(
        layers=10,
        allreduces_per_layer=2,
        draft_tokens=4,
        verify_ms=10.0,
        verify_allreduce_ms=8.0,
        accept_length=2.0,
        draft_ms=2.0,
        norm_us_unfused=20.0,
        norm_us_fused=0.0,
        oneshot_allreduce_us=100.0,
    )
    return case_inputs(**(values | over))


def test_pass_terms_sum():
    p = pass_terms(
        name="x",
        tokens=4,
        compute_ms=5,
        allreduces=122,
        allreduce_us=200,
        norm_us=10,
        launches=10,
        launch_us=5,
    )
    assert p.allreduce_ms == pytest.approx(24.4)
    assert p.norm_ms == pytest.approx(1.22)
    assert p.total_ms == pytest.approx(5 + 24.4 + 1.22 + 0.05)


def test_eagle3_throughput_and_bad_inputs():
    assert eagle3_tokens_per_s(2.0, 19.0, 1.0) == pytest.approx(100.0)
    with pytest.raises(ModelInputError, match="accept_length = 0"):
        eagle3_tokens_per_s(0, 10, 1)
    with pytest.raises(ModelInputError, match="allreduce_us"):
        pass_terms(name="x", tokens=1, compute_ms=1, allreduces=1, allreduce_us=-5)
    with pytest.raises(ModelInputError, match="accept_length"):
        simple_case(accept_length=0)


def test_whatif_on_a_hand_computed_case():
    case = simple_case()  # 20 all-reduces of 400 us = 8 ms; compute 2 ms of which norms 20 x 20 us = 0.4 ms
    rows = {s.kind: s for s in whatif_scenarios(case)}
    assert rows["baseline"].total_ms == pytest.approx(10.0)
    assert rows["kernel_fusion"].total_ms == pytest.approx(10.0 - 0.4)
    assert rows["algorithm_substitution"].total_ms == pytest.approx(1.6 + 20 * 0.1 + 0.4)
    assert rows["combined"].total_ms == pytest.approx(1.6 + 20 * 0.1)
    # elimination sized to match combined (3.6 ms): remove ceil((10 - 3.6) / 0.42) = 16 of 20
    assert rows["elimination"].allreduces == 4
    frame = scenarios_frame(case, whatif_scenarios(case))
    assert frame.loc[frame.kind == "baseline", "eagle3_tokens_per_s"].item() == pytest.approx(2.0 / 12.0 * 1e3)
    assert set(frame["provenance"]) == {"modelled"}


def test_fusion_not_applied_over_batch_limit():
    case = simple_case()
    rows = {s.kind: s for s in whatif_scenarios(case, batch=600)}  # 2400 tokens > 2048
    assert not rows["combined"].fusion_applied
    assert rows["combined"].allreduce_us == rows["baseline"].allreduce_us
    assert "fusion not applied" in rows["kernel_fusion"].note


def test_flashinfer_oneshot_rule():
    assert max_oneshot_tokens(7168, 8) == 192
    assert uses_oneshot(192, 7168, 8) and not uses_oneshot(193, 7168, 8)


def test_link_latency_formulas():
    link = LinkLatency(alpha_us=10, bandwidth_gbs=50)
    msg = 50_000  # bytes: 1 us at 50 GB/s
    assert link.ring_us(msg, 8) == pytest.approx(14 * 10 + 14 / 8 * 1)
    assert link.oneshot_us(msg, 8) == pytest.approx(10 + 7 * 1)
    assert link.twoshot_us(msg, 8) == pytest.approx(20 + 14 / 8)


def test_solved_latency_reproduces_target():
    case = simple_case()
    per = solve_allreduce_us(case, 150.0)
    solved = case.model_copy(update={"oneshot_allreduce_us": per})
    combined = next(s for s in whatif_scenarios(solved) if s.kind == "combined")
    assert eagle3_tokens_per_s(2.0, combined.total_ms, 2.0) == pytest.approx(150.0)
    with pytest.raises(ModelInputError, match="out of reach"):
        solve_allreduce_us(case, 10_000.0)


def test_reconcile_arithmetic_on_the_reported_figures(repo_root):
    figures = load_reported_figures(repo_root / "data")
    table = reconcile(figures, norm_saving_us=18.0).set_index("step")
    assert table.loc["all-reduces per forward", "value"] == 122
    assert table.loc["latency per all-reduce in verify", "value"] == pytest.approx(25000 / 122)
    assert table.loc["upper bound per all-reduce in decode", "value"] == pytest.approx(1e6 / 92.6 / 122)
    removed = 2.0 / 54.1 * 1e3 - 2.0 / 96.1 * 1e3
    assert table.loc["cycle time removed by 54.1 -> 96.1 tok/s (accept length unchanged)", "value"] == pytest.approx(
        removed
    )
    assert table.loc["share kernel fusion could carry", "value"] == pytest.approx(122 * 18.0 / 1e3)
    upgrade = 2.0 / 54.1 * 1e3 * (1 - 89.5 / 92.6)
    assert table.loc["share the CUDA 12.8 -> 13 upgrade could carry", "value"] == pytest.approx(upgrade)
    assert table.loc["left for algorithm substitution", "value"] == pytest.approx(removed - upgrade - 2.196)
    assert table.loc["EAGLE-3 tok/s implied by verify share and accept length", "value"] == pytest.approx(
        2.0 / (30 / 0.97) * 1e3
    )


def test_reconcile_follows_the_figures(repo_root):
    figures = load_reported_figures(repo_root / "data")
    changed = figures.copy()
    changed.loc[changed.figure_id == "verify_allreduce_ms", "value"] = 12.2
    table = reconcile(changed, norm_saving_us=0.0).set_index("step")
    assert table.loc["latency per all-reduce in verify", "value"] == pytest.approx(100.0)


def test_compute_validation_is_not_circular():
    frame = pd.DataFrame(
        {
            "tokens": [1, 4, 16],
            "norm": "unfused",
            "experts_touched": [8, 28, 110],
            "layer_ms": [0.2, 0.3, 0.55],
        }
    )
    out = compute_validation(frame)
    assert list(out["role"]) == ["calibration", "prediction", "calibration"]
    assert out.loc[out.role == "calibration", "error_pct"].abs().max() < 1e-9
    assert out.loc[out.role == "prediction", "error_pct"].abs().item() > 0


def test_cli_whatif_json_and_reconcile(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = CliRunner().invoke(app, ["model", "whatif", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {"baseline", "kernel_fusion", "algorithm_substitution", "elimination"} <= {r["kind"] for r in rows}
    for row in rows:
        assert {"name", "kind", "allreduces_per_pass", "verify_ms", "eagle3_tokens_per_s"} <= set(row)
    combined = next(r for r in rows if r["kind"] == "combined")
    assert combined["eagle3_tokens_per_s"] == pytest.approx(96.1)  # solved to reproduce the report
    rec = CliRunner().invoke(app, ["model", "reconcile", "--json"])
    assert rec.exit_code == 0 and len(json.loads(rec.output)) >= 10
