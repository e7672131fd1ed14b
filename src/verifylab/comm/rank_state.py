"""What a probe rank is told and what it tells back: its spec (written once by the parent), the groups it times
beside the whole world (every pair, both halves), what it measured so far, and its phase for the parent."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from verifylab.comm.timing import RankSample
from verifylab.iorw import atomic_write_json, atomic_write_text

WORLD = "all"


@dataclass(frozen=True)
class RankSpec:
    """What the parent tells every rank (written once as JSON)."""

    config: dict
    world: int
    devices: list[int]  # CUDA device per rank (empty for gloo)
    rendezvous: str  # the ranks' FileStore file (verifylab.rendezvous)
    out: str
    p2p_everywhere: bool  # every pair can access its peers' memory (FlashInfer's kernels need it)

    @classmethod
    def read(cls, path: Path) -> RankSpec:
        return cls(**json.loads(Path(path).read_text()))


GROUP_NAME = re.compile(r"all|(pair|half):\d{1,4}(-\d{1,4})+")  # every group a probe measures, as named here


def group_name(ranks: tuple[int, ...]) -> str:
    """``0-1`` for a pair, ``0-1-2-3`` for a half: ranks joined by '-'."""
    return "-".join(str(r) for r in ranks)


def subgroups(world: int) -> list[tuple[str, tuple[int, ...]]]:
    """Every pair and both halves (first and second half of the ranks), with more than two ranks."""
    if world <= 2:
        return []
    pairs = [("pair", p) for p in combinations(range(world), 2)]
    half = world // 2
    halves = [("half", tuple(range(half))), ("half", tuple(range(half, world)))] if world >= 4 else []
    return pairs + halves


@dataclass
class RankResult:
    """What this rank measured so far, and what it could not run (with the reason)."""

    rank: int
    device: str
    cells: list[RankSample] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    identity: dict[str, object] = field(default_factory=dict)  # which physical GPU (CUDA's view) and NCCL version

    def write(self, out: Path) -> None:
        atomic_write_json(
            out / f"rank{self.rank}.json",
            {
                "rank": self.rank,
                "device": self.device,
                "cells": [c.to_dict() for c in self.cells],
                "unavailable": self.unavailable,
                "identity": self.identity,
            },
        )


class Phases:
    """Records the rank's phase and progress for the parent (the seam a test's fault launcher patches:
    ``verifylab.testing.faults``)."""

    def __init__(self, rank: int, out: Path) -> None:
        self.rank, self.out, self.done = rank, out, 0

    def enter(self, phase: str) -> None:
        atomic_write_text(self.out / f"rank{self.rank}.phase", f"{phase}\n{self.done}")

    def step(self, phase: str) -> None:
        self.done += 1
        atomic_write_text(self.out / f"rank{self.rank}.phase", f"{phase}\n{self.done}")
