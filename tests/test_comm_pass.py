"""One verify pass predicted from compute + a measured latency curve (modelled), checked against measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app
from verifylab.errors import ModelInputError
from verifylab.model.fits.pass_check import validate_against_run
from verifylab.model.inputs.curves import load_curves, parse_nccl_tests
from verifylab.model.inputs.stored import stored_runs
from verifylab.model.pricing.measured_pass import predict_pass
from verifylab.store.runs import RunStore

LATENCY = Path(__file__).parent / "data" / "latency"


def by_name(variants: list[dict]) -> dict[str, dict]:
    return {v["name"]: v for v in variants}


def test_nccl_tests_output_and_csv_give_the_same_curve():
    from_nccl_tests = parse_nccl_tests((LATENCY / "all_reduce_perf_shm.txt").read_text(), "shm", "fixture")
    (from_csv,) = [c for c in load_curves(str(LATENCY / "curve.csv"), None) if c.path == "shm"]
    assert from_nccl_tests.message_bytes == from_csv.message_bytes and from_nccl_tests.us == from_csv.us
    assert from_nccl_tests.at(2 * 7168 * 2) == pytest.approx((16.0 * 20.0) ** 0.5)  # log-log midpoint of k=1..4


def test_predictions_keep_norms_under_elimination_and_vary_with_k():
    curves = load_curves(str(LATENCY / "curve.csv"), None)
    k1 = by_name(predict_pass(8.0, 1, curves, "nvlink", norm_us=2.0))
    k16 = by_name(predict_pass(8.0, 16, curves, "nvlink", norm_us=2.0))
    assert k1["nccl"]["pass_ms"] == pytest.approx(8.0 + 122 * 10.0 / 1e3)
    assert k1["one_allreduce_per_layer"]["pass_ms"] == pytest.approx(8.0 + 61 * 10.0 / 1e3)
    assert k1["one_allreduce_per_layer"]["norm_ms"] == k1["nccl"]["norm_ms"] == pytest.approx(122 * 2.0 / 1e3)
    assert k1["fused"]["pass_ms"] == pytest.approx(8.0 - 122 * 2.0 / 1e3 + 122 * 5.0 / 1e3)  # norm in the kernel
    assert k16["nccl"]["pass_ms"] > k1["nccl"]["pass_ms"] and k16["fused"]["pass_ms"] > k1["fused"]["pass_ms"]
    shm = by_name(predict_pass(8.0, 16, curves, "shm", norm_us=2.0))
    assert shm["fused"]["pass_ms"] is None and "needs P2P" in shm["fused"]["reason"]


def test_cli_model_pass_json_on_an_nccl_tests_file_exits_0(tmp_path):
    args = ["model", "pass", "--compute-ms", "8", "--tokens", "16", "--path", "shm", "--json"]
    args += ["--latency", str(LATENCY / "all_reduce_perf_shm.txt"), "--data-dir", str(tmp_path), "--norm-us", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    variants = by_name(json.loads(result.output)["variants"])
    assert variants["nccl"]["pass_ms"] == pytest.approx(8.0 + 122 * 36.0 / 1e3)
    assert variants["fused"]["pass_ms"] is None
    assert {"name", "pass_ms", "allreduce_ms", "norm_ms", "compute_ms"} <= set(variants["nccl"])


def test_a_bad_latency_file_is_named(tmp_path):
    bad = tmp_path / "perf.txt"
    bad.write_text("# header\n 14336 7168 bfloat16 sum -1 abc\n")
    with pytest.raises(ModelInputError, match=r"perf.txt:2: not an all_reduce_perf data row"):
        load_curves(str(bad), None, "shm")
    with pytest.raises(ModelInputError, match="neither a file nor a stored run id"):
        load_curves("nope", None)


def test_predictions_match_the_two_h200_measurement_within_12_percent(repo_root):
    """Inputs: the run's own isolated latency curves and compute_only pass; never the pass it predicts."""
    check = validate_against_run(stored_runs(RunStore(repo_root / "data" / "runs").measured()))
    assert set(check["variant"]) == {"nccl", "fused", "one_allreduce_per_layer"}
    assert set(check["path"]) == {"nvlink", "shm", "socket"}
    assert check["error_pct"].abs().max() < 12


