# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fusion vs elimination of all-reduces

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch04_fusion_vs_elimination as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.finding(ev, params)

# %% [markdown]
# ## The decision, by communication regime
#
# A PCIe box is in one of a few {term}`communication regimes <communication regime>`, and the answer depends
# on which: **healthy P2P** (NCCL connects the GPUs directly), **host-memory fallback** (NCCL's SHM transport,
# P2P off or unavailable), or the case study's own, **as reported** (P2P broken or staged: its verify pass's
# all-reduces cost what host memory costs). `verifylab comm probe` tells which regime a box is in (chapter 1).
# Each row: the 8-rank all-reduce of one stream's verify message that identifies the regime, plain decoding against EAGLE-3 at one stream, the fastest option by load, and where speculation stops
# paying. Decoding on the case study's box is priced as healthy P2P: its reported plain decode rate bounds its own
# all-reduces well below the verify pass's.

# %% mystnb={"figure": {"caption": "The decision per communication regime: the all-reduce band that identifies it, decoding vs EAGLE-3, the fastest option and the speculation crossover (modelled)", "name": "tbl-decision-regimes"}}
chapter.decision_by_regime(ev)

# %% [markdown]
# A collective an owner can deploy now: SGLang's PCIe-IPC all-reduce (opt-in; the SGLang and FlashInfer versions
# that have it head the table) takes the tensor-parallel group's bf16 all-reduces of decode and verify wherever P2P
# works, for the shapes FlashInfer's tuning table covers and within its workspace (the rest stay on NCCL). Priced
# from its own public curve, measured on an 8 x SM120 box with two NUMA nodes whose NCCL is slow while its P2P
# works: not the case study's box (the hypotheses below compare the two at the verify sizes).

# %% mystnb={"figure": {"caption": "Plain decoding and EAGLE-3 at one stream on the PCIe-IPC all-reduce against NCCL as run, per regime (modelled from the collective's public curve)", "name": "tbl-pcie-ipc"}}
chapter.pcie_ipc_by_regime(ev)

# %% [markdown]
# Fusion is not one answer for a box: its one-shot push over PCIe gains where messages are small and loses to
# NCCL's ring once a pass carries many streams. Per regime and load, turn it on where it saves at every end of the
# range, off where it loses at every end, and measure on the box where the range straddles nothing saved.

# %% mystnb={"figure": {"caption": "Fusion on or off by load: what it saves on a verify pass per regime and stream count (modelled)", "name": "tbl-fusion-by-load"}}
chapter.fusion_by_load_table(ev)

# %% [markdown]
# Where speculation stops paying depends on the accept length a box's traffic gives, which the case study reports
# only once. The same model at other accept lengths (it predicted the accept lengths it was not fitted on in
# chapter 2's measured grid); measure yours from the server's `spec_accept_length` on your own prompts.

# %% mystnb={"figure": {"caption": "EAGLE-3 against plain decoding on the case study's box per regime and accept length: the gain at one stream and where speculation stops paying (modelled)", "name": "tbl-speculation-by-accept"}}
chapter.speculation_by_accept_length(ev)

# %% [markdown]
# The other input that moves it: how much the tokens of one stream's verify chain share experts (routing overlap).
# A random-weight model cannot give a trained router's value (the next section counts what SGLang's verify pass
# reads, a bound), so it is fitted on public end-to-end curves of other models and checked on the case-study
# family's own public curve, which never enters the fit.

# %%
chapter.public_speculation_finding(ev)

# %% mystnb={"figure": {"caption": "Public speculation curves, each with its role (fitted on, held out, family check), its box and source, and where its gain crosses 1 as reported and as the model predicts at the fitted routing overlap (reported, public; modelled)", "name": "tbl-public-speculation"}}
chapter.public_speculation_curves(ev)

# %% mystnb={"figure": {"caption": "Every public cell: the reported gain beside the model's range at the fitted routing overlap, over the curve's own plain decoding (reported, public; modelled)", "name": "tbl-public-speculation-cells"}}
chapter.public_speculation_cells(ev)

