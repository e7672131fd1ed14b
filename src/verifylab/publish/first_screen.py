"""The decision page's first screen: the four answers for a box with healthy PCIe P2P, a sentence each (fusion on
or off by load at the command's chain, keep EAGLE-3, the fastest verify, speculation by context), what differs where
the public evidence ran another engine, and why a fastest or fusion's switch is not decided where it is not."""

from __future__ import annotations

from verifylab.model.answers.decision import Option, RegimeAnswer, fusion_switch
from verifylab.model.answers.evidence_ladder import BandAnswer, Rung, bands_words, settle_command
from verifylab.model.answers.words import fastest_words


def fusion_at_chain_words(answer: RegimeAnswer, chain: int) -> str:
    """Fusion on or off by load at the chain the answers recommend: ``on at 1 stream (saves 0.11-0.45 ms per verify
    pass); off from 8 streams``; a load whose range straddles nothing saved says so."""
    parts = []
    for streams, saving in answer.fusion_gain_by_load.items():
        gain = saving.by_draft_tokens.get(chain) if saving else None
        switch = fusion_switch(gain)
        where = f"{streams} stream{'s' if streams > 1 else ''}"
        parts.append((switch, where, gain, answer.fusion_extrapolated_by_load.get(streams, "")))
    words: list[str] = []
    previous = None
    for switch, where, gain, beyond in parts:
        if switch == previous and switch != "on":
            continue  # "off from 8 streams" covers the loads after it
        previous = switch
        past = ", on prices past their sources' sizes: see below" if beyond else ""
        if switch == "on" and gain is not None:
            words.append(f"on at {where} (saves {gain.low:.2f}-{gain.high:.2f} ms per verify pass{past})")
        elif switch == "off":
            words.append(f"off from {where}" + (f" ({past[2:]})" if past else ""))
        elif switch == "cannot run":
            words.append(f"cannot run from {where} (needs P2P)")
        else:
            words.append(f"a tie at {where} (measure: `verifylab box --plan --verify FILE`)")
    return "; ".join(words) + f" ({chain} draft tokens; modelled)"


def fusion_first_words(answer: RegimeAnswer, chain: int) -> str:
    """The fusion answer as the first screen gives it: off where SGLang's PCIe-IPC all-reduce is the fastest verify
    pass (the launch command runs it, and fusion replaces the same all-reduces), its NCCL answer beside it."""
    ipc = [
        c
        for c, key in answer.best_by_load.items()
        if key == Option.TP8_PCIE_IPC.value and c not in answer.best_caveat_by_load  # decided there, not a tie
    ]
    on_nccl = fusion_at_chain_words(answer, chain)
    if not ipc:
        return on_nccl.capitalize()
    loads = f"{min(ipc)}-{max(ipc)} streams" if len(ipc) > 1 else f"{ipc[0]} stream{'' if ipc[0] == 1 else 's'}"
    return (
        f"Not with the PCIe-IPC all-reduce, the fastest verify pass at {loads} (the command below runs it); "
        f"on NCCL: {on_nccl}"
    )


def keep_words(answer: BandAnswer | None, row: dict) -> str:
    """Keep EAGLE-3 at one stream, from the nearest evidence's short-context answer (the model's where none)."""
    if answer is None or answer.gain_one is None:
        return f"{row['eagle3_gain_x']}x plain decoding at one stream (modelled)"
    gain = answer.gain_one
    verdict = "yes" if gain.low >= 1 else ("no" if gain.high < 1 else "a tie")
    return f"{verdict.capitalize()}: {gain.text(2)}x plain decoding at one stream, short context ({answer.rung.value})"


def first_screen(answer: RegimeAnswer, row: dict, bands: list[BandAnswer], chain: int) -> str:
    """The four answers for healthy PCIe P2P and the one command to run first, short enough for the first screen
    at 1400 x 800 and 800 x 1000 px (the browser test reads it there): each a setting, from the nearest evidence
    where it is stored."""
    short = next((b for b in bands if b.band == "short"), None)
    return f"""## The answers, for a box with healthy PCIe P2P

Run first, on the box: `verifylab box --gpus 8 --server URL`. It names your box's regime and prices these answers
from its own numbers; other regimes: {{numref}}`tbl-decision-regimes`.

- **Deploy fusion?** {fusion_first_words(answer, chain)}.
- **Keep EAGLE-3?** {keep_words(short, row)}.
- **Eliminate all-reduces, and how?** The fastest verify pass SGLang runs with EAGLE-3:
  {fastest_words(answer.best_by_load, answer.best_caveat_by_load, why=False)} (modelled).
- **Turn speculation off under load?** By context, {chain} draft tokens: {bands_words(bands)}.
"""


def undecided_words(answer: RegimeAnswer) -> str:
    """Why the fastest verify is not decided at a load (a tie, a price past its sources), and where fusion's switch
    rests on prices past their sources, in words ("": neither)."""
    words = []
    if answer.best_caveat_by_load:
        loads = "; ".join(f"at {c} stream{'' if c == 1 else 's'}, {w}" for c, w in answer.best_caveat_by_load.items())
        words.append(f"Where the fastest verify pass is not decided: {loads}.")
    if answer.fusion_extrapolated_by_load:
        loads = "; ".join(f"at {c} streams, {w}" for c, w in answer.fusion_extrapolated_by_load.items())
        words.append(f"Where fusion's switch rests on prices past their sources' sizes: {loads}.")
    return " ".join(words)


def engine_caveat(bands: list[BandAnswer]) -> str:
    """Which engine the bands answer for where public evidence ran another (vLLM): SGLang as it runs on SM120 by
    default, its verify re-priced from the stored engine runs (empty where no public evidence answered)."""
    public = [b for b in bands if b.rung is Rung.PUBLIC]
    if not public:
        return ""
    longest = public[-1]
    return (
        "These bands are SGLang's as it runs on SM120 by default (Triton attention): the public evidence ran vLLM's "
        "Triton MLA attention, and SGLang's serial verify, measured on SM90, grows far faster with context "
        "({numref}`tbl-verify-growth-fit`); SGLang with `--attention-backend flashinfer` and vLLM are answered "
        f"below (Each answer in full). To settle it on the box: {settle_command(longest.context)}."
    )
