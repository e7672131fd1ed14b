# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Benchmarks: baseline, fusion, EAGLE-3, EAGLE-3 + fusion

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch02_benchmarks as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.live(params, ev)

# %%
chapter.deployer_finding(ev)

# %% [markdown]
# ## Throughput under load: the Pareto view and the load curves

# %% mystnb={"figure": {"caption": "Per-user vs per-GPU tok/s of every stored sweep, one line per variant through its concurrencies (measured; mechanics, not performance)", "name": "fig-pareto"}}
chapter.pareto_figure(ev)

# %% mystnb={"figure": {"caption": "Load curves: tok/s per user as streams are added, with the TPOT SLO's per-user rate dashed (measured; mechanics, not performance)", "name": "fig-load-curves"}}
chapter.load_curves_figure(ev)

# %% [markdown]
# ## Speculation under load, with the accept length held by SGLang

# %%
chapter.speculation_finding(ev)

# %% [markdown]
# Where speculation stops paying depends on the accept length and on what a verify pass costs at each load, so
# the accept length is held fixed here and the cost is real: SGLang itself makes each speculative server accept
# a chosen mean number of tokens per verify (`SGLANG_SIMULATE_ACC_LEN`) while every verify pass still processes
# every draft token and EAGLE-3's draft model still runs. Each server (plain decoding, EAGLE-3, an NGRAM chain
# that needs no draft model) is swept over the same stream counts; the gain is the decode phase's tokens per
# second against plain decoding at the same streams. The served model has a real MoE shape with random weights:
# with identical accepted tokens its router does not spread tokens over the experts as a trained one does (plain
# decoding at the highest load is faster than reading every expert allows), so the experts' share of a verify
# pass is smaller here than in a trained model. The model beside the measurements (chapter 4 prices the case
# study's box with it) is fitted on plain decoding and on one accept length per drafter, and predicts the rest.

# %% mystnb={"figure": {"caption": "Speculative over plain tok/s against streams, per drafter, chain and accept length: measured with its interval, and the model's range (measured, modelled)", "name": "fig-speculation-gain"}}
chapter.speculation_figure(ev)

# %% mystnb={"figure": {"caption": "Where speculation stops paying, per drafter, chain and accept length: measured beside predicted (measured, modelled)", "name": "tbl-speculation-crossovers"}}
chapter.speculation_crossovers(ev)

# %% mystnb={"figure": {"caption": "Every measured cell of the speculation grid with the model's range beside it (measured, modelled)", "name": "tbl-speculation-cells"}}
chapter.speculation_cells(ev)

# %% [markdown]
# ### The spread-forced grid, predicted before it ran
#
# A random router fed one repeated token collapses onto a few experts, so the first grids could not show what a
# trained model's verify pass reads. The third grid forces spread: every request is sampled at temperature 1 and
# the speculative servers accept the draft's own tokens (`SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token`). The
# model's prediction for it, fitted on the first grid only and assuming every token of a chain draws its own
# experts, was committed before it ran and is stored with the run.

# %%
chapter.spread_finding(ev)

# %% mystnb={"figure": {"caption": "The spread-forced grid: measured gain beside the prediction committed before the run and the refit's range, with plain decoding's step beside its spread floor (measured, modelled)", "name": "tbl-speculation-before-run"}}
chapter.speculation_before_run(ev)

# %% mystnb={"figure": {"caption": "Each grid run, the fit that prices it (its run, routing and fitted overlap) and the model's error on the sweeps it was fitted on and out of sample (measured, modelled)", "name": "tbl-speculation-fits"}}
chapter.speculation_fits(ev)

# %% [markdown] page="serving"
# # Serving metrics under load

# %%
chapter.serving_finding(ev)

# %% [markdown]
# What a user of each server sees as streams are added: time to first token and time per output token at p50 and
# p99 over the requests, and goodput: the tok/s of the requests that met the SLO (stated in the finding).

# %% mystnb={"figure": {"caption": "Goodput per server against streams, under the stated SLO (measured, one H200)", "name": "fig-grid-goodput"}}
chapter.serving_figure(ev)

# %% mystnb={"figure": {"caption": "Time to first token and time per output token at p50 and p99, the share within the SLO and goodput, per server and stream count (measured, one H200)", "name": "tbl-grid-serving"}}
chapter.serving_table(ev)

