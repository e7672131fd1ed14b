"""The landing page, "The decision": first which communication regime the reader's box is in, then the four
questions — deploy fusion? keep EAGLE-3? eliminate all-reduces, and how? from how many streams turn speculation
off? — each as a recommendation conditional on that regime, every number linked to the numbered exhibit that
shows it; the case study's jump; caveats last. Every number comes from the edition's findings or the same
model objects the exhibits show."""

from __future__ import annotations

from verifylab.analysis.benchmarks import reported_liability_concurrency
from verifylab.analysis.gates import pcie_sm120_outlook, upgrade_target
from verifylab.analysis.launch_command import stack_commands, wrapped_command
from verifylab.analysis.recommendation import Topic
from verifylab.analysis.verify_path import backend_line
from verifylab.comm.bands import bands_from_public, healthy_limit, host_hop_us
from verifylab.launch import AllReduce
from verifylab.model.answers.case_answers import (
    CASE_CONTEXT,
    CASE_ENGINES,
    CHAIN,
    KIMI_REMOTE_CODE,
    REGIME_TITLE,
    answer_backend,
    case_bands,
    engine_choice_words,
    family_check,
    probed_box,
)
from verifylab.model.answers.decision import (
    REFERENCE_MESSAGE,
    decision_table,
    fusion_at_one_stream,
    fusion_by_load_words,
    regime_answer,
)
from verifylab.model.answers.engine_answer import SGLANG_KV_DTYPE
from verifylab.model.answers.evidence_ladder import bands_words
from verifylab.publish.finding import FindingKey, by_key
from verifylab.publish.first_screen import engine_caveat, first_screen, undecided_words
from verifylab.report.section import inert_markdown, md_text
from verifylab.store.evidence import Evidence
from verifylab.vocab import (
    CASE_STUDY_STACK,
    PCIE_IPC_FLASHINFER,
    PCIE_IPC_SGLANG,
    RECOMMENDED_STACK,
    Regime,
)

PAGE = "decision.md"


def _rec(findings: dict, topic: Topic) -> tuple[str, str]:
    found = findings.get(topic.value)
    return (found.confidence or "none", str(found.value)) if found else ("none", "no evidence in this edition")


def _regimes(ev: Evidence) -> dict[str, dict]:
    """The decision table's rows by regime key (the same object Table 4.1 shows)."""

    return {row["regime_key"]: row for row in decision_table(ev).to_dict("records")}


def _upgrade(ev: Evidence) -> tuple[str, str] | None:

    return upgrade_target(pcie_sm120_outlook(ev.fusion_forensics)) if ev.has_gate_matrix else None


def _box_line(ev: Evidence, rows: dict[str, dict]) -> str:
    """A bullet for a stored probe of the reader's own box: its regime and where its own prices are shown."""

    box = probed_box(ev)
    if box is None:
        return ""
    row = rows[Regime.MEASURED.value]
    return (
        f"- **This data folder holds a probe of an 8-GPU box** ({md_text(box.source)}, {md_text(box.label)}): "
        f"{row['allreduce_57kb_us']} µs, {box.regime.value}. Its own curve prices the options in the row "
        f"'this box (probe)' ({{numref}}`tbl-decision-regimes`): EAGLE-3 {row['eagle3_tok_s']} tok/s against "
        f"{row['decode_tok_s']} for plain decoding.\n"
    )


def liability_words(ev: Evidence) -> str:
    """The concurrency from which the case study reports speculation a liability, as its table gives it."""
    value = reported_liability_concurrency(ev)
    return "—" if value is None else f"{value:g}"


