# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Where the verify pass spends its time
#
# This chapter will show per-step all-reduce counts and compute vs communication from profiler traces.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"

# %%
from verifylab.params import validate_parameters

params = validate_parameters(mode=mode, run_id=run_id, data_dir=data_dir, where="03_verify_breakdown")
