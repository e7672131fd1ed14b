"""Which sources are worth reading: the text every finding of ``scan.py`` needs, tested without parsing (most
files that name an arch predicate are about attention or MoE), and what unpacking a wheel keeps."""

from __future__ import annotations

import re

FUSION_NAME = re.compile(r"allreduce_fusion|ar_fusion|allreduce_residual_rmsnorm", re.I)
FUSION_TEXT = re.compile(r"allreduce.?fusion|all-?reduce fusion", re.I)

# what unpacking a wheel keeps: a file without any of these holds no gate, table, limit or precondition and
# defines no arch predicate
SCAN_TOKENS = ("is_sm", "supported_major_versions", "FUSE_ALLREDUCE", "MiB", "MULTIMEM", "Skipping allreduce fusion")
# a capability table's assignment in lower-cased source, ``torch_symm_mem_..._sizes = {`` (parentheses, a line
# break or a comment may sit before the brace): its name is what ``scan.TABLE_NAME`` looks for, in any case; every
# repeat is bounded, so a hostile source (a name repeated for megabytes) is scanned in linear time
TABLE_ASSIGNMENT = re.compile(
    r"(?:symm|multimem|all_?reduce)\w{0,80}[ \t]{0,16}=[\s(\\]{0,64}(?:#[^\n]{0,400}\n[\s(\\]{0,64}){0,8}\{"
)


def may_hold_gates(source: str) -> bool:
    """Whether a wheel's source is worth unpacking: it mentions one of ``SCAN_TOKENS``."""
    return any(tok in source for tok in SCAN_TOKENS)


def worth_parsing(source: str) -> bool:
    """Whether a source holds the text every finding needs: an arch predicate beside all-reduce fusion (gates),
    a table's assignment, the JIT arch list, the batch limit, the multicast preflight or the PCIe-IPC path. Most
    files that name an arch predicate are about attention or MoE: parsing them found nothing and was nine tenths of
    an audit.
    Substring tests come first; the regular expressions read only the files that pass them."""
    lower = source.lower()
    return bool(
        (
            "is_sm" in source
            and ("fusion" in lower or "allreduce_residual_rmsnorm" in lower)
            and (FUSION_TEXT.search(source) or FUSION_NAME.search(source))
        )
        or (
            any(word in lower for word in ("symm", "multimem", "allreduce", "all_reduce"))
            and TABLE_ASSIGNMENT.search(lower)
        )
        or "supported_major_versions" in source
        or "FUSE_ALLREDUCE_MAX_BATCH_SIZE" in source
        or ("cuMulticastGetGranularity" in source and "Skipping allreduce fusion" in source)
        or ("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" in source and "PcieIpcAllReduceWorkspace" in source)
    )