def family_check_words(ev: Evidence) -> str:
    """A sentence on the case-study family's public curve: where its gain fell below 1 as reported, and how near the
    model came to it given that box's plain decoding at every load (empty where none is stored)."""
    r = family_check(ev)
    if r is None:
        return ""
    return (
        f" The case-study family's public curve ({md_text(r['model'])} with EAGLE-3 on {md_text(r['hardware'])}, "
        f"never in a fit): as reported, it {md_text(r['reported'])} streams; given that box's plain decoding at every "
        f"load, the same model meets its gains within a median {r['median_error']:.0%} "
        "({numref}`tbl-public-speculation`): a plain sweep on your own box is what narrows this answer."
    )


def regime_rules(ev: Evidence, healthy: dict, host: dict) -> str:
    """The probe's verdict rules at 8 ranks as bullets: every transport and every latency has one regime (the same
    limit ``comm.verdict.classify_reading`` applies), each with the modelled price of its answer."""

    limit = healthy_limit(bands_from_public(ev.public, REFERENCE_MESSAGE), 8, host_hop_us(ev.public))
    cite = f" ({', '.join(limit.evidence)})" if limit.evidence else ""
    return (
        f"- **P2P, up to {limit.high_us:.0f} µs: healthy P2P** ({limit.basis}{cite}). The answers below for healthy "
        f"P2P apply; the model prices it at {healthy['allreduce_57kb_us']} µs.\n"
        f"- **P2P, slower than {limit.high_us:.0f} µs, every pair's peer access and copy healthy: "
        f"{Regime.NCCL_SLOW.value}** (a cross-NUMA ring, a misdetected topology): the fix is a collective, not the "
        "platform — SGLang's PCIe-IPC all-reduce (its custom all-reduce refuses more than two PCIe-only GPUs), an "
        "NCCL graph file (`NCCL_GRAPH_FILE`) or a patched NCCL; the healthy-P2P options run there.\n"
        f"- **P2P, slower than {limit.high_us:.0f} µs, a pair refused or staged: degraded** (P2P staged or broken): "
        "fix the platform first (ACS, IOMMU, BIOS, driver); nothing that writes into a peer's memory (fusion, "
        "PCIe-IPC) runs until it is fixed.\n"
        f"- **SHM: NCCL through host memory** (modelled {host['allreduce_57kb_us']} µs). Fix P2P first (the probe "
        f"names the likeliest cause): EAGLE-3 at one stream goes from {host['eagle3_tok_s']} to "
        f"{healthy['eagle3_tok_s']} tok/s.\n"
        "- **NET: socket** (NCCL's network transport between GPUs of one host): give the processes a shared "
        "`/dev/shm`, then find why P2P is off.\n"
        "- **No channel lines in NCCL's log: unknown** (never healthy by default): probe again.\n"
    )


def engine_band_lines(ev: Evidence) -> str:
    """One line per engine of :data:`CASE_ENGINES`: its bands and how its verify was priced."""
    lines = []
    for engine, backend in CASE_ENGINES:
        flag = f" (`--attention-backend {backend}`)" if backend else ""
        words = engine_choice_words(engine, backend)
        lines.append(f"  - {md_text(words)}{flag}: {bands_words(case_bands(ev, engine, backend))}")
    return "\n".join(lines)


