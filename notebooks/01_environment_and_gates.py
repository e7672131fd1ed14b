# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # The box: communication regime and architecture gates

# %% tags=["parameters"]
# This chapter's parameters are its Params model (src/verifylab/chapters/params.py): `verifylab notebook`
# writes them here, with their defaults and what each does, when it converts this file for papermill.

# %%
from verifylab.chapters import ch01_environment_and_gates as chapter

params = chapter.Params.from_notebook(globals())
ev = params.evidence()

# %%
chapter.communication_finding(ev)

# %% [markdown]
# ## Is this box's communication healthy?
#
# Before fusion or elimination: which {term}`communication regime <communication regime>` the box is in decides
# what every later chapter recommends (chapter 4). `verifylab comm probe` measures it: NCCL's all-reduce at
# every verify-pass size, replayed in a CUDA graph and eager, the kernels SGLang would use instead where they
# can run, the transport NCCL chose (its own log), peer access and copies per GPU pair, and the host's P2P
# settings; then it names the regime and the one change most likely to fix it. In live mode this chapter runs
# it on the box; in replay it shows the stored probes, each labelled with its hardware.

# %% mystnb={"figure": {"caption": "The communication probes stored: regime per world size, NCCL's transport and the change to try first (measured; hardware in each row)", "name": "tbl-probe-verdicts"}}
chapter.communication_verdicts(ev)

# %% [markdown]
# The probe's own curves against the synthetic-pass campaign's, measured on the same kind of machine with
# another method (chapter 4): the per-call cost, arrival skew apart.

# %%
chapter.probe_agreement_finding(ev)

# %% mystnb={"figure": {"caption": "The probe's NCCL curve against the campaign's on the same machine kind, per size (measured, 2 x H200)", "name": "tbl-probe-agreement"}}
chapter.probe_agreement(ev)

# %% [markdown] page="gates"
# # Which versions can fuse on a PCIe SM120 box

# %%
chapter.pcie_sm120_finding(ev)

# %% [markdown]
# ## Which versions need which patch
#
# One row per {term}`gate` (the function and, in brackets, its file); the last column names the audited
# versions where the gate is `closed` (it exists and keeps SM120 out), `open` (it admits SM120), present
# without a gate (a precondition reported, never patched) or absent. Audited from the published wheels (`verifylab gates matrix`, data in
# `data/gates/gate_matrix.csv`, one row per version and gate).

# %%
chapter.audited_versions_note(ev)

# %% mystnb={"figure": {"caption": "Gates by audited SGLang / FlashInfer version for SM120 (audited published wheels)", "name": "tbl-gate-matrix"}}
chapter.gate_matrix(ev)

# %% [markdown]
# What to read in it:
#
# - up to 0.5.14 the auto-enable sits in `server_args.py` and the runtime check in `layers/communicator.py`
#   (0.5.6 has it in `_gather_hidden_states_and_residual` and auto-enables on SM100 only); from 0.5.17 the
#   auto-enable is in `arg_groups/overrides.py`; from 0.5.14 a guard *raises* for other archs
#   (`_resolve_backend`), and 0.5.23 moves the runtime check to `layer_boundary/residual/add_norm.py`;
# - the symmetric-memory tables have no SM12x entry in any version: adding one only turns a `KeyError` crash
#   into the communicator's own "no multicast" fallback — a crash fix, not a speed-up on PCIe;
# - FlashInfer's JIT list admits major 12 only from 0.6.17;
# - from 0.5.12 a workspace preflight queries NVLink multicast: on a PCIe box the query fails, SGLang logs
#   "Skipping allreduce fusion" and stays unfused whatever the arch gates say — until the multicast-preflight
#   precondition is opened too (next section).

# %% [markdown]
# ## What the wheels say about fusion on a PCIe SM120 box
#
# Three things must hold on a PCIe Blackwell box: SGLang's arch gates admit SM120, FlashInfer's fusion module
# builds for it, and the fusion workspace can be allocated without NVLink multicast. Read from the published
# wheels of each SGLang version and the FlashInfer it pins (and the case study's pair): the JIT arch list, the
# kernels' SM12x guards, how the workspace SGLang creates is allocated, and SGLang's multicast preflight, which
# `verifylab gates apply` opens as a precondition only where the FlashInfer installed allocates without it.

# %% mystnb={"figure": {"caption": "Fusion on a PCIe SM120 box per SGLang / FlashInfer pair, read from the wheels (audited)", "name": "tbl-fusion-forensics"}}
chapter.fusion_forensics(ev)

# %% mystnb={"figure": {"caption": "What a PCIe SM120 box must open per SGLang version, and whether fusion can run there (inferred from source and an SM90 simulation)", "name": "tbl-pcie-sm120"}}
chapter.pcie_sm120_table(ev)

# %% [markdown]
# The precondition was reproduced on two H200s (SGLang 0.5.17, FlashInfer 0.6.15.post1) with the multicast
# queries answered as a PCIe box answers them (`simulate_no_multicast`), before and after the gate; fusion in
# effect is read from SGLang's log and the fused kernels from a profile (chapter 3):

# %%
chapter.pcie_simulation_finding(ev)

# %% mystnb={"figure": {"caption": "Simulated PCIe on 2 x H200: fusion before and after the precondition gate (measured, SM90)", "name": "tbl-pcie-simulation"}}
chapter.pcie_simulation_table(ev)