# %% mystnb={"figure": {"caption": "EAGLE-3 on the case study's box by routing overlap (a named input, 0 to 1): the gain at one stream and where speculation stops paying, with where each overlap comes from (modelled)", "name": "tbl-speculation-by-overlap"}}
chapter.speculation_by_routing_overlap(ev)

# %% [markdown]
# What a reader serving many users trades: each stream added raises the box's total and lowers what one user gets.
# Plain decoding and EAGLE-3 on the case study's box, per regime, from the same model that places the crossover.

# %% mystnb={"figure": {"caption": "Pareto view of the case study's box per regime: tok/s per user against total tok/s, plain decoding and EAGLE-3 (modelled)", "name": "fig-case-pareto"}}
chapter.case_pareto_figure(ev)

# %% [markdown] page="context"
# # Context length, and what the engine reads

# %%
chapter.context_finding(ev)

# %% [markdown]
# ## What the engine really reads, measured on one H200
#
# Two inputs the decision's answers price ({numref}`tbl-decision-regimes`) and no run had measured: how much a
# stream's context adds to a verify pass, and how many experts a verify pass reads. Real SGLang 0.5.17 servers on one
# H200 (random weights, TP 1;
# `benchmarks/engine_reads`), each run beside the model's prediction committed before it ran. Labelled "1 x H200,
# SM90": the kernels are those SGLang runs on Hopper with the Triton and FlashInfer backends, the ones it runs on
# SM120 for these shapes.

# %%
chapter.engine_attention_finding(ev)

# %% mystnb={"figure": {"caption": "What 1,000 tokens of a stream's context add to a plain step and to an EAGLE-3 verify cycle (4 tokens), per target, attention backend and streams, beside the model's growth (measured, 1 x H200; modelled)", "name": "tbl-engine-attention"}}
chapter.engine_attention(ev)

# %%
chapter.engine_experts_finding(ev)

# %% mystnb={"figure": {"caption": "Distinct experts per layer a verify pass of C streams x 4 tokens reads, counted by SGLang's recorder, against independent tokens and one draw per chain, beside the model's predictions (measured, 1 x H200, random weights; modelled)", "name": "tbl-engine-experts"}}
chapter.engine_experts(ev)

# %% [markdown]
# ## Context length: what a stream's context adds
#
# Speculation's stream limit falls with context on the case study's own hardware and model family: a public matrix
# (Kimi-K2.6 on 8 x RTX PRO 6000, contexts 0-128k x 1-128 streams, plain and EAGLE-3) measured it. The model fits two
# context terms on its plain cells (a verify's reads of the context are the engine's mechanism, not fitted), moves each
# matrix's own shortest-context row to every other context, and is checked on every cell it never saw: the speculative
# cells, 128k and the page's historical matrix.

# %% mystnb={"figure": {"caption": "The context terms, fitted on the current matrix's plain cells, and what the fit assumed: the accept length (stated before it) and the KV pools (reported, public; modelled)", "name": "tbl-context-terms"}}
chapter.context_terms_table(ev)

# %% mystnb={"figure": {"caption": "Where speculation stops paying for good per matrix and context: every reported crossing of 1, the last, and the model's range (reported, public; modelled)", "name": "tbl-context-crossovers"}}
chapter.context_crossovers(ev)

# %% mystnb={"figure": {"caption": "EAGLE-3's gain by streams at each context, reported cells beside the model's range (reported, public; modelled)", "name": "fig-context-gain"}}
chapter.context_gain_figure(ev)

# %% mystnb={"figure": {"caption": "The context terms' error profiles, the value used marked (modelled from public figures)", "name": "fig-context-profiles"}}
chapter.context_profiles(ev)

# %% mystnb={"figure": {"caption": "Every cell of the public per-context matrices: plain and EAGLE-3 tok/s and the gain, reported beside predicted, with each cell's role (reported, public; modelled)", "name": "tbl-context-cells"}}
chapter.context_cells(ev)

