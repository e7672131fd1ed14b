"""What can carry the reported 54.1 -> 96.1 tok/s, ranked by the evidence: for each hypothesis the observations
for and against it (each with its kind and source), how much of the removed cycle time it could explain (computed
from the regime curves, the measured probes and the account), and the one measurement on the case-study box that
decides it. The order is :data:`ORDER_RULE`, applied by :func:`evidence_score`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from verifylab.derived import derived
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.speculation import inputs
from verifylab.model.inputs.curves import Curve
from verifylab.model.inputs.stored import StoredInputs
from verifylab.model.pricing.pass_cost import PassCost, compare
from verifylab.model.pricing.regimes import Collective, Price
from verifylab.span import Span
from verifylab.vocab import KIMI_K2_HIDDEN, Regime

WEIGHTS = {"seed": 2, "wheel": 2, "measured": 1, "public": 1, "modelled": 1}


ORDER_RULE = (
    "ranked by the weight of the observations for a hypothesis less those against it — a line of the case study's "
    "own record (seed) or a fact read from the audited wheels weighs 2, a measurement on other hardware, a public "
    "report or a model result weighs 1 — and, at equal weight, by how much of the removed time it could explain"
)


@dataclass(frozen=True)
class Observation:
    """One observation bearing on a hypothesis: what it says, its kind (a key of :data:`WEIGHTS`), its source."""

    text: str
    kind: str
    source: str

    def __post_init__(self) -> None:
        if self.kind not in WEIGHTS:
            raise ValueError(f"observation kind {self.kind!r}: one of {', '.join(WEIGHTS)}")

    def cited(self) -> str:
        return f"{self.text} ({self.kind}: {self.source})"


def evidence_score(supports: list[Observation], contradicts: list[Observation]) -> int:
    """The weight of the observations for less those against (:data:`ORDER_RULE`)."""
    return sum(WEIGHTS[o.kind] for o in supports) - sum(WEIGHTS[o.kind] for o in contradicts)


def _public(stored: StoredInputs, row_id: str) -> tuple[float, str] | None:
    """One public row's value and message size in words (None: the edition's table lacks it)."""
    public = stored.public
    rows = public[public["id"] == row_id] if not public.empty else public
    if rows.empty:
        return None
    size = float(rows["message_bytes"].iloc[0])
    return float(rows["value"].iloc[0]), f"{size / 1024:g} KiB"


CROSS_NUMA_ROWS = ("pub-60", "pub-61", "pub-62")  # NCCL at 8 ranks on a cross-NUMA SM120 box whose P2P works


def _cross_numa_nccl(stored: StoredInputs, messages: tuple[float, float]) -> tuple[Span, str] | None:
    """That box's NCCL at the case study's verify sizes (log-log between its measured sizes) and the rows it is read
    from, or None where the edition's table lacks them: its 12 KiB figure alone is another size than a verify's."""
    p = stored.public
    rows = p[p["id"].isin(CROSS_NUMA_ROWS) & (p["unit"] == "us")] if not p.empty else p
    if len(rows) < 2:
        return None
    rows = rows.sort_values("message_bytes")
    curve = Curve("cross-NUMA nccl", tuple(rows["message_bytes"]), tuple(float(v) for v in rows["value"]))
    return Span(curve.at(messages[0]), curve.at(messages[1])), ", ".join(rows["id"])


def _decode_with_fusion_pct(stored: StoredInputs) -> float | None:
    """How much faster plain decoding at one stream would run with fusion where P2P is healthy (modelled): the
    reported decode step with its all-reduces (and their norm kernels) at the healthy NCCL price, against the same
    step with each on the fused kernel."""
    m, a = inputs(stored), cycle_account(stored)
    message = KIMI_K2_HIDDEN * 2
    nccl = m.curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, message)
    fused = m.curves.price(Regime.HEALTHY_P2P, Collective.FUSED, 8, message)
    if not isinstance(nccl, Price) or not isinstance(fused, Price):
        return None
    unfused_ms = a.allreduces * ((nccl.low_us + nccl.high_us) / 2 + m.norm_us(1)) / 1e3
    step = PassCost(1, 1, measured_ms=1e3 / a.baseline_after_tps - unfused_ms, collectives_ms=unfused_ms)
    with_fusion = step.with_collectives(a.allreduces * (fused.low_us + fused.high_us) / 2 / 1e3, "fused")
    if with_fusion.total_ms <= 0:
        return None
    return 100 * (compare(step, with_fusion).speedup - 1)


@derived
def ranked_hypotheses(stored: StoredInputs) -> pd.DataFrame:
    """One row per hypothesis, ranked: what it could explain of the removed time, evidence, deciding measurement."""
    a, m = cycle_account(stored), inputs(stored)
    removed = a.removed_ms
    k = a.draft_tokens[0]
    message = k * KIMI_K2_HIDDEN * 2
    low, high, _ = m.curves.reported_allreduce or (0.0, 0.0, 0.0)
    healthy_nccl = m.curves.price(Regime.HEALTHY_P2P, Collective.NCCL, 8, message)
    fused = m.curves.price(Regime.HEALTHY_P2P, Collective.FUSED, 8, message)
    n = a.allreduces

    def as_reported(per_us: float) -> PassCost:  # the reported pass, its all-reduces at ``per_us`` each
        return PassCost(k, 1, measured_ms=a.verify_ms - n * per_us / 1e3, collectives_ms=n * per_us / 1e3)

    def swapped(per_us: float, after_us: float) -> float:  # what the pass saves with each all-reduce at after_us
        before = as_reported(per_us)
        return compare(before, before.with_collectives(n * after_us / 1e3, "hypothesis")).saved_ms

    def explains(after: Price | str) -> Span | None:
        if isinstance(after, str):
            return None
        return Span(max(0.0, swapped(low, after.high_us)), swapped(high, after.low_us))

    eager = stored.runs.eager_over_graph(k)
    forensics = stored.fusion_forensics
    case_pair = forensics[(forensics["sglang"] == "0.5.9") & (forensics["flashinfer"] == "0.6.4")]
    workspace = case_pair["workspace"].iloc[0] if not case_pair.empty else "not audited"
    majors = case_pair["jit_majors"].iloc[0] if not case_pair.empty else "?"
    decode_pct = _decode_with_fusion_pct(stored)
    simple, ll = (_public(stored, row) for row in ("pub-21", "pub-22"))
    verify_sizes = (min(a.draft_tokens) * KIMI_K2_HIDDEN * 2.0, max(a.draft_tokens) * KIMI_K2_HIDDEN * 2.0)
    cross_numa = _cross_numa_nccl(stored, verify_sizes)
    cross_numa_says = None
    if cross_numa is not None:
        at_verify, rows_read = cross_numa
        matches = at_verify.low <= high and low <= at_verify.high  # the two ranges overlap
        cross_numa_says = (
            matches,
            Observation(
                f"NCCL at 8 ranks on a cross-NUMA SM120 box whose P2P works takes about {at_verify.low:.0f}-"
                f"{at_verify.high:.0f} us at the case study's verify sizes ({verify_sizes[0] / 1e3:.0f}-"
                f"{verify_sizes[1] / 1e3:.0f} kB, log-log between its measured sizes), "
                + (
                    f"as the case study's {low:.0f}-{high:.0f} us: NCCL's slow path can carry them"
                    if matches
                    else f"{at_verify.low / high:.1f}-{at_verify.high / low:.1f}x the case study's {low:.0f}-"
                    f"{high:.0f} us, and it is slow at decode size, where the case study's plain decoding was fast: "
                    "that box's NCCL is not the case study's"
                ),
                "public",
                f"SGLang's pcie_ipc_ar.py, {rows_read}",
            ),
        )
    stacks = stored.figures.set_index("figure_id")["stack"]
    upgrade_stack = str(stacks.get("upgrade_gain_pct", "the CUDA upgrade"))
    seed2 = "seed 002"
    rows = [
        {
            "hypothesis": "the fused one-shot push replaced a slow NCCL path for verify-size messages",
            "could_explain": explains(fused),
            "supports": [
                Observation("the server started with FlashInfer all-reduce fusion enabled", "seed", seed2),
                Observation(
                    f"SGLang 0.5.9 with FlashInfer 0.6.4 allocates the fusion workspace as {workspace}",
                    "wheel",
                    "chapter 1's audited wheels",
                ),
            ],
            "contradicts": [
                Observation(
                    f"FlashInfer 0.6.4 builds its fused module for SM majors {majors} only; no seed reports that list "
                    "being opened, and the seed credits the CUDA 13 upgrade for the start",
                    "wheel",
                    "chapter 1's audited wheels",
                ),
                Observation(
                    f"plain decoding with fusion enabled ran {a.baseline_after_tps:g} tok/s, as without it; with "
                    f"healthy P2P fusion would speed it by about {decode_pct:.0f} %"
                    if decode_pct is not None
                    else f"plain decoding with fusion enabled ran {a.baseline_after_tps:g} tok/s, as without it",
                    "seed",
                    seed2,
                ),
            ],
            "deciding_measurement": "a profile of one verify pass on each stack: fused kernel names "
            "(allreduce_fusion_kernel_oneshot_lamport) and their per-call time; `verifylab comm probe` on the box",
        },
        {
            "hypothesis": "NCCL itself got faster with the new stack (transport, protocol, topology, version)",
            "could_explain": explains(healthy_nccl),
            "supports": [
                Observation(f"the whole stack changed between the two runs ({upgrade_stack})", "seed", seed2),
                *([cross_numa_says[1]] if cross_numa_says is not None and cross_numa_says[0] else []),
                *(
                    [
                        Observation(
                            f"on a dual-socket box a topology fix alone took NCCL from SIMPLE to LL, {simple[0]:g} -> "
                            f"{ll[0]:g} us at {ll[1]}",
                            "public",
                            "pub-21, pub-22",
                        )
                    ]
                    if simple is not None and ll is not None
                    else []
                ),
            ],
            "contradicts": [
                Observation(
                    f"plain decoding moved only {a.baseline_before_tps:g} -> {a.baseline_after_tps:g} tok/s across "
                    "the upgrade (decoding's all-reduces were already fast)",
                    "seed",
                    seed2,
                ),
                *([cross_numa_says[1]] if cross_numa_says is not None and not cross_numa_says[0] else []),
            ],
            "deciding_measurement": "`verifylab comm probe` (NCCL_DEBUG=INFO transport and TUNING protocol per "
            "size, each rank's NUMA node) on both stacks",
        },
        {
            "hypothesis": "the verify pass ran eagerly before (not captured in a CUDA graph)",
            "could_explain": Span(swapped(low, low / eager[0]), swapped(high, high / eager[0]))
            if eager and eager[0] > 1
            else None,
            "supports": (
                [
                    Observation(
                        f"an eager NCCL all-reduce cost {eager[0]:.1f}x the graph-replayed one at {k} tokens",
                        "measured",
                        f"run {eager[1]}, 2 x H200",
                    )
                ]
                if eager
                else []
            )
            + [
                Observation(
                    f"decoding, captured, stayed fast: at most {a.text('decode_bound_us')} per all-reduce",
                    "modelled",
                    "the cycle account",
                )
            ],
            "contradicts": [],
            "deciding_measurement": "the server log's CUDA-graph capture for target verify, or cudaGraphLaunch vs "
            "per-kernel launches in a profile",
        },
        {
            "hypothesis": "the CUDA 12.8 -> 13 upgrade, as it sped decoding",
            "could_explain": a.upgrade_ms,
            "supports": [
                Observation(
                    f"decoding went {a.baseline_before_tps:g} -> {a.baseline_after_tps:g} tok/s with it", "seed", seed2
                )
            ],
            "contradicts": [],
            "deciding_measurement": "EAGLE-3 without fusion on the CUDA 13 stack",
        },
        {
            "hypothesis": "kernel fusion (the norm folded into the all-reduce kernel)",
            "could_explain": Span.of(a.kernel_fusion_ms),
            "supports": [
                Observation(
                    "fusion folds the layer norm into the all-reduce; it removes no all-reduce", "seed", "seed 000"
                )
            ],
            "contradicts": [
                Observation(f"{n} norm kernels of {a.text('norm_us')} bound what it can remove", "measured", "H200")
            ],
            "deciding_measurement": "none needed: the saving is bounded by the norm kernels",
        },
    ]
    frame = pd.DataFrame(rows)
    frame["could_explain_ms"] = [s.text(1, "ms") if s is not None else "not computable" for s in frame["could_explain"]]
    frame["of_removed"] = [
        f"up to {min(s.high / removed.low, 1.0):.0%}" if s is not None else "" for s in frame["could_explain"]
    ]
    frame["score"] = [evidence_score(f, c) for f, c in zip(frame["supports"], frame["contradicts"], strict=True)]
    size = [s.high if s is not None else -1.0 for s in frame["could_explain"]]
    frame = frame.assign(_size=size).sort_values(["score", "_size"], ascending=False, kind="stable")
    frame.insert(0, "rank", range(1, len(frame) + 1))
    frame["for"] = ["; ".join(o.cited() for o in obs) or "none" for obs in frame["supports"]]
    frame["against"] = ["; ".join(o.cited() for o in obs) or "none" for obs in frame["contradicts"]]
    frame["provenance"] = "modelled from reported, public and measured figures"
    return frame.drop(columns=["could_explain", "_size", "supports", "contradicts"]).reset_index(drop=True)


def deciding_between_top_two(ranked: pd.DataFrame) -> str:
    """The measurement that tells the two best-supported hypotheses apart, in words."""
    first, second = ranked.iloc[0], ranked.iloc[1]
    return (
        f'Between "{first["hypothesis"]}" and "{second["hypothesis"]}": {first["deciding_measurement"]}; '
        f"then {second['deciding_measurement']}."
    )


def _price(price: Price | str) -> str:
    return price if isinstance(price, str) else f"{price.low_us:.0f}-{price.high_us:.0f} us"
