"""What chapter 1 and the decision page say of the verify path, read from the audit of the published wheels
(``data/gates/verify_path.csv``, written by ``verifylab gates matrix``): which attention backend SGLang runs for a
model on SM120, which kernel then verifies a chain, what keeps the fast kernels off, and the flag that changes the
backend. Every value comes from the audit's rows; nothing here is typed from the wheels by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from verifylab.launch import option_of
from verifylab.report.section import Prose
from verifylab.vocab import version_key

NOT_RUN = "admitted by the code; not run on SM120"
BACKEND_FLAG = option_of("attention_backend")


def _versions(frame: pd.DataFrame) -> list[str]:
    sglang = frame[frame["package"] == "sglang"]
    return sorted(sglang["version"].astype(str).unique(), key=version_key)


def _row(frame: pd.DataFrame, version: str, item: str, shape: str = "", gpu: str = "") -> pd.Series | None:
    rows = frame[(frame["package"] == "sglang") & (frame["version"].astype(str) == version) & (frame["item"] == item)]
    if shape:
        rows = rows[rows["shape"] == shape]
    if gpu:
        rows = rows[rows["gpu"] == gpu]
    return rows.iloc[0] if not rows.empty else None


def _where(row: pd.Series) -> str:
    return f"{row['file']}:{row['line']}"


def kernel_words(value: str) -> str:
    """An audited kernel value (``name (what it does)``) as prose: the name as code, the rest as words."""
    name, _, rest = value.partition(" (")
    return f"`{name}` ({rest.rstrip(')')})" if rest else f"`{name}`"


@dataclass(frozen=True)
class VerifyBackend:
    """What one SGLang version runs for a model shape on a GPU family, and how to change it, from the audit."""

    version: str
    shape: str
    gpu: str
    backend: str
    chosen_at: str  # file:line of the default's branch
    verify_kernel: str  # what verifies a chain on that backend ("" where the audit does not say)
    flashinfer_admitted: bool
    admitted_at: str
    splitkv_gate: str  # the condition that keeps the split-KV verify off ("" where it is absent)
    mla_refused_at: str  # can_handle's MLA refusal ("" where absent)

    def change_flag(self) -> str:
        """The flag that moves the verify off the default backend (FlashInfer where the code admits it)."""
        return f"{BACKEND_FLAG} flashinfer" if self.flashinfer_admitted and self.backend != "flashinfer" else ""


def verify_backend(frame: pd.DataFrame, version: str, shape: str = "MLA", gpu: str = "SM120") -> VerifyBackend | None:
    """What the audited SGLang ``version`` runs for ``shape`` on ``gpu``; None where the version was not audited."""
    default = _row(frame, version, "default attention backend", shape, gpu)
    if default is None:
        return None
    kernel = _row(frame, version, "verify kernel (Triton)")
    admitted = _row(frame, version, "flashinfer MLA backend admitted")
    switch = frame[
        (frame["version"].astype(str) == version)
        & (frame["item"] == "split-KV verify switch")
        & (frame["status"] == "closed")
    ]
    refused = _row(frame, version, "split-KV verify refuses MLA")
    return VerifyBackend(
        version=version,
        shape=shape,
        gpu=gpu,
        backend=str(default["value"]),
        chosen_at=_where(default),
        verify_kernel=str(kernel["value"]) if kernel is not None and default["value"] == "triton" else "",
        flashinfer_admitted=admitted is not None and str(admitted["value"]) == NOT_RUN,
        admitted_at=_where(admitted) if admitted is not None else "",
        splitkv_gate=str(switch.iloc[0]["condition"]) if not switch.empty else "",
        mla_refused_at=_where(refused) if refused is not None and refused["status"] == "closed" else "",
    )


def verify_path_finding(frame: pd.DataFrame) -> Prose:
    """Finding: the backend an MLA model gets on SM120 in every audited version, its verify kernel, what keeps the
    split-KV kernel off, and whether FlashInfer's MLA backend is admitted (from the audit's rows)."""
    versions = _versions(frame)
    answers = [a for a in (verify_backend(frame, v) for v in versions) if a is not None]
    if not answers:
        return Prose("No verify-path audit is stored: run `verifylab gates matrix` to read it from the wheels.")
    backends = sorted({a.backend for a in answers})
    span = f"{versions[0]}-{versions[-1]}" if len(versions) > 1 else versions[0]
    refusing = [a.version for a in answers if a.mla_refused_at]
    gated = [a for a in answers if a.splitkv_gate]
    kernel = next((a.verify_kernel for a in answers if a.verify_kernel), "")
    parts = [
        f"On SM120, every audited SGLang ({span}, {len(versions)} wheels) runs an MLA model such as Kimi-K2.5 on the "
        f"`{'`, `'.join(backends)}` attention backend when none is given"
        + (f", whose EAGLE-3 verify is {kernel_words(kernel)}" if kernel else "")
        + "."
    ]
    if gated:
        parts.append(
            f"The split-KV verify kernel beside it is switched on only where `{gated[0].splitkv_gate}` holds (AMD "
            f"gfx95; {len(gated)} of {len(answers)} audited versions ship it)"
            + (f", and from {refusing[0]} its `can_handle` refuses MLA shapes" if refusing else "")
            + "."
        )
    admitted = [a for a in answers if a.flashinfer_admitted]
    if admitted:
        parts.append(
            f"`{BACKEND_FLAG} flashinfer` for an MLA model on SM120 is {NOT_RUN} ({len(admitted)} of {len(answers)} "
            f"versions: no architecture check on SGLang's MLA branch; the pinned FlashInfer picks its `fa2` MLA "
            f"kernel there and builds it for the GPU's own architecture)."
        )
    return Prose(" ".join(parts))


SHORT_GATE = {  # the audit's item names as a table's first column shows them
    "default attention backend": "default backend",
    "split-KV verify switch": "split-KV switch",
    "split-KV verify refuses MLA": "split-KV MLA check",
    "grouped-head shared-KV verify": "shared-KV verify",
    "verify kernel (Triton)": "Triton verify kernel",
    "flashinfer MLA backend admitted": "FlashInfer MLA admitted",
    "flashinfer MLA kernel on SM120": "FlashInfer MLA kernel",
    "flashinfer MLA JIT arch": "FlashInfer MLA JIT",
    "verify option": "option",
}


def verify_path_version_table(frame: pd.DataFrame, version: str) -> pd.DataFrame:
    """Table: one audited SGLang version's verify path (and its pinned FlashInfer's MLA rows), with file:line."""
    sglang = frame[(frame["package"] == "sglang") & (frame["version"].astype(str) == version)]
    pinned = frame[(frame["package"] == "flashinfer") & frame["note"].eq(f"pinned by sglang {version}")]
    rows = pd.concat([sglang, pinned])
    short = rows["file"].str.replace(r"^(sglang/srt/|sglang/)", "", regex=True)
    return pd.DataFrame(
        {
            "gate": rows["item"].map(lambda item: SHORT_GATE.get(item, item)),
            "model": rows["shape"],
            "GPU": rows["gpu"],
            "value": rows["value"],
            "status": rows["status"],
            "file:line": short + ":" + rows["line"].astype(str),
            "condition in the code": rows["condition"],
        }
    ).reset_index(drop=True)


def backend_line(frame: pd.DataFrame, version: str, model: str, chosen: str | None = None) -> Prose:
    """The decision page's line: the backend SGLang ``version`` runs for ``model`` (MLA) on SM120, its verify kernel,
    and the flag that changes it, from the audit; ``chosen``: the backend the launch lines name (the answer's)."""
    answer = verify_backend(frame, version)
    if answer is None:
        return Prose(f"SGLang {version}'s verify path is not audited: run `verifylab gates matrix`.")
    kernel = f", whose verify is {kernel_words(answer.verify_kernel)}"
    line = (
        f"Attention backend: SGLang {version} runs {model} (MLA) on `{answer.backend}` by default on SM120 "
        f"(`{answer.chosen_at}`){kernel if answer.verify_kernel else ''}."
    )
    if answer.change_flag():
        keep = (
            f"the launch lines below name `{chosen}`, the backend on which the answers found EAGLE-3 paying"
            if chosen and chosen != answer.backend
            else "the launch lines below keep the default, which the measured runs priced"
        )
        line += f" `{answer.change_flag()}` changes it ({NOT_RUN}: `{answer.admitted_at}`); {keep}."
    return Prose(line)