def launch_section(ev: Evidence) -> str:
    """The commands that launch the answers: the recommended stack where P2P works (PCIe-IPC all-reduce on) and the
    case study's own stack for a box that cannot upgrade, each built by the one builder and checked against the
    audited wheel's flags and the variables it reads."""
    recommended, case = RECOMMENDED_STACK, CASE_STUDY_STACK
    chosen = answer_backend(ev)
    commands = stack_commands(
        [
            (
                "Where P2P works",
                f"SGLang {recommended[0]} with FlashInfer {recommended[1]}",
                ev.launch_target(recommended[0]),
                AllReduce.PCIE_IPC,
            ),
            (
                "The case study's own stack, for a box that cannot upgrade",
                f"SGLang {case[0]} with FlashInfer {case[1]}, the pair the case study launched",
                ev.launch_target(case[0]),
                AllReduce.NCCL,
            ),
        ],
        trust_remote_code=KIMI_REMOTE_CODE,
        attention_backend=chosen,
        kv_cache_dtype=SGLANG_KV_DTYPE["fp8"],  # the page's pool the stream limits assume
    )
    blocks = []
    for c in commands:
        why = "".join(f"- `{flag}`: {md_text(reason)}\n" for flag, reason in c.reasons)  # flags: [a-z-] only
        blocks.append(
            f"**{c.title}** ({c.versions}; flags and variables checked against {md_text(c.checked_against)}):\n\n"
            f"```bash\n{wrapped_command(c.command)}\n```\n\n" + (f"Why its flags:\n\n{why}" if why else "")
        )
    backend = (
        f"{inert_markdown(backend_line(ev.verify_path, recommended[0], 'Kimi-K2.5', chosen))} (chapter 1, the verify "
        "path's "
        "gates)\n\n"
        if ev.has_verify_path
        else ""
    )
    return (
        "## Launch it\n\nEAGLE-3 with 4 draft tokens at TP 8 (the chain the answers recommend):\n\n"
        + backend
        + "\n".join(blocks)
    )


def case_stack_blocks(ev: Evidence) -> str:
    """What blocks fusion on a PCIe SM120 box in the case study's own SGLang/FlashInfer pair, as the audited wheels
    say (the forensics table's cell)."""
    forensics = ev.fusion_forensics
    row = forensics[(forensics["sglang"] == CASE_STUDY_STACK[0]) & (forensics["flashinfer"] == CASE_STUDY_STACK[1])]
    return str(row["blocks_fusion_on_pcie_sm120"].iloc[0]) if not row.empty else "not audited"


