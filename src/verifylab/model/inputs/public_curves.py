"""The public end-to-end speculation curves (``data/reference/public_speculation.csv``) as the model reads them: one
curve per box, drafter and accept length, with its reported plain and speculative tok/s by stream count."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from verifylab.derived import derived
from verifylab.model.inputs.gpus import gpu_title
from verifylab.sources import ModelSources
from verifylab.span import Span

ROLE_ORDER = {"fit": 0, "held out": 1, "family check": 2}


INTERCONNECT_TITLE = {"nvlink": "NVLink", "healthy P2P": "PCIe, healthy P2P"}


@dataclass(frozen=True)
class PublicCurve:
    """One public curve: its box, drafter and accept length, and the reported tok/s per stream count."""

    name: str
    rows: pd.DataFrame  # its rows of the public table, by stream count

    def field(self, column: str) -> str:
        return str(self.rows[column].iloc[0])

    @property
    def role(self) -> str:
        return self.field("role")

    @cached_property
    def plain(self) -> dict[int, float]:
        return {int(r.streams): float(r.plain_tok_s) for r in self.rows.itertuples()}

    @cached_property
    def spec(self) -> dict[int, float]:
        return {int(r.streams): float(r.spec_tok_s) for r in self.rows.itertuples() if np.isfinite(r.spec_tok_s)}

    @property
    def accept(self) -> Span:
        return Span(float(self.rows["accept_low"].iloc[0]), float(self.rows["accept_high"].iloc[0]))

    @property
    def hardware(self) -> str:
        gpu, link = self.field("gpu"), self.field("interconnect")
        return f"{int(self.rows['gpus'].iloc[0])} x {gpu_title(gpu)} ({INTERCONNECT_TITLE.get(link, link)})"


@derived
def public_curves(ev: ModelSources) -> list[PublicCurve]:
    """Every public curve, fit curves first, then the held out, then the family checks (built once per evidence)."""
    table = ev.public_speculation
    if table.empty:
        return []
    curves = [PublicCurve(str(name), part.sort_values("streams")) for name, part in table.groupby("curve")]
    return sorted(curves, key=lambda c: (ROLE_ORDER[c.role], c.name))
