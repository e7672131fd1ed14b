"""A public per-context decode matrix as the model reads it (``data/reference/public_context.csv``): one box, engine
and chain; plain and speculative aggregate tok/s by context and stream count; the accept length the page implies;
the KV pools it states; where it comes from."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from verifylab.span import Span


@dataclass(frozen=True)
class ContextMatrix:
    """One matrix: ``plain[(context, streams)]`` and ``spec[...]`` in aggregate tok/s (a cell the page skipped is
    absent from ``spec``); ``accept`` the accept length the page implies; pools in tokens (None: not stated)."""

    name: str
    model: str
    config: str
    gpu: str
    gpus: int
    interconnect: str
    engine: str
    attention: str
    kv_dtype: str
    dcp: int
    verify_tokens: int
    accept: Span
    accept_note: str
    plain_pool_tokens: int | None
    spec_pool_tokens: int | None
    plain: dict[tuple[int, int], float]
    spec: dict[tuple[int, int], float]
    labels: dict[int, str]  # context -> the page's own label ("0", "16k", ...)
    url: str
    published: str

    @property
    def contexts(self) -> list[int]:
        return sorted({c for c, _ in self.plain})

    @property
    def streams(self) -> list[int]:
        return sorted({s for _, s in self.plain})

    @property
    def anchor(self) -> int:
        """The shortest context: the row every other context is transferred from."""
        return self.contexts[0]

    @property
    def source(self) -> str:
        return f"{self.url} (table of {self.published})"


def _pool(value: object) -> int | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(float(str(value)))


def context_matrices(frame: pd.DataFrame) -> list[ContextMatrix]:
    """Every matrix of the checked public table (:func:`verifylab.store.public_context.load_public_context`), in
    the order of their names; the table is read as plain rows once (a frame's rows as tuples cost ten times more)."""
    by_name: dict[str, list[dict]] = {}
    columns = {column: frame[column].tolist() for column in frame.columns}
    for values in zip(*columns.values(), strict=True):
        row = dict(zip(columns, values, strict=True))
        by_name.setdefault(str(row["matrix"]), []).append(row)
    return [_matrix(name, rows) for name, rows in sorted(by_name.items())]


def _matrix(name: str, rows: list[dict]) -> ContextMatrix:
    """One matrix from its rows (the first states what the matrix ran)."""
    first = rows[0]
    return ContextMatrix(
        name=name,
        model=str(first["model"]),
        config=str(first["config"]),
        gpu=str(first["gpu"]),
        gpus=int(first["gpus"]),
        interconnect=str(first["interconnect"]),
        engine=str(first["engine"]),
        attention=str(first["attention"]),
        kv_dtype=str(first["kv_dtype"]),
        dcp=int(first["dcp"]),
        verify_tokens=int(first["verify_tokens"]),
        accept=Span(float(first["accept_low"]), float(first["accept_high"])),
        accept_note=str(first["accept_note"]),
        plain_pool_tokens=_pool(first["kv_pool_plain_tokens"]),
        spec_pool_tokens=_pool(first["kv_pool_spec_tokens"]),
        plain={(int(r["context"]), int(r["streams"])): float(r["plain_tok_s"]) for r in rows},
        spec={
            (int(r["context"]), int(r["streams"])): float(r["spec_tok_s"])
            for r in rows
            if r["spec_tok_s"] == r["spec_tok_s"]
        },
        labels={int(r["context"]): str(r["context_label"]) for r in rows},
        url=str(first["url"]),
        published=str(first["published"]),
    )