# %% [markdown] page="kernels"
# # The verify kernels, measured one by one
#
# Which kernel verifies a chain is a gate of its own (chapter 1): SGLang's Triton backend runs the serial extend kernel
# unless the split-KV one is switched on, which only AMD gfx95 does; FlashInfer's MLA backend runs `fa3` on SM90 and
# `fa2` elsewhere, SM120 included. Each kernel was called on one attention layer as SGLang and FlashInfer call it,
# on the same random KV and draft queries, its output checked against an fp32 reference at every draft position
# before it was timed (`benchmarks/verify_kernels`), beside the price the model gave it before the run; then each
# kernel inside SGLang's own server, a deep target's verify cycle from 2k to 64k tokens of context
# (`benchmarks/engine_reads`).

# %%
chapter.verify_kernels_finding(ev)

# %% mystnb={"figure": {"caption": "One attention layer's verify of a 4-token chain per kernel, one stream: correctness against fp32, time, and the model's price made before the run (measured, 1 x H100, SM90; modelled)", "name": "tbl-verify-kernels"}}
chapter.verify_kernels(ev)

# %%
chapter.verify_kernel_refit_finding(ev)

# %% mystnb={"figure": {"caption": "The serial verify kernel at 64k tokens, every cell held out of the refit: measured beside the refitted model (measured, 1 x H100; modelled)", "name": "tbl-verify-kernel-refit"}}
chapter.verify_kernel_refit(ev)

# %%
chapter.verify_growth_finding(ev)

# %% mystnb={"figure": {"caption": "An EAGLE-3 cycle's growth from 2k to 64k tokens of one stream's context inside SGLang per verify kernel and target depth, measured beside the growth predicted before the run (measured, 1 x H100, SM90, random weights; modelled)", "name": "tbl-verify-growth-check"}}
chapter.verify_growth_check(ev)

# %% mystnb={"figure": {"caption": "Every engine cell above 16k tokens, held out of the refit: measured beside the range refitted on its own series' shorter contexts (measured, 1 x H100 and 1 x H200, SM90; modelled)", "name": "tbl-verify-growth-fit"}}
chapter.verify_growth_fit(ev)

# %% [markdown] page="options"
# # What each option costs, by regime and load

# %%
chapter.options_finding(ev)

# %% [markdown]
# ## What one all-reduce costs in each regime
#
# Every option is priced from these curves at its own message size (streams x draft tokens x hidden x 2 bytes), never
# from one figure: healthy P2P from the public measurements on RTX PRO 6000 boxes (NCCL from several boxes; the
# fused one-shot push from a one-shot kernel's measurements, times the fused kernel's cost inside a pass over
# its isolated cost, measured on 2 x H200), growing by their bandwidth terms beyond the sizes measured; host
# memory from this project's measured 2-rank curve as a ring over all ranks, its high end at the public per-hop
# latency; and the case study's pass.

# %% mystnb={"figure": {"caption": "One 8-rank all-reduce by message size in each regime (modelled from public, measured and reported figures)", "name": "fig-regime-curves"}}
chapter.regime_figure(ev)

# %% [markdown]
# ## Fusion vs elimination at one stream and under load (modelled)
#
# Each option's verify pass, priced by the same model as the decision (the case study's box per regime, calibrated
# to its reported plain decode rate, changed only where the option changes it): the bytes its busiest GPU reads
# at the card's effective bandwidth (never below the floor column, the same bytes at the datasheet's peak), its
# collectives priced in the regime at the option's own message size, and the host overhead calibrated on the NCCL
# box. A dash: the option cannot run in that regime (the last column says why). One stream's tok/s: EAGLE-3's
# cycle at the reported accept length, and plain decoding on the same layout.

# %% mystnb={"figure": {"caption": "Fusion vs elimination per regime at 1, 8 and 32 streams: one stream's tok/s as range bars (modelled)", "name": "fig-fusion-options"}}
chapter.options_figure(ev)

# %% mystnb={"figure": {"caption": "Fusion vs elimination per regime at 1, 8 and 32 streams: verify pass, one stream's tok/s and the floor, as ranges (modelled)", "name": "tbl-fusion-options"}}
chapter.options_at_load(ev)

# %% mystnb={"figure": {"caption": "What each option removes and adds, its flags, and whether SGLang runs it with EAGLE-3 (read from the SGLang wheels)", "name": "tbl-option-facts"}}
chapter.option_facts()

