# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fusion vs elimination of all-reduces
#
# The case study argued that FlashInfer's all-reduce fusion "fuses kernels but does not eliminate
# all-reduces", so it should save 2-8 ms per verify pass. Then EAGLE-3 went from 54.1 to 96.1 tok/s with it,
# while plain decoding stayed at 92.6. This chapter explains that with arithmetic.
#
# ## Three different things
#
# - **Kernel fusion** — the all-reduce's output feeds residual add + RMSNorm inside the same kernel: fewer
#   launches, one less round trip through memory per all-reduce. The number and latency of all-reduces do
#   not change.
# - **Algorithm substitution** — the same number of all-reduces, each cheaper. On a PCIe box SGLang's own
#   custom all-reduce is disabled beyond two GPUs, so every all-reduce goes to NCCL, whose ring takes
#   2(n-1) = 14 sequential steps at 8 ranks. FlashInfer's TRT-LLM fusion kernels do the all-reduce
#   themselves: one-shot (each rank pushes its slice to every peer and polls locally; up to about 192
#   tokens at TP 8 and hidden 7168) or two-shot above that. "Fusion" therefore also *swaps the algorithm*.
# - **Elimination** — fewer all-reduces: fewer TP ranks, data-parallel attention, sequence parallelism,
#   or overlapping them with compute.
#
# The sources confound the attribution: 54.1 tok/s was measured on the CUDA 12.8 stack, 96.1 after the CUDA
# 13 upgrade *and* fusion *and* symmetric-memory and model patches; no EAGLE-3 run without fusion on the new
# stack is reported, and SGLang's auto-enable may have fused the "baseline" too. Below, each factor gets
# the share it *could* carry; the measurement that would separate them is named at the end.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"
batch = 1
draft_tokens = 4

# %%
import pandas as pd

from verifylab.chapters import ch04_fusion_vs_elimination as chapter
from verifylab.store.evidence import Evidence

params = chapter.Params.validated(
    mode=mode,
    run_id=run_id,
    data_dir=data_dir,
    batch=batch,
    draft_tokens=draft_tokens,
)
pd.set_option("display.max_colwidth", 200)
ev = Evidence(params.data_dir)

# %% [markdown]
# ## Fusion vs elimination, measured on two H200s
#
# The same synthetic verify pass (Kimi-K2 TP-8 shard shapes, 61 layers) with real communication between two
# H200s: SGLang's unfused path (NCCL all-reduce, then one fused add+RMSNorm kernel), FlashInfer's fused
# all-reduce + add + RMSNorm as SGLang 0.5.17 calls it, and two elimination stand-ins that simply skip one or
# both all-reduces of every layer (what removing them *saves*, not an algorithm that removes them). Labelled
# "2 x H200 — mechanism, not Blackwell": the NVLink path is far faster than a PCIe box's, the host-memory and
# socket paths are slower stand-ins, and fusion cannot run without P2P.

# %%
chapter.measured_finding(ev)

# %%
chapter.measured_table(ev)

# %%
chapter.measured_figure(ev)

# %% [markdown]
# ### The same passes, predicted (modelled)
#
# `verifylab model pass` predicts each variant from two inputs only: the pass without communication and the
# latency curve of the all-reduce measured in isolation (interpolated at k x 7168 x 2 bytes); the fused variant
# also drops the separate norm kernels, which its kernel does. No constant is fitted to the passes it predicts.
# The same command takes a user's own curve (a CSV, or nccl-tests' `all_reduce_perf` output from a PCIe box).

# %%
chapter.prediction_finding(ev)

# %%
chapter.prediction_table(ev)

# %% [markdown]
# ## The model's inputs and where they come from

# %%
chapter.model_inputs(ev, params)

# %% [markdown]
# ## What-if: the same verify pass under each mechanism (modelled)
#
# Verify time = compute + all-reduces x latency + all-reduces x separate add+RMSNorm (+ launches).
# The substitution latency is *solved* so that the fused path reproduces the reported 96.1 tok/s at the
# reported accept length: it is what substitution would have to deliver if it carried the whole gain. The
# last row bounds it from the other side: one hop of a link whose per-step latency makes a 14-step ring
# take the reported 205 µs.

# %%
chapter.whatif(ev, params)

# %%
chapter.whatif_figure(ev, params)

# %% [markdown]
# Kernel fusion alone moves the verify pass by 122 x (unfused - fused add+RMSNorm): about 2 ms with the
# norm costs measured on the H200 — the lower end of the sources' 2-8 ms estimate, and far from the ~10 ms
# the reported gain needs. To match the fused path by *elimination*, about a third of the all-reduces
# would have to go.

# %% [markdown]
# ## Reconciliation of the reported figures
#
# Each line uses only reported figures (by id in `data/reference/`) and the stated assumptions; the
# arithmetic is shown.

# %%
chapter.reconciliation(ev, params)

# %% [markdown]
# ## Why were verify all-reduces slower than decode's?
#
# Decode at 92.6 tok/s leaves at most 88 µs per all-reduce; verify's averaged 205 µs. Message size cannot
# explain it (line 4 above). The hypotheses, and the measurement that settles each:

# %%
chapter.hypotheses()

# %% [markdown]
# ## Limits: how far from the floor?
#
# The floor of a one-token decode step per GPU: the weights it must stream (TP-8 shard of Kimi-K2: bf16
# attention, INT4 or bf16 experts) over memory bandwidth, plus 122 all-reduces at a one-hop latency
# floor (assumed 10 µs). Bandwidths: the RTX PRO 6000's datasheet figure (a lead, not measured here) and the
# H200's measured copy bandwidth.

# %%
chapter.limits(ev)

# %% [markdown]
# ## Validation of the compute term
#
# The compute term is fitted on two token counts of the H200 measurement (k = 1 and 16: time per layer =
# a + b x bytes read) and predicts the others, which were not used to fit it. The communication terms are
# not yet fitted to the two-H200 measurement above (the cost-model issue does that).

# %%
chapter.compute_check(ev)

# %% [markdown]
# ## The measurement that would separate the factors
#
# On the case-study box, same CUDA 13 stack, same drafter and flags: EAGLE-3 with
# `--enforce-disable-flashinfer-allreduce-fusion` and EAGLE-3 with fusion, each profiled for a few cycles.
# The trace analyzer then gives, per verify pass, the all-reduce count (unchanged if fusion only fuses), the
# implementation (NCCL kernels vs `allreduce_fusion_kernel_oneshot_lamport`), and the latency per all-reduce
# split into arrival wait and transfer. The difference in per-all-reduce latency is algorithm substitution;
# the difference in norm kernels is kernel fusion; what remains between the two stacks is the upgrade.
