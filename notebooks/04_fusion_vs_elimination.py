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
# This chapter will show the cost model, the what-if table and the reconciliation of the reported
# figures.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"

# %%
from verifylab.params import validate_parameters

params = validate_parameters(mode=mode, run_id=run_id, data_dir=data_dir, where="04_fusion_vs_elimination")