# %% mystnb={"figure": {"caption": "Each option's verify pass split into compute, communication and host overhead, per regime (modelled, midpoints)", "name": "fig-whatif-components"}}
chapter.whatif_figure(ev, params)

# %% mystnb={"figure": {"caption": "Each option's terms per regime at the chosen number of streams, low and high ends (modelled)", "name": "tbl-whatif-terms"}}
chapter.whatif(ev, params)

# %% [markdown]
# ## Floors and memory
#
# The bytes the busiest GPU reads per pass (INT4 experts with their group scales, bf16 attention, shared expert,
# dense layer and LM head, latent KV at the stated context: the inputs table) and the time to read them at the
# card's datasheet bandwidth; and the weights each layout puts on a GPU (replicated parts once per GPU, experts on the
# MoE layers only: Kimi's first layer is dense), the KV room left at two memory fractions of the memory the card
# reports usable (a public reading of an 8-card box, not the datasheet's round figure), and the requests that room
# holds: tensor-parallel attention keeps every request's latent KV on every GPU, DP attention a request's KV on its
# own GPU only.

# %% mystnb={"figure": {"caption": "Bytes read per pass by the busiest GPU and the time at peak bandwidth (modelled)", "name": "tbl-floors"}}
chapter.floors(ev)

# %% mystnb={"figure": {"caption": "Weights per GPU, KV room and requests held, per layout (modelled, GiB)", "name": "tbl-memory"}}
chapter.memory(ev)

# %% [markdown] page="measured"
# # Fusion vs elimination, measured on two H200s

# %%
chapter.measured_finding(ev)

# %% [markdown]
# ## The synthetic verify pass and its variants
#
# The same synthetic verify pass (Kimi-K2 TP-8 shard shapes, 61 layers) with real communication between two
# H200s: SGLang's unfused path (NCCL all-reduce, then one fused add+RMSNorm kernel), FlashInfer's fused
# all-reduce + add + RMSNorm as SGLang 0.5.17 calls it, and two elimination stand-ins that simply skip one or
# both all-reduces of every layer (what removing them *saves*, not an algorithm that removes them). Labelled
# "2 x H200 — mechanism, not Blackwell": the NVLink path is far faster than a PCIe box's, the host-memory and
# socket paths are slower stand-ins, and fusion cannot run without P2P.

# %% mystnb={"figure": {"caption": "The synthetic verify pass on 2 x H200 per communication variant and path (measured, SM90)", "name": "tbl-measured-passes"}}
chapter.measured_table(ev)

# %% mystnb={"figure": {"caption": "Time saved per pass by fusion and by removing all-reduces, 2 x H200 (measured, SM90)", "name": "fig-measured-savings"}}
chapter.measured_figure(ev)

# %% [markdown]
# ## The same passes, predicted (modelled)
#
# `verifylab model pass` predicts each variant from two inputs only: the pass without communication and the
# latency curve of the all-reduce measured in isolation (interpolated at the pass's message size); the fused
# variant also drops the separate norm kernels, which its kernel does. No constant is fitted to the passes it
# predicts. The same command takes a user's own curve (a CSV, or nccl-tests' `all_reduce_perf` output from a
# PCIe box).

# %%
chapter.prediction_finding(ev)

# %% mystnb={"figure": {"caption": "The pass model's predictions against the measured passes, out of sample (modelled vs measured)", "name": "tbl-prediction"}}
chapter.prediction_table(ev)

# %% [markdown]
# What the decision needs is the saving, not the pass: each variant's saving against NCCL, predicted with each
# all-reduce at its cost inside a pass (the traces' per-call time over the isolated latency), against the
# savings the campaign's runs measured (their run-to-run spread; the error is the distance to it).

# %% mystnb={"figure": {"caption": "Savings against NCCL, predicted with in-pass costs, against the measured range of the campaign's runs (modelled vs measured, 2 x H200)", "name": "tbl-saving-check"}}
chapter.saving_check(ev)

# %% [markdown]
# ## The account's inputs and where they come from

