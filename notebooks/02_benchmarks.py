# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Benchmarks
#
# This chapter will show  baseline, fusion, EAGLE-3, EAGLE-3 + fusion:single-stream throughput with
# confidence intervals and concurrency sweeps per variant, with the concurrency where speculation
# stops paying.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"

# %%
from verifylab.params import validate_parameters

params = validate_parameters(mode=mode, run_id=run_id, data_dir=data_dir, where="02_benchmarks")
