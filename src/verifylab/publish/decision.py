"""The landing page, "The decision": what to deploy, fusion vs elimination in numbers, when to turn speculation
off — each claim with a link to the numbered figure or table that carries it — caveats last, then how to read
the book. Every number comes from the edition's findings (the cycle account and the rules)."""

from __future__ import annotations

from verifylab.publish.findings import FindingKey, by_key
from verifylab.report.recommend import Topic

PAGE = "decision.md"


def _rec(findings: dict, topic: Topic) -> tuple[str, str]:
    found = findings.get(topic.value)
    return (found.confidence or "none", str(found.value)) if found else ("none", "no evidence in this edition")


def decision_markdown(edition: dict) -> str:
    """The page's MyST source; ``{numref}`` links resolve to the numbered exhibits of the chapters."""
    f = by_key(edition["key_findings"])
    t = {key: found.shown for key, found in f.items()}
    fusion, elimination, speculation = (
        _rec(f, topic) for topic in (Topic.FUSION, Topic.ELIMINATION, Topic.SPECULATION)
    )
    runs = edition["runs"]
    return f"""# The decision

Edition `{edition["id"]}` · built {edition["built"]} · {len(runs)} measured runs (listed in the edition banner of
every chapter). Cite a figure as "{{numref}}`tbl-fusion-options`, edition `{edition["id"]}`".

## What to deploy on the case-study box

- **All-reduce fusion** ({fusion[0]} confidence): {fusion[1]} Evidence: {{numref}}`tbl-reconciliation`
  (reported and modelled), {{numref}}`tbl-gate-matrix` and {{numref}}`tbl-pcie-sm120` (audited).
- **Fusion vs elimination** ({elimination[0]} confidence): {elimination[1]} Evidence: {{numref}}`tbl-fusion-options`
  (modelled) and {{numref}}`tbl-measured-passes` (measured on 2 x H200, SM90: mechanism, not Blackwell).
- **Speculation under load** ({speculation[0]} confidence): {speculation[1]} Evidence:
  {{numref}}`tbl-reported-comparisons` (reported) and {{numref}}`tbl-live-tp2` (measured, mechanics only).

## Fusion vs elimination, in numbers

- The reported 54.1 -> 96.1 tok/s removed **{t[FindingKey.CYCLE_TIME_REMOVED_MS]}** per EAGLE-3 cycle (the
  reported cycle fits an accept length of {t[FindingKey.ACCEPT_LENGTH]}; {{numref}}`tbl-reconciliation`).
- Kernel fusion carries **{t[FindingKey.KERNEL_FUSION_SHARE_MS]}** of it (one fused add+RMSNorm kernel per
  all-reduce, measured on an H200); the CUDA upgrade {t[FindingKey.UPGRADE_SHARE_MS]} if it sped EAGLE-3 as it sped
  the baseline; **{t[FindingKey.UNEXPLAINED_REMAINDER_MS]} is unexplained** — algorithm substitution (NCCL ring ->
  one-shot push) is the leading hypothesis, unmeasured.
- Each verify all-reduce took **{t[FindingKey.VERIFY_ALLREDUCE_US]}** against at most
  **{t[FindingKey.DECODE_ALLREDUCE_BOUND_US]}** in a decode step; after the jump it would be
  {t[FindingKey.ALLREDUCE_US_AFTER]} if nothing else changed ({{numref}}`tbl-reconciliation`).
- The options at 1, 8 and 32 streams, as ranges: {{numref}}`tbl-fusion-options` and {{numref}}`fig-whatif-components`.

## Caveats

- No Blackwell GPU was available: H200 (SM90) measurements calibrate the mechanism; they are not SM120 results.
- The 54.1 -> 96.1 tok/s gain spans a CUDA 12.8 -> 13 upgrade and other patches: its attribution is modelled,
  not measured, and the reported "fusion" may not have fused at all on PCIe ({{numref}}`tbl-pcie-sm120`).
- A patched {{term}}`gate` does not prove fusion runs: only the server log ("AllReduce Fusion enabled") and fused
  kernels in a profile do ({{numref}}`tbl-live-kernels`).
- Every PCIe collective other than the reported all-reduce is priced by a labelled link model.

## How to read this book

- Every number is **measured** (a run id, its hardware named), **reported** (a seed file and a quote) or
  **modelled** (the inputs named); every table and chart says which in its caption or its provenance column.
- Figures and tables are numbered per chapter (Fig. 4.1 is chapter 4's first); cite them with the edition id
  shown at the top of each page. Chapters open with their finding, then the evidence, then the method.
- Chapter 1: the {{term}}`gates <gate>` that keep fusion off on SM120. Chapter 2: benchmarks at one stream and
  under load. Chapter 3: where a verify pass spends its time. Chapter 4: fusion vs elimination. Chapter 5:
  the recommendations. Terms are explained in the {{doc}}`../glossary`.
"""