# %% mystnb={"figure": {"caption": "The cycle account's inputs and where each comes from", "name": "tbl-account-inputs"}}
chapter.model_inputs(ev)

# %% [markdown] page="reconciliation"
# # The case study's jump, reconciled

# %%
chapter.reconciliation_finding(ev)

# %% [markdown]
# ## Reconciliation of the reported figures
#
# Each line uses only reported figures (by id in `data/reference/`), the measured norm kernel and the stated
# assumptions; the arithmetic is shown, and every number comes from the one account the finding above quotes.
# What it concludes comes first; the whole argument, step by step, follows.

# %% mystnb={"figure": {"caption": "What the reconciliation concludes: the rows of the next table the decision rests on (modelled from reported figures)", "name": "tbl-reconciliation-summary"}}
chapter.reconciliation_summary(ev)

# %% mystnb={"figure": {"caption": "Reconciliation of the reported figures, arithmetic shown (modelled from reported figures)", "name": "tbl-reconciliation"}}
chapter.reconciliation(ev)

# %% [markdown]
# ## What can carry the reported jump
#
# Each hypothesis with the observations for and against it, how much of the removed cycle time it could explain
# (computed from the regime curves, the measured probes and the account) and the one measurement on the
# case-study box that decides it. The forensics of chapter 1 say what the case study's stack could and could not
# run.

# %%
chapter.hypotheses_order(ev)

# %% mystnb={"figure": {"caption": "The hypotheses for the reported jump, ranked by their evidence, each with what supports and what contradicts it and the deciding measurement (modelled from reported, public and measured figures)", "name": "tbl-hypotheses"}}
chapter.hypotheses(ev)

# %% [markdown]
# ## Limits: how far from the floor?
#
# The floor of a one-token decode step per GPU: the weights it must stream (TP-8 shard of Kimi-K2: bf16
# attention, INT4 or bf16 experts) over memory bandwidth, plus every all-reduce at an assumed one-hop latency
# floor (the table's all-reduce column). Bandwidths: the RTX PRO 6000's datasheet figure (a lead, not
# measured here) and the H200's measured copy bandwidth.

# %% mystnb={"figure": {"caption": "The floor of a one-token decode step per GPU (modelled; bandwidths reported and measured)", "name": "tbl-limits"}}
chapter.limits(ev)

# %% [markdown]
# ## Validation of the compute term
#
# The compute term is fitted on two token counts of the H200 measurement (k = 1 and 16: time per layer =
# a + b x bytes read) and predicts the others, which were not used to fit it.

# %%
chapter.compute_check_finding(ev)

# %% mystnb={"figure": {"caption": "The compute term fitted on two token counts and checked on the others (measured, H200)", "name": "tbl-compute-check"}}
chapter.compute_check(ev)

# %% [markdown]
# ## The measurement that would separate the factors
#
# On the case-study box, same CUDA 13 stack, same drafter and flags: EAGLE-3 with
# `--enforce-disable-flashinfer-allreduce-fusion` and EAGLE-3 with fusion, each profiled for a few cycles.
# The trace analyzer then gives, per verify pass, the all-reduce count (unchanged if fusion only fuses), the
# implementation (NCCL kernels vs `allreduce_fusion_kernel_oneshot_lamport`), and the latency per all-reduce
# split into arrival wait and transfer. The difference in per-all-reduce latency is algorithm substitution;
# the difference in norm kernels is kernel fusion; what remains between the two stacks is the upgrade. First
# check the server log says "AllReduce Fusion enabled": with a FlashInfer whose workspace needs NVLink
# multicast (chapter 1's table) a PCIe box cannot run the fused kernels.

# %% [markdown] page="public"
# # Public evidence

# %%
chapter.public_evidence_finding(ev)

# %% [markdown]
# The healthy-P2P prices, the regime bands and the host-memory hop come from public measurements on other
# PCIe boxes. Every one is listed here with its source and the quote that carries its number, so a reviewer can
# follow each price to where it was published.

# %% mystnb={"figure": {"caption": "Every public figure the book reads, by regime: its source (a link), the quote that carries its number and what it prices (reported, public)", "name": "tbl-public-evidence"}}
chapter.public_evidence_table(ev)
