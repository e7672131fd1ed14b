"""The live-smoke sections and chapter 03 starting the server it profiles (against the test double)."""

import sys

import pandas as pd
import pytest

from verifylab.analysis.live_smoke import live_smoke_benchmarks, live_smoke_profile, live_smoke_runs
from verifylab.chapters import ch03_verify_breakdown
from verifylab.errors import ParameterError
from verifylab.store.evidence import Evidence

from .test_bench import free_port

RUN = "20261129-114733-h200-live-smoke"


def test_sections_show_the_stored_smoke_with_its_caveat(shipped):
    assert RUN in live_smoke_runs(shipped)
    bench = live_smoke_benchmarks(shipped)._repr_html_()
    assert "Mechanics only, not performance" in bench and "0.5.17" in bench and "NVIDIA H200" in bench
    assert "server accept length" in bench and "NGRAM" in bench  # headers as the book shows them
    profile = live_smoke_profile(shipped)._repr_html_()
    assert "Mechanics only, not performance" in profile and "_fwd_kernel" in profile and "target" in profile


def test_sections_without_a_smoke_say_so(tmp_path):
    assert "No live-smoke run" in live_smoke_benchmarks(Evidence(tmp_path))._repr_html_()
    assert "No live-smoke profile" in live_smoke_profile(Evidence(tmp_path))._repr_html_()


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_chapter3_starts_the_variant_it_profiles_and_logs_it_apart(tmp_path):
    server = {
        "model_path": "tiny",
        "port": free_port(),
        "launcher": [sys.executable, "-m", "verifylab.testing.server"],
        "extra_args": ["--step-ms", "5"],
    }
    params = ch03_verify_breakdown.Params.validated(
        mode="live",
        data_dir=tmp_path,
        run_id="ch3-serve",
        label="test double",
        profile_steps=2,
        serve_variant="ngram",
        **server,
    )
    section = ch03_verify_breakdown.live(params, Evidence(tmp_path))
    html = section._repr_html_()
    assert "Started ngram for the capture" in html and "speculative NGRAM" in html
    run = tmp_path / "runs" / "ch3-serve"
    assert (run / "logs" / "profile" / "server-ngram.log").is_file()
    assert not (run / "logs" / "server-ngram.log").exists()  # chapter 02's log of the same variant stays its own
    kernels = pd.read_csv(run / "trace_kernels.csv")
    assert {"kernel", "group", "count", "total_us"} <= set(kernels.columns)
    with pytest.raises(ParameterError, match="serve_variant"):  # refused before anything is written
        ch03_verify_breakdown.Params.validated(mode="live", data_dir=tmp_path, run_id="ch3-bad", serve_variant="nope")
    assert not (tmp_path / "runs" / "ch3-bad").exists()


def test_the_smoke_is_never_evidence_for_a_recommendation(shipped, repo_root, tmp_path):
    import shutil

    from verifylab.analysis.facts import facts_from_evidence
    from verifylab.store.evidence import Evidence

    assert facts_from_evidence(shipped).fusion_state is None  # its fusion row is TP 1, inactive
    renamed = tmp_path / "runs" / "20261129-114733-h200-other"  # the same data, of no smoke campaign, counts
    shutil.copytree(repo_root / "data" / "runs" / RUN, renamed)
    shutil.copytree(repo_root / "data" / "reference", tmp_path / "reference")
    manifest = (renamed / "manifest.json").read_text().replace(RUN, renamed.name)
    manifest = manifest.replace('"campaign": "live-smoke"', '"campaign": ""')  # a run of no smoke campaign
    (renamed / "manifest.json").write_text(manifest)
    assert facts_from_evidence(Evidence(tmp_path)).fusion_state is None  # marked mechanics_only: never evidence, any id
    (renamed / "manifest.json").write_text(manifest.replace('"mechanics_only": true', '"mechanics_only": false'))
    assert facts_from_evidence(Evidence(tmp_path)).fusion_state["run_id"] == renamed.name  # a real run's state counts
