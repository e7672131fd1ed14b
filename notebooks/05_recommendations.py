# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Recommendations

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch05_recommendations as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.finding(ev, params)

# %% mystnb={"figure": {"caption": "Recommendations with evidence, confidence, command and what to measure next", "name": "tbl-recommendations"}}
chapter.recommendations(ev, params)

# %% [markdown]
# ## Fusion on a PCIe SM120 box: which versions
#
# Chapter 1's table, in one sentence: which SGLang releases (with the FlashInfer they pin) can run the
# all-reduce fusion without NVLink multicast, and what must be opened first.

# %%
chapter.pcie_sm120_finding(ev)

# %% [markdown]
# ## The launch command
#
# Flags are chosen for the installed version and checked against its `--help` in {term}`live mode`; in
# {term}`replay mode` they are the spellings of the version the recommendations target (the upgrade named above),
# unchecked.

# %%
chapter.policy_check(ev, params)

# %%
chapter.print_launch_command(ev, params)

# %% [markdown]
# For a box that cannot upgrade, the same answer on the case study's own stack (NCCL: its fusion gates stay closed
# there, and it has no PCIe-IPC all-reduce):

# %%
chapter.case_study_command(ev)

# %% [markdown]
# ## What each probed box allows
#
# Every probe writes a `policy.json` beside its run: what its verdict allows on that box, which
# `verifylab serve --policy RUN` applies at launch (it refuses a variant the policy rules out). What is allowed
# here is not what pays: the decision page prices that.

# %% mystnb={"figure": {"caption": "What each stored probe allows: tensor parallelism, fusion, custom all-reduce, flags and variables", "name": "tbl-probe-policies"}}
chapter.probe_policies(ev)

# %% [markdown]
# ## The recommendation checked on a box
#
# `verifylab box --plan` chooses the configuration with the most goodput under the owner's SLO at their load and
# names the runner-up; `verifylab box --verify FILE` then serves the choice, the runner-up and plain decoding one
# after another on the box, measures each at the planned stream counts and stores the model's prediction (made
# before anything ran) beside the measurement. Where they disagree the measured answer wins. The stored check ran
# on one H200 (a random-weight MoE whose accept length SGLang held): a check of the loop and of the model, not a
# result for a PCIe box.

# %%
chapter.checked_finding(ev)

# %% mystnb={"figure": {"caption": "The recommendation checked: per configuration and stream count, the plan's tok/s (predicted before the run), the refit's (out of sample), the measurement and the serving numbers under the SLO (measured, modelled)", "name": "tbl-recommendation-checked"}}
chapter.recommendation_checked(ev)

# %% [markdown]
# ## What to measure next
#
# Every recommendation below medium confidence names the measurement that would settle it. First on any box:
# `verifylab comm probe`, which names the communication regime every answer depends on (chapter 1). Then on
# the case-study box: EAGLE-3 with fusion forced off vs on, same CUDA 13 stack and drafter, profiled — it
# decides between the ranked hypotheses for the reported jump (chapter 4).

# %% [markdown]
# ## How the recommendations are made
#
# Derived by rules (`verifylab.analysis.recommend`, tested) from the evidence in this edition's data: measured
# runs where they exist, the audited gate matrix, the reported case-study figures and the model. Each
# recommendation cites its evidence and a {term}`confidence`: **high** — measured or audited on the relevant
# software; **medium** — measured on other hardware, or derived; **low** — reported or modelled only;
# **none** — no evidence, with the measurement that would settle it.
#
# The parameters describe the box the recommendations are for: by default the case-study box (8x RTX PRO
# 6000 Blackwell on PCIe, SGLang 0.5.9, FlashInfer 0.6.4, Kimi-K2.5 at TP 8 with an EAGLE-3 draft).
