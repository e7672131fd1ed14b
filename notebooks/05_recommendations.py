# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Recommendations
#
# This chapter will show what to deploy, with which flags, and when to turn speculation off.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"

# %%
from verifylab.params import validate_parameters

params = validate_parameters(mode=mode, run_id=run_id, data_dir=data_dir, where="05_recommendations")
