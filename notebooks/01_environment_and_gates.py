# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Environment and architecture gates
#
# This chapter will show which SGLang and FlashInfer gates keep all-reduce fusion (and symmetric-
# memory all-reduce) off on SM120, a version-by-gate matrix, and — in live mode — the audit, patch and
# verification of the box's own install.

# %% tags=["parameters"]
mode = "replay"
run_id = None
data_dir = "data"

# %%
from verifylab.params import validate_parameters

params = validate_parameters(mode=mode, run_id=run_id, data_dir=data_dir, where="01_environment_and_gates")
