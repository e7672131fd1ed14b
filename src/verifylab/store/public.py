"""Public measurements (the fourth kind of evidence, beside measured, reported by the case study and modelled):
``data/reference/public_measurements.csv``, one row per figure with its URL, date, hardware and a verbatim quote
that carries the number."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

PUBLIC_FILE = Path("reference") / "public_measurements.csv"


def public_measurements_or_none(data_dir: Path) -> pd.DataFrame | None:
    """The public table of ``data_dir``, or None where the folder has none (a probe still decides by transport)."""
    path = Path(data_dir) / PUBLIC_FILE
    return pd.read_csv(path) if path.is_file() else None
