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

# %%
chapter.finding(ev, params)

# %% [markdown]
# ## Three different things
#
# - **{term}`Kernel fusion <kernel fusion>`** — the all-reduce's output feeds residual add + RMSNorm inside the same kernel: one
#   kernel less per all-reduce. The number and latency of all-reduces do not change. SGLang without fusion
#   already runs one fused add+RMSNorm kernel per all-reduce, so this is all kernel fusion can remove.
# - **{term}`Algorithm substitution <algorithm substitution>`** — the same number of all-reduces, each cheaper. On a PCIe box SGLang's own
#   custom all-reduce is disabled beyond two GPUs, so every all-reduce goes to NCCL, whose ring takes
#   2(n-1) sequential steps. FlashInfer's TRT-LLM fusion kernels do the all-reduce themselves: one-shot (each
#   rank pushes its slice to every peer and polls locally) for small messages, two-shot above. "Fusion"
#   therefore also *swaps the algorithm*.
# - **{term}`Elimination <elimination>`** — fewer all-reduces: data-parallel attention, expert parallelism, fewer tensor-parallel
#   ranks per stage (pipeline parallelism). Each removes some all-reduces and adds other communication or
#   compute; overlapping communication with compute hides it rather than removing it.
#
# The sources confound the attribution: the EAGLE-3 figure before was measured on the CUDA 12.8 stack, the
# one after on CUDA 13 *and* fusion *and* symmetric-memory and model patches; no EAGLE-3 run without fusion
# on the new stack is reported, and SGLang's auto-enable may have fused the "baseline" too. The account below
# gives each factor what measurement supports and leaves the rest unexplained.

# %% [markdown]
# ## Fusion vs elimination at one stream and under load (modelled)
#
# Every option from the same account: the reported pass split into compute, all-reduces and norms; compute,
# communication and norm cost grow with tokens per pass as the H200 measurements grow; collectives other than
# the reported all-reduce (all-gather, reduce-scatter, all-to-all, the one-shot push, a pipeline send) are
# priced by an {term}`alpha-beta model` of the PCIe link whose alpha makes NCCL's ring take the reported latency.
# Ranges span both readings of the reported cycle and the draft-token range; one stream's tok/s assumes the
# draft phase does not grow with load.

# %% mystnb={"figure": {"caption": "Fusion vs elimination at 1, 8 and 32 streams: verify pass and one stream's tok/s as ranges (modelled)", "name": "tbl-fusion-options"}}
chapter.options_at_load(ev, params)

# %% mystnb={"figure": {"caption": "Each option's verify pass split into compute, communication and norm (modelled)", "name": "fig-whatif-components"}}
chapter.whatif_figure(ev, params)

# %% mystnb={"figure": {"caption": "Each option's terms at the chosen number of streams (modelled)", "name": "tbl-whatif-terms"}}
chapter.whatif(ev, params)

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

# %% mystnb={"figure": {"caption": "The synthetic verify pass on 2 x H200 per communication variant and path (measured, SM90)", "name": "tbl-measured-passes"}}
chapter.measured_table(ev)

# %% mystnb={"figure": {"caption": "Time saved per pass by fusion and by removing all-reduces, 2 x H200 (measured, SM90)", "name": "fig-measured-savings"}}
chapter.measured_figure(ev)

# %% [markdown]
# ### The same passes, predicted (modelled)
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
# ## The account's inputs and where they come from

# %% mystnb={"figure": {"caption": "The cycle account's inputs and where each comes from", "name": "tbl-account-inputs"}}
chapter.model_inputs(ev)

# %% [markdown]
# ## Reconciliation of the reported figures
#
# Each line uses only reported figures (by id in `data/reference/`), the measured norm kernel and the stated
# assumptions; the arithmetic is shown, and every number comes from the one account the finding above quotes.

# %% mystnb={"figure": {"caption": "Reconciliation of the reported figures, arithmetic shown (modelled from reported figures)", "name": "tbl-reconciliation"}}
chapter.reconciliation(ev)

# %% [markdown]
# ## Why were verify all-reduces slower than decode's?
#
# The reconciliation bounds a decode step's all-reduces well below the verify pass's average (its third line),
# and message size stays open without the case-study box's own curve (its fourth). The hypotheses, and the
# measurement that settles each:

# %% mystnb={"figure": {"caption": "Why verify all-reduces may be slower than decode's, and the measurement that settles each", "name": "tbl-hypotheses"}}
chapter.hypotheses()

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