def decision_markdown(edition: dict, ev: Evidence) -> str:
    """The page's MyST source; ``{numref}`` links resolve to the numbered exhibits of the chapters."""

    f = by_key(edition["key_findings"])
    t = {key: found.shown for key, found in f.items()}
    fusion, elimination, speculation = (
        _rec(f, topic) for topic in (Topic.FUSION, Topic.ELIMINATION, Topic.SPECULATION)
    )
    r = _regimes(ev)
    healthy, host, reported = (r[g.value] for g in (Regime.HEALTHY_P2P, Regime.HOST_MEMORY, Regime.DEGRADED))
    upgrade = _upgrade(ev)
    box = _box_line(ev, r)
    rules = regime_rules(ev, healthy, host)
    healthy_answer = regime_answer(ev, Regime.HEALTHY_P2P)
    fusion_verdict = fusion_at_one_stream(healthy_answer.fusion_gain_ms, CHAIN)
    fusion_load = fusion_by_load_words(healthy_answer)
    bands = case_bands(ev)
    answers = first_screen(healthy_answer, healthy, bands, CHAIN)
    caveat = engine_caveat(bands)
    case_title = REGIME_TITLE[Regime.DEGRADED]
    upgrade_text = f"SGLang {upgrade[0]} with its pinned FlashInfer {upgrade[1]}" if upgrade else "no audited version"
    runs = edition["runs"]
    return f"""# The decision

{answers}
{caveat}

{undecided_words(healthy_answer)}

{launch_section(ev)}
## Which regime is your box in?

Run `verifylab box --gpus 8 --server URL` on the box: it probes the GPUs, measures one stream of plain decoding on
your server and renders the decision for that box from its own numbers. The probe (`verifylab comm probe`) names
the regime from what NCCL logged and the 8-rank all-reduce of one stream's verify message; every reading has one
answer:

{rules}
{box}- **The case study's box: "{case_title}"**. Its verify pass pays **{t[FindingKey.ALLREDUCE_AS_REPORTED_US]} per
  all-reduce** once its compute is at least the {t[FindingKey.VERIFY_COMPUTE_FLOOR_MS]} it takes to read the weights
  ({{numref}}`tbl-reconciliation-summary`), as slow as host memory, while its plain
  decoding ran faster than host memory allows: the book prices it as its own regime, "{case_title}", on every page
  ({{numref}}`tbl-decision-regimes`).

## Each answer in full (healthy P2P unless a regime is named)

- **Deploy fusion?** ({fusion[0]} confidence) With healthy P2P, {fusion_verdict}: to run it, upgrade to
  {upgrade_text} ({{numref}}`tbl-pcie-sm120`, audited wheels) and open its gates; on a verify pass it makes
  {t[FindingKey.FUSION_GAIN_HEALTHY_MS]} ({{numref}}`tbl-decision-regimes`): EAGLE-3 goes from
  {healthy["eagle3_tok_s"]} to {healthy["eagle3_fusion_tok_s"]} tok/s. **By load** ({{numref}}`tbl-fusion-by-load`):
  {fusion_load}. Past the public crossover the one-shot push over PCIe loses to NCCL: turn fusion off where it says
  off. Without working P2P it cannot run.
- **Keep EAGLE-3?** At one stream, priced by one model on the same inputs both ways, EAGLE-3 runs
  **{healthy["eagle3_gain_x"]}x** plain decoding with healthy P2P, {host["eagle3_gain_x"]}x through host memory and
  {reported["eagle3_gain_x"]}x on the case study's box ("{case_title}") ({{numref}}`tbl-decision-regimes`). In tok/s:
  {healthy["eagle3_tok_s"]} against {healthy["decode_tok_s"]} with healthy P2P; {host["eagle3_tok_s"]} against
  {host["decode_tok_s"]} through host memory; {reported["eagle3_tok_s"]} against {reported["decode_tok_s"]} on the
  case study's box (each range spans every input; each end of the ratio is the ratio of the tok/s ends).
- **Eliminate all-reduces, and how?** ({elimination[0]} confidence) Fastest by streams — healthy P2P:
  {healthy["fastest_at"]}; host memory: {host["fastest_at"]}; "{case_title}": {reported["fastest_at"]}
  ({{numref}}`tbl-decision-regimes`,
  {{numref}}`tbl-fusion-options`). TP 4 x PP 2 keeps every all-reduce (four ranks each) and SGLang refuses
  pipeline parallelism with speculative decoding ({{numref}}`tbl-option-facts`).
- **A faster all-reduce, deployable now?** SGLang's PCIe-IPC all-reduce (SGLang {PCIE_IPC_SGLANG}+ with FlashInfer
  {PCIE_IPC_FLASHINFER}+, `SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1`) replaces NCCL for the tensor-parallel group's bf16
  all-reduces of decode and verify passes, within its bounded workspace, wherever P2P works. Priced from its own
  public curve: with healthy P2P plain decoding runs {healthy["pcie_ipc_decode_tok_s"]} tok/s and EAGLE-3
  {healthy["pcie_ipc_eagle3_tok_s"]} ({healthy["pcie_ipc_gain_x"]}x) ({{numref}}`tbl-pcie-ipc`,
  {{numref}}`tbl-public-evidence`). The case study's reported figures cannot tell whether its NCCL alone is slow
  (P2P works: "{Regime.NCCL_SLOW.value}", where PCIe-IPC applies) or its P2P is staged or broken (the
  platform is the fix, and PCIe-IPC cannot run): `verifylab comm probe` tells them apart by each pair's peer access
  and copy bandwidth.
- **Turn speculation off under load?** By context band, from the nearest evidence, for each engine (distinct
  sessions, capped by the KV pool; each band widened by the transfer's error between the two public matrices):
{engine_band_lines(ev)}

  ({{numref}}`tbl-context-crossovers`, {{numref}}`fig-context-gain`). The model of the case study's own box, at its
  reported accept length and {CASE_CONTEXT:,} tokens of context ({speculation[0]} confidence): healthy P2P
  {healthy["speculation_off_from"]}; "{case_title}", {reported["speculation_off_from"]}
  ({{numref}}`tbl-decision-regimes`): it prices SGLang's box from H200 overheads and a reported decode rate, where
  the public matrix measured the same GPUs and family under load. Measured on one H200 with the accept length held
  fixed, the gain falls below 1 at a stream count the accept length sets, and the model that prices this box
  predicts those crossovers from a fit on one accept length ({{numref}}`tbl-speculation-crossovers`,
  {{numref}}`fig-speculation-gain`); reported: a liability from about {liability_words(ev)} requests
  ({{numref}}`tbl-reported-comparisons`). What moves it on your box: the accept length on your own traffic and your
  own sweep (chapter 2's speculation grid, `verifylab model speculation`).{family_check_words(ev)}

## The case study's jump

- EAGLE-3 with "fusion" beat plain decoding by **{t[FindingKey.BOTTOM_LINE_PCT]}**
  ({{numref}}`tbl-reconciliation-summary`): that is the whole gain speculation brought.
- 54.1 -> 96.1 tok/s removed **{t[FindingKey.CYCLE_TIME_REMOVED_MS]}** per cycle; kernel fusion carries
  {t[FindingKey.KERNEL_FUSION_SHARE_MS]} of it and the CUDA upgrade {t[FindingKey.UPGRADE_SHARE_MS]}
  ({{numref}}`tbl-reconciliation-summary`). What can carry the rest, ranked by its evidence, with the measurement that
  decides each: {{numref}}`tbl-hypotheses`. SGLang {CASE_STUDY_STACK[0]} with FlashInfer {CASE_STUDY_STACK[1]} allocates
  the fusion workspace without NVLink multicast; what kept fusion off there: {md_text(case_stack_blocks(ev))}; the
  case study reports FlashInfer's JIT error before fusion was enabled ({{numref}}`tbl-fusion-forensics`, audited
  wheels).

## Caveats

- No Blackwell GPU was available: H200 (SM90) measurements calibrate the mechanism; they are not SM120 results.
- Healthy-P2P prices come from public measurements on other RTX PRO 6000 boxes (each with its URL and quote);
  a reader's own probe replaces them.
- Compute is modelled from the bytes a pass reads and the efficiency an H200 pass reached; routing is taken
  as uniform (the most distinct experts a pass can read). The speculation answer prices Kimi-K2.5's config at the
  RTX PRO 6000's bandwidth with the regime's all-reduces, calibrated to the reported plain decode rate, with the
  per-cycle overheads measured on one H200 (chapter 2).
- A patched {{term}}`gate` does not prove fusion runs: only the server log ("AllReduce Fusion enabled") and fused
  kernels in a profile do ({{numref}}`tbl-live-kernels`).

## How to read this book

- Every number is **measured** (a run id, its hardware named), **reported** (a seed file and a quote),
  **reported (public)** (a URL, its hardware and a verbatim quote) or **modelled** (the inputs named); every
  table and chart says which in its caption or its provenance column.
- Figures and tables are numbered per chapter (Fig. 4.1 is chapter 4's first); cite them with the edition id
  shown at the top of each page: "{{numref}}`tbl-decision-regimes`, edition `{edition["id"]}`". The
  {len(runs)} measured runs behind this edition are listed with their hardware and software in
  {{numref}}`tbl-run-hardware`. Chapters open with their finding, then the evidence, then the method.
- Every caption ends with its sources (each measured run links its page: hardware, software, parameters), a
  Reproduce line (the command and the edition) and its data as CSV. The public figures, each with its link and
  quote, are listed in {{numref}}`tbl-public-evidence`.
- Chapter 1: the box's communication regime and the {{term}}`gates <gate>` that keep fusion off on SM120.
  Chapter 2: benchmarks at one stream and under load. Chapter 3: where a verify pass spends its time.
  Chapter 4: fusion vs elimination per regime. Chapter 5: the recommendations. Terms are explained in the
  {{doc}}`../glossary`.
"""
