"""The measured communication of a verify pass (2 x H200 runs) as the book shows it."""

from __future__ import annotations

import pandas as pd

from verifylab.analysis import comm_campaign as cm
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
    check = cm.prediction_check(store(repo_root).measured())
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


def _trace_rows(path: str, passes: int, pieces: int) -> list[dict]:
    """``passes`` profiled passes of 4 all-reduces, each pass's marker cut into ``pieces`` pieces."""
    rows = []
    for step in range(passes * pieces):
        share = 4 // pieces
        rows.append(
            {"path": path, "variant": "nccl", "tokens": 4, "step": step, "allreduce_count": share,
             "comm_us": 10.0 * share, "exposed_comm_us": 10.0 * share, "compute_us": 5.0 * share,
             "idle_us": 1.0, "span_us": 16.0 * share}
        )  # fmt: skip
    return rows


def test_a_pass_marked_in_pieces_is_summed_back_into_passes():
    steps = pd.DataFrame(_trace_rows("nvlink", 3, 1) + _trace_rows("shm", 3, 1) + _trace_rows("socket", 3, 4))
    passes = cm.passes_from_marker_pieces(steps).set_index("path")
    assert passes.groupby("path").size().to_dict() == {"nvlink": 3, "shm": 3, "socket": 3}
    socket = passes.loc["socket"].iloc[0]
    assert socket["allreduce_count"] == 4 and socket["comm_us"] == 40.0 and socket["idle_us"] == 4.0
    assert socket["markers_per_pass"] == 4 and passes.loc["nvlink"].iloc[0]["markers_per_pass"] == 1


def test_the_pieces_note_names_the_row_and_its_counts(tmp_path):
    from .test_runs import make_store

    s, manifest = make_store(tmp_path)
    s.save_manifest(manifest.model_copy(update={"run_id": "20261130-000000-trace-test"}))
    steps = pd.DataFrame(_trace_rows("nvlink", 2, 1) + _trace_rows("socket", 2, 2))
    s.write_table("20261130-000000-trace-test", "verify_pass_trace", steps)
    note = str(cm.marker_pieces_note(s))
    assert "socket" in note and "4 markers for 2 passes, 2 per pass" in note
    assert "each holding one all-reduce" not in note  # pieces of 2 all-reduces each
    table = cm.measured_trace_breakdown(s)
    assert table.loc[("socket", "nccl", 4), "allreduce_count"] == 4
