"""Forensics read from FlashInfer and SGLang wheels: the JIT arch list, SM12x guards, how the fusion workspace is
allocated (multicast or not), on small wheels built here with the shapes of the published sources."""

from __future__ import annotations

import zipfile
from pathlib import Path

from verifylab.gates.forensics import flashinfer_facts, sglang_workspace_api

JIT = """
def gen_other_module():
    return gen_jit_spec("x", supported_major_versions=[9, 10])


def gen_trtllm_comm_module():
    return gen_jit_spec("trtllm_comm", supported_major_versions={majors})
"""
TRTLLM_AR = """
def trtllm_create_ipc_workspace_for_all_reduce_fusion(
    tp_rank, tp_size, max_token_num, hidden_dim, use_symm_dev_mem: bool = False,
):
    if use_symm_dev_mem:
        handle = SymmDeviceMemory(buf_size=1, {multicast})
    else:
        handle = create_shared_buffer(1)


def trtllm_allreduce_fusion():
    pass
"""
CUH = "flashinfer/data/include/flashinfer/comm"
UNIFIED = """
class TRTLLMAllReduceFusionWorkspace(AllReduceFusionWorkspace):
    def __init__(self):
        self.w = trtllm_create_ipc_workspace_for_all_reduce_fusion(0, 8, 2048, 7168, use_symm_dev_mem=True)
"""


def _wheel(tmp: Path, name: str, files: dict[str, str]) -> Path:
    path = tmp / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


def test_an_old_flashinfer_needs_its_jit_list_opened_but_no_multicast(tmp_path):
    wheel = _wheel(
        tmp_path,
        "fi-old.whl",
        {
            "flashinfer/jit/comm.py": JIT.format(majors="[9, 10]"),
            "flashinfer/comm/trtllm_ar.py": TRTLLM_AR.format(multicast="enable_multicast=False"),
            f"{CUH}/trtllm_allreduce.cuh": "#if (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)",
            f"{CUH}/trtllm_allreduce_fusion.cuh": "#if __CUDA_ARCH__ >= 1000",
        },
    )
    facts = flashinfer_facts(wheel, "0.6.4")
    assert facts.jit_majors == "9, 10" and not facts.jit_admits_sm12x  # the arch list of the right function
    assert facts.legacy_workspace == "CUDA IPC buffers (no multicast)" and facts.unified_workspace == ""
    assert facts.plain_allreduce_pdl_off_sm12x and not facts.fused_kernel_excludes_sm12x


def test_a_unified_workspace_with_multicast_is_named(tmp_path):
    files = {
        "flashinfer/jit/comm.py": JIT.format(majors="[9, 10, 12]"),
        "flashinfer/comm/trtllm_ar.py": TRTLLM_AR.format(multicast="enable_multicast=True"),
        "flashinfer/comm/allreduce.py": UNIFIED,
    }
    facts = flashinfer_facts(_wheel(tmp_path, "fi-mc.whl", files), "0.6.11")
    assert facts.jit_admits_sm12x
    assert facts.unified_workspace == "symmetric device memory (NVLink multicast)"
    files["flashinfer/comm/trtllm_ar.py"] = TRTLLM_AR.format(multicast="enable_multicast=False")
    facts = flashinfer_facts(_wheel(tmp_path, "fi-new.whl", files), "0.6.15")
    assert facts.unified_workspace == "symmetric device memory (no multicast)"


def test_which_api_sglang_calls(tmp_path):
    legacy = _wheel(
        tmp_path,
        "sg-old.whl",
        {"sglang/srt/layers/flashinfer_comm_fusion.py": "comm.trtllm_create_ipc_workspace_for_all_reduce_fusion(0)"},
    )
    unified = _wheel(
        tmp_path,
        "sg-new.whl",
        {"sglang/srt/layers/flashinfer_comm_fusion.py": "comm.create_allreduce_fusion_workspace(backend='trtllm')"},
    )
    assert sglang_workspace_api(legacy) == "legacy" and sglang_workspace_api(unified) == "unified"
    assert sglang_workspace_api(_wheel(tmp_path, "sg-none.whl", {"sglang/__init__.py": ""})) == "none"


def test_the_shipped_forensics_say_what_the_case_study_could_run(shipped):
    f = shipped.fusion_forensics.set_index(["sglang", "flashinfer"])
    case = f.loc[("0.5.9", "0.6.4")]
    assert case["workspace"] == "CUDA IPC buffers (no multicast)" and "JIT list" in case["blocks_fusion_on_pcie_sm120"]
    assert "multicast" in f.loc[("0.5.12", "0.6.11.post1"), "blocks_fusion_on_pcie_sm120"]
    assert str(f.loc[("0.5.20", "0.6.18"), "jit_admits_sm12x"]) == "True"
