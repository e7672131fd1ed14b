"""The measured communication of a verify pass (2 x H200 runs) as the book shows it."""

from __future__ import annotations

import pandas as pd

from verifylab.report import comm_measured as cm
from verifylab.store.runs import RunStore


def store(repo_root) -> RunStore:
    return RunStore(repo_root / "data" / "runs")


def test_fusion_vs_elimination_is_differences_of_the_stored_pass_times(repo_root):
    s = store(repo_root)
    gains = cm.fusion_vs_elimination_measured(s)
    passes = cm.verify_pass_measured(s)
    assert set(gains["path"]) == {"nvlink", "shm", "socket"}
    assert (gains["provenance"] == "measured").all() and gains["label"].str.contains("not Blackwell").all()
    row = gains[(gains["path"] == "nvlink") & (gains["tokens"] == 16)].iloc[0]
    ms = passes[(passes["path"] == "nvlink") & (passes["tokens"] == 16)].set_index("variant")["pass_ms"]
    assert row["fusion_saves_ms"] == ms["nccl"] - ms["fused"]
    assert row["removing_one_per_layer_saves_ms"] == ms["nccl"] - ms["one_allreduce_per_layer"]
    # fusion needs P2P: never reported for the host-memory and socket paths
    assert gains.loc[gains["path"] != "nvlink", "fusion_saves_ms"].isna().all()


def test_the_finding_is_formatted_from_the_values():
    gains = pd.DataFrame(
        [
            {
                "path": "nvlink",
                "tokens": 16,
                "unfused_pass_ms": 30.0,
                "communication_ms": 1.234,
                "fusion_saves_ms": 0.5,
                "removing_one_per_layer_saves_ms": 0.25,
                "removing_both_saves_ms": 1.2,
                "label": "test frame",
                "run_id": "r1",
            }
        ]
    )
    text = cm.comm_finding(gains, tokens=16)
    assert "1.23 ms of a 30.00 ms pass" in text and "saves 0.50 ms" in text and "saves 0.25 ms" in text
    assert "test frame; run r1" in text
    assert cm.comm_finding(gains.iloc[0:0]) == "No multi-GPU measurement of the verify pass is stored yet."


def test_the_prediction_finding_quotes_the_worst_error_of_the_check(repo_root):
    check = cm.prediction_check(store(repo_root))
    worst = check["error_pct"].abs().max()
    assert f"within {worst:.1f} %" in cm.prediction_finding(check)
    assert cm.prediction_finding(check.iloc[0:0]).startswith("No measured pass")


def test_summarizing_the_stored_live_traces_again_gives_the_stored_tables(repo_root, tmp_path):
    """The TP-2 run's profile tables were re-derived from its traces after the classifier learned SGLang's custom
    all-reduce v2 (manifest note): doing it again reproduces them."""
    import shutil

    from verifylab.trace.profile_tables import resummarize_profiles

    run_id = "20261130-080118-2xh200-live-tp2"
    shutil.copytree(repo_root / "data" / "runs" / run_id, tmp_path / "runs" / run_id)
    copy = RunStore(tmp_path / "runs")
    before = copy.read_table(run_id, "allreduce_kernels")
    assert resummarize_profiles(copy, run_id, message_bytes=4 * 1024 * 2) == ["baseline", "fusion"]
    pd.testing.assert_frame_equal(copy.read_table(run_id, "allreduce_kernels"), before)


def test_verify_allreduce_bytes_follow_the_served_model(tmp_path):
    """A live profile's message size is the served model's hidden size, not Kimi-K2's (a tiny model at 1024)."""
    from verifylab.chapters.ch03_verify_breakdown import verify_allreduce_bytes

    (tmp_path / "config.json").write_text('{"hidden_size": 1024}', encoding="utf-8")
    assert verify_allreduce_bytes(str(tmp_path), 4) == 4 * 1024 * 2
    assert verify_allreduce_bytes(None, 4) == 4 * 7168 * 2