# %% [markdown]
# ## What the case study reports, one stream
#
# The reported single-stream figures are charted in the introduction (Figure 1). What they can and cannot
# say, as statistics on reported figures:

# %% mystnb={"figure": {"caption": "What the reported figures resolve, and what they cannot (statistics on reported figures)", "name": "tbl-reported-comparisons"}}
chapter.reported_comparisons(ev)

# %% [markdown] page="servers"
# # Measured on real SGLang servers
#
# Every figure on this page was measured on a real SGLang server this project ran, each row naming its run: first
# the stored benchmarks and the crossovers their sweeps find, then two rounds that show each variant starting,
# serving and reporting what it should (mechanics, not speed).

# %% [markdown]
# ## The stored benchmarks

# %%
chapter.reported_liability(ev)

# %% [markdown]
# The harness finds that crossover from a sweep with its uncertainty: the last concurrency where speculation is
# resolved faster and the first where it is resolved slower.

# %% mystnb={"figure": {"caption": "Every stored benchmark of a real SGLang server: variant states, single stream, sweeps, crossovers (measured)", "name": "tbl-benchmark-runs"}}
chapter.benchmark_section(ev)

# %% [markdown]
# ## A real SGLang server at TP 2 ({term}`mechanics <mechanics, not performance>`)
#
# The live TP-2 round (`benchmarks/live_tp2`): SGLang 0.5.17 on two H200s (NVLink) serving a random-weight
# Qwen3-MoE with a random one-layer EAGLE-3 draft, each variant started in turn. A tiny model on NVLink says
# nothing about a Blackwell PCIe box: these rows show that each variant starts, serves and reports what it
# should, not which is faster. Each row names its run.

# %%
chapter.live_tp2_finding(ev)

# %% mystnb={"figure": {"caption": "The four variants at TP 2 on 2 x H200, one stream: median, its interval (method and coverage in the header) and accept length (measured; mechanics, not performance)", "name": "tbl-live-tp2"}}
chapter.live_tp2_table(ev)

# %% [markdown]
# ## Live smoke: the pipeline against a real SGLang server
#
# Before a GPU box runs the real campaign, `benchmarks/live_smoke` drives this whole pipeline in live mode
# against a real `sglang.launch_server` with a random-weight tiny model on one H200. Its figures test the
# harness (flags, `meta_info`, the sweep), not SGLang's speed, and are kept out of the recommendations.

# %% mystnb={"figure": {"caption": "The live smoke's variants on one H200 at TP 1 (measured; mechanics only)", "name": "tbl-live-smoke-benchmarks"}}
chapter.live_smoke_benchmarks(ev)

# %% [markdown]
# ## Method

# %%
chapter.case_method(ev)

# %% [markdown]
# This chapter runs the same comparison with a harness that makes it trustworthy: each variant's flags are checked
# against the installed SGLang's `--help` and chosen for its version (`--enforce-disable-flashinfer-allreduce-
# fusion` on the baseline where it exists, because some versions auto-enable fusion for Kimi/DeepSeek); the
# state *in effect* is recorded from `/server_info` and the log (a fusion variant at TP 1, or one whose
# fusion the multicast preflight skipped, is marked inactive and never charted as active); tokens are counted
# per chunk from `completion_tokens` (a speculative chunk carries several); the accept length is
# token-weighted over the run and cross-checked with the server's own figure after `/flush_cache`. A
# single-stream median carries the exact order-statistic interval of the median, its coverage in the header (3
# runs: min-max, 75 %; 5 runs: 93.8 %; 95 % needs 6 or more); a sweep cell carries a 95 % percentile bootstrap
# of the mean per-request tok/s; one configuration measured in several runs shows its between-run spread, which
# is wider than any one run's interval; and a comparison says whether its difference is resolved. Goodput counts
# the tokens of requests that met both SLOs (time to first token and time per output token, stated where shown).
#
# The harness itself was checked against a test double at known rates (`benchmarks/harness_fidelity.py`):
# at 64 streams its TPOT and end-to-end times agree with the server's to better than 0.3 %.
#
# In {term}`live mode` the chapter first runs every variant on the box — start it, one stream, the sweep, stop
# it — into the run named by `run_id` (default `live-benchmarks`), then shows it with the stored evidence;
# in {term}`replay mode` it shows the stored runs only.
