import json

import pandas as pd
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.model.fits.compute_check import compute_validation, compute_validation_finding
from verifylab.model.pricing.regimes import max_oneshot_tokens, uses_oneshot


def test_flashinfer_oneshot_rule():
    assert max_oneshot_tokens(7168, 8) == 192
    assert uses_oneshot(192, 7168, 8) and not uses_oneshot(193, 7168, 8)


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


def test_the_compute_check_says_where_the_bytes_model_holds_and_where_it_misses():
    check = pd.DataFrame(
        {
            "tokens": [1, 8, 16, 256, 512],
            "experts_touched": [8, 59, 110, 382, 384],
            "error_pct": [0.0, 1.6, 0.0, -11.94, -29.7],
            "role": ["calibration", "prediction", "calibration", "prediction", "prediction"],
        }
    )
    text = compute_validation_finding(check)
    assert text.startswith("**Time per layer follows the bytes a pass reads within 1.6 %** at 8 tokens per pass")
    assert "256 tokens (382 of 384 experts read): -11.9 %; 512 tokens (384 of 384 experts read): -29.7 %" in text
    assert compute_validation_finding(check[check["tokens"] < 100]).endswith("none of them used to fit it.")


def test_cli_whatif_json_and_reconcile(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    result = CliRunner().invoke(app, ["model", "whatif", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["key"] for r in rows} == {
        "tp8_nccl",
        "tp8_fused",
        "tp8_pcie_ipc",
        "tp4_pp2",
        "ep8_tp_attention",
        "dp_attention_ep8",
    }
    assert {r["regime_key"] for r in rows} == {"healthy P2P", "host-memory fallback", "degraded"}
    for row in rows:
        if row["verify_ms_low"] is not None:
            assert row["floor_ms_low"] <= row["compute_ms_low"]  # never below the floor
            assert row["verify_ms_low"] <= row["verify_ms_high"]
            assert row["tokens_per_s_low"] <= row["tokens_per_s_high"]
        else:
            assert row["not_priced"]  # a cell the regime cannot run says why
    rec = CliRunner().invoke(app, ["model", "reconcile", "--json"])
    assert rec.exit_code == 0 and len(json.loads(rec.output)) >= 10


def _curve_file(path, scale: float):
    rows = [("p2p", "nccl", t, us * scale) for t, us in ((1, 30), (16, 34), (64, 45), (256, 90))]
    rows += [("p2p", "fused", t, us * scale) for t, us in ((1, 12), (16, 15), (64, 25), (256, 70))]
    path.write_text("path,impl,tokens,us\n" + "".join(f"{p},{i},{t},{u}\n" for p, i, t, u in rows))
    return str(path)


def _box_rows(args):
    result = CliRunner().invoke(app, ["model", "whatif", "--json", *args])
    assert result.exit_code == 0, result.output
    return {r["key"]: r for r in json.loads(result.output) if r["regime_key"] == "this box (probe)"}


def test_whatif_prices_the_readers_box_from_its_own_curve_and_says_which(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    fast = _box_rows(["--latency", _curve_file(tmp_path / "fast.csv", 1.0)])
    slow = _box_rows(["--latency", _curve_file(tmp_path / "slow.csv", 4.0)])
    assert fast["tp8_nccl"]["box_curve"].startswith(f"file {tmp_path / 'fast.csv'}")
    assert fast["tp8_nccl"]["verify_ms_low"] < slow["tp8_nccl"]["verify_ms_low"]
    # a curve file has no verdict: what it did not measure is not priced from a guessed regime
    assert fast["tp4_pp2"]["verify_ms_low"] is None and "regime is unknown" in fast["tp4_pp2"]["not_priced"]
    # the reader's decode rate calibrates EAGLE-3's gain, and the output names it
    given = _box_rows(["--latency", str(tmp_path / "fast.csv"), "--decode-tok-s", "40"])
    assert given["tp8_nccl"]["decode_calibrated_to"] == "given (--decode-tok-s)"
    assert given["tp8_nccl"]["eagle3_gain_low"] != fast["tp8_nccl"]["eagle3_gain_low"]


def test_whatif_says_in_words_which_curve_priced_the_box(repo_root, monkeypatch, tmp_path):
    monkeypatch.chdir(repo_root)
    text = CliRunner().invoke(app, ["model", "whatif", "--latency", _curve_file(tmp_path / "fast.csv", 1.0)])
    assert "this box: file" in text.output
    # without --latency the output says which stored probe (if any) priced the box
    assert "this box: " in CliRunner().invoke(app, ["model", "whatif"]).output


def test_whatif_refuses_a_probe_of_another_size_and_a_bad_decode_rate(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    two = CliRunner().invoke(app, ["model", "whatif", "--latency", "20261201-092338-2xh200-probe-p2p"])
    assert two.exit_code != 0 and "measured 2 rank(s)" in two.output
    bad = CliRunner().invoke(app, ["model", "whatif", "--decode-tok-s", "-3"])
    assert bad.exit_code != 0 and "--decode-tok-s" in bad.output
