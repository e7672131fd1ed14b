"""What a recommendation is: its topic (the heading the book shows), its text, the evidence it cites, its
confidence, the command it gives and what to measure next."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class Topic(StrEnum):
    """What a recommendation is about; its value is the heading the book shows."""

    SPECULATION = "speculation vs load"
    FUSION = "all-reduce fusion"
    GATES = "architecture gates"
    LAUNCH_COMMAND = "launch command"
    RISK_NO_MULTICAST = "risk: no NVLink multicast"
    ELIMINATION = "fusion vs elimination"
    RISK_FUSION_BATCH_LIMIT = "risk: fusion batch limit"
    RISK_FLASHINFER_VERSION = "risk: FlashInfer version"
    RISK_FLASHINFER_0_6_1 = "risk: FlashInfer 0.6.1"


Confidence = Literal["high", "medium", "low", "none"]


@dataclass
class Recommendation:
    topic: Topic
    recommendation: str
    evidence: list[str]
    confidence: Confidence
    command: str = ""
    measure_next: str = ""
    provenance: list[str] = field(default_factory=list)
    keep_speculation: bool | None = None  # speculation vs load only: False when the evidence says turn it off


def no_evidence(topic: Topic, what: str, measure_next: str) -> Recommendation:
    """A topic the evidence says nothing about: no recommendation, and the measurement that would give one."""
    return Recommendation(topic, what, [], "none", measure_next=measure_next)
