# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Where the verify pass spends its time

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch03_verify_breakdown as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.deployer_finding(ev)

# %% [markdown]
# ## What the case study reports

# %% mystnb={"figure": {"caption": "The verify pass as the case study reports it (reported)", "name": "tbl-verify-reported"}}
chapter.reported_table(ev)

# %% [markdown]
# ## Reported next to measured
#
# The measured bars are a TP-8 shard of a Kimi-K2-shaped verify pass (k = 4 tokens, 61 layers, bf16) on
# **one H200 (SM90)**: one GPU has no communication, so they show the compute side only — split into
# GEMM/MoE, attention, norm, other kernels and the gaps between kernels — with PyTorch's add+RMSNorm and
# with FlashInfer's fused add+RMSNorm. They calibrate the compute term of the model in chapter 4; they are
# not Blackwell figures.

# %% mystnb={"figure": {"caption": "All-reduce vs compute per verify pass, reported next to measured", "name": "fig-verify-breakdown"}}
chapter.breakdown_figure(ev)

# %% mystnb={"figure": {"caption": "The same parts in milliseconds, one row per source", "name": "tbl-verify-breakdown"}}
chapter.breakdown_table(ev)

# %% [markdown]
# ## All-reduces per step found by the analyzer
#
# The synthetic verify pass (`verifylab synth-verify`) runs two all-reduces per layer, as SGLang's
# DeepSeek/Kimi layers do at TP > 1. On CPU with gloo (2 ranks, mechanics only) the analyzer finds 122 per
# step on every rank, each `c10d::allreduce_` and its `gloo:all_reduce` counted once. The single-GPU H200
# trace has none, and the analyzer says so rather than reporting zero communication as a finding.

# %% mystnb={"figure": {"caption": "All-reduces per pass and their implementations, per measured trace (measured)", "name": "tbl-allreduce-counts"}}
chapter.allreduce_counts(ev)

# %% [markdown]
# ## With real communication: the synthetic pass on two H200s
#
# `benchmarks/gpu_multi.py` ran the same TP-8-shaped pass on two H200s joined by NVLink, over three NCCL
# paths: NVLink (P2P), host memory (`NCCL_P2P_DISABLE=1`: the stand-in for a PCIe box without P2P) and
# loopback sockets (the slowest stand-in). These are the mechanism, not Blackwell figures. The analyzer,
# run on the profiled passes, counts the all-reduces whatever implements them: NCCL's kernels, or
# FlashInfer's fused kernel, whose time includes the residual add and RMSNorm it replaces (so its
# "communication" is larger and the compute smaller than NCCL's).

# %% mystnb={"figure": {"caption": "The synthetic verify pass on 2 x H200, traced, per variant (measured, SM90)", "name": "tbl-synthetic-trace"}}
chapter.measured_trace_breakdown(ev)

# %%
chapter.marker_pieces_note(ev)

# %% mystnb={"figure": {"caption": "All-reduce latency vs message size on 2 x H200 per path and implementation (measured, SM90)", "name": "fig-allreduce-latency"}}
chapter.latency_figure(ev)

# %% [markdown]
# ## A real SGLang server at TP 2: which kernels do the all-reduces
#
# SGLang 0.5.17 served a tiny random-weight Qwen3-MoE (with a random one-layer EAGLE-3 draft) on two H200s:
# chapter 3's live profile started and profiled each variant in turn, and the analyzer cut the traces at
# SGLang's own step markers (`step[TARGET_VERIFY]` is the verify pass, `draft` the draft model's steps,
# `draft_extend` its extend). Without fusion every all-reduce is SGLang's own custom all-reduce (its v2
# kernel, `all_reduce_kernel<AllReducePushImpl...>`, which names neither "nccl" nor "custom": a name filter
# misses it just as it misses fused kernels). Mechanics, not performance.

# %%
chapter.live_kernels_finding(ev)

# %% mystnb={"figure": {"caption": "All-reduce kernels per target pass of the live TP-2 server, by variant and kernel family (measured, SM90)", "name": "tbl-live-kernels"}}
chapter.live_kernels_table(ev)

# %% [markdown]
# What fusion saved on those passes, against the pass model of chapter 4 predicting it without looking at the
# fusion variant's trace (the kernels' times on two H200s, not the random-weight model's quality).

# %%
chapter.live_fusion_finding_text(ev)

# %% mystnb={"figure": {"caption": "Fusion's saving per live TP-2 pass beside the pass model's, with the all-reduce SGLang ran as the unfused path: fitted in-pass factor and a fit without the run; and what NCCL as the unfused path would give (modelled vs measured, 2 x H200)", "name": "tbl-live-fusion-check"}}
chapter.live_fusion_table(ev)

# %% [markdown]
# ## Live mode: the GPU box's own server
#
# In live mode this chapter drives SGLang's profiler while requests run on the server at `server_url`
# (start it with `verifylab serve eagle3_fusion ...`), or on a server it starts itself when `serve_variant`
# names a variant: `/start_profile` with a step count and an output
# folder in the run, then `/stop_profile`; the per-rank traces are summarized and stored. Whether fusion ran
# is read off the kernels: FlashInfer's fused all-reduce kernels present, NCCL all-reduces gone from the
# fused path. The live smoke below is such a capture, of a tiny model at TP 1.

# %%
chapter.live(params, ev)

# %% [markdown]
# ## Live smoke: a profile of the real server
#
# The same capture path (chapter 3 starting an NGRAM server, `/start_profile`, the analyzer) on the live
# smoke's tiny model: real SGLang, Triton and FlashInfer kernel names, NGRAM's tree verification, and no
# all-reduce at TP 1 (fusion not exercised).

# %% mystnb={"figure": {"caption": "The live smoke's profile on one H200 at TP 1 (measured; mechanics only)", "name": "tbl-live-smoke-profile"}}
chapter.live_smoke_profile(ev)

# %% [markdown]
# ## How the analyzer counts
#
# The case study's key measurement splits a verify pass into its NCCL all-reduces and its compute (its figures:
# {numref}`tbl-verify-reported`). This chapter shows the instrument that produces such a breakdown
# from a profiler trace (`verifylab trace summarize`), what it finds on traces made here, and — in live
# mode — on the GPU box's own SGLang server.
#
# How the analyzer counts (see the Methods appendix for the rest):
#
# - every all-reduce is counted **once**, whatever implements it: an NCCL kernel, a custom {term}`one-shot` kernel,
#   or FlashInfer's fused all-reduce + RMSNorm kernel, which is communication *and* norm. (Holistic Trace
#   Analysis counts only `nccl*` kernels as communication, so after fusion it reports almost none although
#   every all-reduce still happens.) On the CPU side a `c10d::allreduce_` op and the backend op under it are
#   one all-reduce;
# - NCCL kernel-name suffixes such as `_RING_LL` are shown as names: they do not prove which algorithm or
#   protocol ran;
# - an NCCL kernel's duration includes the time it waits for the last rank: with several ranks, each
#   collective is split into *arrival wait* and *transfer*, or the per-all-reduce cost is overstated;
# - steps come from markers (`ProfilerStep#N`, named ranges) or, in SGLang traces, which have none, from
#   CUDA-graph launches; under graphs the trace holds no message sizes, which then come from the model config.
#
# A patched gate (chapter 1) does not prove that fusion runs: only fused kernel names in a profile of the
# real server do.
