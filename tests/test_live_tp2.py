"""The live TP-2 evidence (real SGLang 0.5.17 on 2 x H200, random-weight tiny model) as the chapters show it."""

from __future__ import annotations

import shutil

import pandas as pd

from verifylab.analysis import live_tp2 as lt
from verifylab.store.runs import RunStore


def store(repo_root) -> RunStore:
    return RunStore(repo_root / "data" / "runs")


ALL_FOUR = "20261130-130757-2xh200-live-tp2"  # the run that holds all four variants


def test_each_variant_comes_from_the_newest_run_where_it_was_active(repo_root, tmp_path):
    """The run with all four variants supplies all four; without it, the first full round (whose EAGLE-3 variants
    failed) and the later EAGLE-3-only round together still give all four, each from a run where it ran."""
    sources = lt.variant_sources(store(repo_root), "variant_state")
    assert list(sources) == ["baseline", "fusion", "eagle3", "eagle3_fusion"]
    assert set(sources.values()) == {ALL_FOUR}
    older = tmp_path / "runs"
    shutil.copytree(repo_root / "data" / "runs", older, ignore=lambda d, names: [n for n in names if n == ALL_FOUR])
    sources = lt.variant_sources(RunStore(older), "variant_state")
    assert list(sources) == ["baseline", "fusion", "eagle3", "eagle3_fusion"]
    assert sources["eagle3"].endswith("-live-tp2-eagle3") and sources["baseline"].endswith("-live-tp2")
    single = lt.live_single_stream(store(repo_root))
    assert single.loc[["eagle3", "eagle3_fusion"], "accept_length"].notna().all()
    assert single.loc[["baseline", "fusion"], "accept_length"].isna().all()  # no speculation, no accept length
    assert (single["interval_low"] <= single["median_output_tokens_per_s"]).all()
    assert (single["interval_high"] >= single["median_output_tokens_per_s"]).all()
    assert (single.loc[single["runs"] == 3, "interval_coverage"] == 0.75).all()  # 3 runs: min-max covers 75 %


def test_fused_kernels_replace_custom_allreduces_one_for_one_in_target_passes(repo_root):
    kernels = lt.live_allreduce_kernels(store(repo_root))
    target = kernels[kernels["phase"] == "target"].pivot_table(index="variant", columns="impl", values="per_pass")
    total = target.sum(axis=1)
    assert total["baseline"] == total["fusion"] and total["eagle3"] == total["eagle3_fusion"]  # fusion, not removal
    assert pd.isna(target.loc["baseline", "flashinfer_fused"])  # none fused without fusion
    assert target.loc["fusion", "flashinfer_fused"] == total["fusion"] - 2  # last MLP + embedding stay unfused
    draft = kernels[(kernels["variant"] == "eagle3_fusion") & kernels["phase"].isin(["draft", "draft_extend"])]
    assert set(draft["impl"]) == {"custom"}  # the Llama draft never fuses
    finding = lt.live_kernels_finding(kernels)
    assert f"{total['fusion'] - 2:.0f} of {total['fusion']:.0f}" in finding


def test_the_simulated_pcie_round_is_skipped_before_the_gate_and_fused_after(repo_root):
    sim = lt.pcie_simulation(store(repo_root))
    assert sim.loc["before", "fusion_logged"] == "skipped" and not sim.loc["before", "active"]
    assert sim.loc["after", "fusion_logged"] == "enabled" and sim.loc["after", "active"]
    fused = lt.IMPL_NAMES["flashinfer_fused"]
    assert sim.loc["before", fused] == 0 and sim.loc["after", fused] > 0
    assert "**skipped**" in lt.pcie_finding(sim) and "**enabled**" in lt.pcie_finding(sim)


def test_no_live_runs_say_so(tmp_path):
    empty = RunStore(tmp_path)
    assert lt.live_allreduce_kernels(empty).empty and lt.live_single_stream(empty).empty
    assert lt.live_kernels_finding(pd.DataFrame()).startswith("No live TP-2 profile")
    assert lt.pcie_finding(lt.pcie_simulation(empty)).startswith("The simulated-PCIe round")


def test_a_newer_round_where_a_variant_failed_does_not_replace_one_where_it_ran(repo_root, tmp_path):
    src = store(repo_root)
    run_ids = sorted(set(lt.variant_sources(src, "profile_state").values()))
    for run_id in run_ids:
        shutil.copytree(src.path(run_id), tmp_path / run_id)
    copy = RunStore(tmp_path)
    newest = run_ids[-1]
    state = copy.read_table(newest, "profile_state")
    copy.write_table(newest, "profile_state", state.assign(active=False), fmt="csv")
    assert newest not in lt.variant_sources(copy, "profile_state").values()


def test_pcie_sm120_outlook_follows_the_wheels(shipped):
    """Fused on a PCIe SM120 box only where the pinned FlashInfer's workspace (read from its wheel) needs no
    multicast; the one upgrade target is the first pair whose FlashInfer builds for SM12x as published; every row
    says it is inferred, not run on SM120."""
    from verifylab.analysis.gates import pcie_sm120_finding, pcie_sm120_outlook, upgrade_target
    from verifylab.vocab import flashinfer_workspace_needs_multicast

    ev = shipped
    outlook = pcie_sm120_outlook(ev.fusion_forensics)
    for version, row in outlook.iterrows():
        fused = row["PCIe SM120"].startswith("fused")
        assert fused == (not flashinfer_workspace_needs_multicast(row["flashinfer (pinned)"])), version
        assert ("multicast-preflight" in row["to open"]) == (row["workspace preflight"] == "yes")
    assert (outlook["provenance"] == "inferred from source and an SM90 simulation, not run on SM120").all()
    # #68: the first pair that fuses as published and runs SGLang's PCIe-IPC all-reduce (0.5.20 fuses, has no PCIe-IPC)
    assert upgrade_target(outlook) == ("0.5.22", "0.7.1")
    assert upgrade_target(outlook.drop(index=["0.5.21", "0.5.22", "0.5.23"])) == ("0.5.20", "0.6.18")
    assert outlook.loc["0.5.9", "workspace"] == "CUDA IPC buffers (no multicast)"  # the case study's era
    finding = pcie_sm120_finding(outlook)
    assert "SGLang 0.5.22 with its pinned FlashInfer 0.7.1" in finding and "PCIe-IPC" in finding