def test_latency_is_a_file_when_the_path_exists_even_with_a_run_store(repo_root, tmp_path, monkeypatch):
    """An absolute or relative file path is read as a file (never validated as a run name), with ./data/runs
    present; a missing norm curve is an error, never a silent zero (#25 item 11)."""
    from typer.testing import CliRunner

    from verifylab.cli import app

    curve = tmp_path / "curve.csv"
    curve.write_text("path,impl,tokens,us\nbox,nccl,1,30\nbox,nccl,4,36\nbox,nccl,16,45\n")
    monkeypatch.chdir(repo_root)  # ./data/runs exists here
    args = ["model", "pass", "--compute-ms", "8", "--tokens", "4", "--path", "box", "--json"]
    result = CliRunner().invoke(app, [*args, "--latency", str(curve)])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(tmp_path)
    relative = CliRunner().invoke(app, [*args, "--latency", "curve.csv", "--data-dir", str(repo_root / "data")])
    assert relative.exit_code == 0, relative.output
    no_norm = CliRunner().invoke(app, [*args, "--latency", "curve.csv", "--data-dir", str(tmp_path)])
    assert no_norm.exit_code == 2 and "give --norm-us" in no_norm.output


def test_model_pass_savings_are_within_25_percent_of_the_measured_range(repo_root):
    """Each variant's saving against NCCL, predicted with in-pass costs, lies within 25 % of the range the
    campaign's runs measured, on every path and token count (#25 item 5)."""
    from verifylab.model.fits.pass_check import saving_check
    from verifylab.store.runs import RunStore

    check = saving_check(stored_runs(RunStore(repo_root / "data" / "runs").measured()))
    assert len(check) >= 10 and {"fused", "one_allreduce_per_layer"} <= set(check["variant"])
    assert (check["error_pct"].abs() <= 25).all(), check[check["error_pct"].abs() > 25]


def test_cli_model_pass_prices_in_pass_and_its_savings_meet_the_measured_ones(repo_root, monkeypatch):
    """`verifylab model pass` itself (not only the library's check) prices each all-reduce as it runs inside a pass:
    its NCCL -> fused and NCCL -> one-per-layer savings lie within 25 % of what the campaigns measured, on every path
    and token count; the fused factor is the fit's at the message; --isolated prices every call as measured alone."""
    from verifylab.model.fits.in_pass import fused_in_pass_fit
    from verifylab.model.fits.pass_check import saving_check

    monkeypatch.chdir(repo_root)
    store = RunStore(repo_root / "data" / "runs").measured()
    check = saving_check(stored_runs(store))
    newest = store.newest_with("allreduce_latency", "verify_pass")
    passes = store.read_table(newest, "verify_pass").set_index(["path", "tokens", "variant"])["pass_ms"]
    for row in check.itertuples():
        args = ["model", "pass", "--compute-ms", str(passes[(row.path, row.tokens, "compute_only")]), "--json"]
        args += ["--tokens", str(row.tokens), "--latency", newest, "--path", row.path]
        out = json.loads(CliRunner().invoke(app, args).output)
        priced = by_name(out["variants"])
        saving = priced["nccl"]["pass_ms"] - priced[row.variant]["pass_ms"]
        assert saving == pytest.approx(row.predicted_saving_ms)
        assert row.measured_low_ms * 0.75 <= saving <= row.measured_high_ms * 1.25, row
        if row.path == "nvlink" and row.variant == "fused":
            factor = out["in_pass_factors"]["fused"]
            assert factor == pytest.approx(fused_in_pass_fit(stored_runs(store)).at(row.tokens * 7168 * 2))
            alone = json.loads(CliRunner().invoke(app, [*args, "--isolated"]).output)
            assert alone["in_pass_factors"] == {}
            fused_alone = by_name(alone["variants"])["fused"]["allreduce_ms"]
            assert priced["fused"]["allreduce_ms"] == pytest.approx(fused_alone * factor)