# %% [markdown]
# ## One version in detail: SGLang 0.5.9 (the case study's era)

# %%
chapter.fusion_off_flag_note(ev, "0.5.9")

# %% mystnb={"figure": {"caption": "Every gate of SGLang 0.5.9, the case study's era (audited wheel)", "name": "tbl-gates-sglang-0-5-9"}}
chapter.version_findings(ev, "sglang", "0.5.9")

# %% mystnb={"figure": {"caption": "Every gate of the newest audited SGLang (audited wheel)", "name": "tbl-gates-sglang-0-5-23"}}
chapter.version_findings(ev, "sglang", "0.5.23")

# %% [markdown]
# ## Does the fusion module compile for SM120?
#
# FlashInfer builds its all-reduce fusion kernels just in time, for the architectures in its JIT list.
# Built with `FLASHINFER_CUDA_ARCH_LIST=12.0a` on an H200 machine with nvcc 13.0 (compile only: the kernels
# cannot run on SM90): FlashInfer 0.6.4 as published fails with exactly the case study's error; after
# `verifylab gates apply` opened its JIT list it compiles to `sm_120a`; 0.6.17 compiles as published. The
# architecture list comes from the GPU (or that variable), not from the CUDA version: a CUDA 12.8 -> 13
# upgrade alone cannot clear that error.

# %% mystnb={"figure": {"caption": "Does FlashInfer's fusion module compile for SM120? (measured on an H200 machine, not run on SM120)", "name": "tbl-sm120-build"}}
chapter.sm120_build_runs(ev)

# %% [markdown]
# ## What a gate is, and what it is not
#
# On the case-study box (8x RTX PRO 6000 Blackwell, **SM120**, PCIe) SGLang never used FlashInfer's
# all-reduce fusion: the code only admitted SM90 (Hopper) and SM100 (B200/GB200). The case study opened it
# with two `sed` one-liners against one SGLang version — a fix that breaks with every release, since the
# gates move. `verifylab gates` finds them by parsing the source of whatever version is installed, opens
# exactly those on the fusion and symmetric-memory paths, verifies the result and can revert it byte for
# byte.
#
# A gate that admits the architecture does **not** prove that fusion runs. Other conditions keep it off all
# the same: the FlashInfer JIT's own arch list, SGLang's workspace preflight that needs NVLink multicast
# (a PCIe box has none), peer-to-peer access, the batch limit. Only fused kernels in a profile prove it
# (chapter 3).

# %% [markdown] page="verify"
# # The verify path's gates

# %%
chapter.verify_path_finding(ev)

# %% [markdown]
# The fusion gates above decide how a verify pass communicates; gates of the same kind decide which attention
# kernel verifies a chain, and at long context that kernel decides more than any all-reduce (chapter 4). Read
# from each audited SGLang wheel and the FlashInfer it pins (`verifylab gates matrix`, data in
# `data/gates/verify_path.csv`): the backend SGLang chooses when none is given, evaluated branch by branch for an
# MLA and a dense model on SM90, SM100 and SM120 (an EAGLE-3 chain, FlashInfer installed); every condition on the
# split-KV verify kernel; whether the code admits FlashInfer's MLA backend on SM120; and the options that choose
# the backends. `admitted by the code; not run on SM120` is what the source allows, not a measurement.

# %% mystnb={"figure": {"caption": "The verify path of SGLang 0.5.9 and its pinned FlashInfer (audited wheels)", "name": "tbl-verify-path-sglang-0-5-9"}}
chapter.verify_path_gates(ev, "0.5.9")

# %% mystnb={"figure": {"caption": "The verify path of SGLang 0.5.17 and its pinned FlashInfer (audited wheels)", "name": "tbl-verify-path-sglang-0-5-17"}}
chapter.verify_path_gates(ev, "0.5.17")

# %% mystnb={"figure": {"caption": "The verify path of SGLang 0.5.22 and its pinned FlashInfer (audited wheels)", "name": "tbl-verify-path-sglang-0-5-22"}}
chapter.verify_path_gates(ev, "0.5.22")

# %% mystnb={"figure": {"caption": "The verify path of SGLang 0.5.23 and its pinned FlashInfer (audited wheels)", "name": "tbl-verify-path-sglang-0-5-23"}}
chapter.verify_path_gates(ev, "0.5.23")

# %% [markdown] page="runs"
# # The measured runs, and this box in live mode
#
# Every measured figure in this book names its run; this table says what each run was measured on, read from
# its manifest (`data/runs/<run id>/manifest.json`, which also holds its parameters, environment and notes).
# None is Blackwell or PCIe: the SM90 runs show mechanisms and shapes, not an 8 x RTX PRO 6000 box's numbers.

# %% mystnb={"figure": {"caption": "Every measured run: its GPUs and the links between them, driver, and CUDA, NCCL, torch, SGLang and FlashInfer versions (measured; from each run's manifest)", "name": "tbl-run-hardware"}}
chapter.run_hardware(ev)

# %% [markdown]
# ## Live mode: this box
#
# In live mode the chapter probes the box's communication and stores the run, audits the SGLang (and
# FlashInfer) installed on the GPU box, optionally opens the gates and verifies them, and runs a preflight of
# the box (GPU arch, nvcc targets, FlashInfer and CUDA versions, peer-to-peer access, NVLink multicast).

# %%
chapter.live(params, ev)
