# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Fusion, elimination and speculative decoding on PCIe GPUs
#
# An 8-GPU box whose GPUs talk over PCIe (the case study: 8x RTX PRO 6000 Blackwell, SM120, PCIe Gen5,
# no NVLink) serves Kimi-K2.5 with SGLang at tensor-parallel size 8 and EAGLE-3 speculative decoding.

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch00_introduction as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.case_claims(ev)

# %% [markdown]
# Every number in it is one of three kinds, and every table and chart says which:
#
# - **measured** — a run in `data/runs/<run_id>/` with host, GPU, versions and commit (see the Methods
#   appendix); measurements made on NVIDIA H200 (SM90) machines are labelled so and are never Blackwell
#   results;
# - **reported** — a figure from the case-study documents, with the file it came from and a quote;
# - **modelled** — an output of the cost model, labelled with its inputs.
#
# The chapters: (1) the architecture {term}`gates <gate>` that keep fusion off on SM120, (2) benchmarks at one stream
# and under load, (3) where a verify pass spends its time, (4) fusion vs elimination of all-reduces,
# (5) recommendations.

# %% [markdown]
# ## What the case study reports
#
# Decode throughput at one stream, as reported. The bars come from different software stacks (CUDA 12.8
# vs 13, patched or not) and, for the EAGLE-3 bars, different drafters: they are not a controlled
# comparison, which is why chapter 4 takes them apart.

# %% mystnb={"figure": {"caption": "Decode throughput at one stream as the case study reports it (reported; the stacks differ between bars)", "name": "fig-reported-throughput"}}
chapter.reported_throughput_figure(ev)

# %% [markdown]
# Every figure the source documents report, one row each, with the seed file and a verbatim quote
# (`data/reference/reported_figures.csv`):

# %% mystnb={"figure": {"caption": "Every reported figure with its seed file and a verbatim quote (reported)", "name": "tbl-reported-figures"}}
chapter.reported_figures_table(ev)
