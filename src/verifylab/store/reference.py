"""Figures *reported* by the case-study documents (``data/reference/``), each with seed file and quote."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from verifylab.errors import ReferenceDataError

REFERENCE_FILE = "reported_figures.csv"
COLUMNS = [
    "figure_id",
    "quantity",
    "value",
    "value_text",
    "unit",
    "configuration",
    "stack",
    "conditions",
    "seed_file",
    "quote",
]


def load_reported_figures(data_dir: Path | str) -> pd.DataFrame:
    """Load and check the reported-figures table; adds ``provenance='reported'``."""
    path = Path(data_dir) / "reference" / REFERENCE_FILE
    try:
        frame = pd.read_csv(path, dtype={"value_text": str}, keep_default_na=False, na_values={"value": [""]})
    except FileNotFoundError as exc:
        raise ReferenceDataError(f"{path}: reported-figures table missing") from exc
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ReferenceDataError(f"{path}: missing column(s) {', '.join(missing)}")
    for row_no, row in enumerate(frame.itertuples(index=False), start=2):
        if not row.seed_file or not row.quote:
            raise ReferenceDataError(f"{path}: line {row_no} ({row.figure_id}) needs 'seed_file' and 'quote'")
        if pd.isna(row.value) and not row.value_text:
            raise ReferenceDataError(f"{path}: line {row_no} ({row.figure_id}) has neither 'value' nor 'value_text'")
    if frame["figure_id"].duplicated().any():
        dup = frame.loc[frame["figure_id"].duplicated(), "figure_id"].tolist()
        raise ReferenceDataError(f"{path}: duplicate figure_id {dup}")
    frame["value"] = pd.to_numeric(frame["value"])
    frame["provenance"] = "reported"
    return frame


def quote_in_seed(quote: str, seed_text: str) -> bool:
    """True when ``quote`` appears verbatim in the seed (whitespace-insensitive)."""

    def squash(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()

    return squash(quote) in squash(seed_text)


VARIANT_NAMES = {"eagle3": "EAGLE-3", "eagle3_fusion": "EAGLE-3 + fusion", "ngram": "NGRAM"}


def figure_label(configuration: str, stack: str, conditions: str, seed_file: str) -> str:
    """A reported figure as a reader names it: 'fusion, run 5 · CUDA 13 · seed 002' (never its id)."""
    run = re.match(r"run (\d+)/\d+", conditions or "")
    name = VARIANT_NAMES.get(configuration, configuration) + (f", run {run.group(1)}" if run else "")
    stack = stack if stack and stack != "unspecified" else "stack unspecified"
    return f"{name} · {stack} · seed {seed_file[:3]}"


def reported_throughput(figures: pd.DataFrame) -> pd.DataFrame:
    """Decode-throughput figures per configuration, for the introduction's chart."""
    tput = figures[(figures["quantity"] == "decode throughput") & (figures["unit"] == "tok/s")].copy()
    tput["label"] = [
        figure_label(*row)
        for row in tput[["configuration", "stack", "conditions", "seed_file"]].itertuples(index=False)
    ]
    return tput[["figure_id", "configuration", "stack", "label", "value", "seed_file", "quote", "provenance"]]
