"""Every run table, declared once: its columns (name, dtype, unit), the key that identifies a row, and what makes
a run hold it. ``RunStore.write_table`` refuses a table or a column declared nowhere; ``RunStore.read_table``
reads a run of an older schema through :func:`migrate`, so readers see one set of names whatever wrote the run.

A column's unit follows from its name (``_us`` µs, ``_ms`` ms, ``_s`` s, ``_gbs`` GB/s, ``tokens_per_s`` tok/s,
``bytes`` bytes); :func:`unit_of` is that rule, and the registry's tests check every declared name against it."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from verifylab.errors import ManifestError
from verifylab.store.table_specs import DTYPES, TABLES, Column, TableSpec, unit_of

SCHEMA_VERSION = 3  # 2: single-stream intervals named for what they are (interval_*, not ci95_*); a run names
# its campaign in the manifest (schema 1 only in its id). 3: every run names the verifylab version it was made with,
# a probe its NCCL version, and a raw probe record holds plain text (store/migrations.migrate_to_3)

__all__ = ["DTYPES", "SCHEMA_VERSION", "TABLES", "Column", "TableSpec", "check_frame", "check_values", "columns_of",
           "migrate", "spec_of", "unit_of"]  # fmt: skip  # the specs live in table_specs; this is their one door


# Schema 1 -> 2: what a column was called before (a run of that schema is read under the new names).
RENAMED_IN_2 = {
    "single_stream": {"ci95_low": "interval_low", "ci95_high": "interval_high", "ci_coverage": "interval_coverage"}
}


def spec_of(table: str) -> TableSpec:
    """The declaration of table ``table``; an undeclared table is an error naming where to declare it."""
    for spec in TABLES:
        if spec.matches(table):
            return spec
    raise ManifestError(f"table {table!r} is declared nowhere: add it to TABLES in verifylab/store/table_specs.py")


def columns_of(table: str) -> tuple[str, ...]:
    """The declared column names of ``table``, in order."""
    return spec_of(table).column_names


def _holds(dtype: str, values: pd.Series) -> bool:
    """Whether ``values`` (nulls left out) are of the declared ``dtype``: whole numbers for int (a column with a
    null is float), numbers for float, booleans for bool; text and JSON are not checked."""
    if dtype in ("str", "json"):
        return True
    kind = values.dtype.kind if isinstance(values.dtype, np.dtype) else "O"  # a numpy column answers by its type
    if kind in "biu":  # booleans hold bool only; whole numbers hold int and float
        return values.empty or (dtype == "bool") == (kind == "b")
    if kind == "f":
        if dtype == "float":
            return True
        floats = values.dropna().to_numpy()
        return floats.size == 0 or (dtype == "int" and bool((floats % 1 == 0).all()))
    known = values.dropna()
    if known.empty:
        return True
    if dtype == "bool":
        return known.map(lambda v: isinstance(v, bool | np.bool_)).all()
    numbers = pd.to_numeric(known, errors="coerce")
    if numbers.isna().any() or known.map(lambda v: isinstance(v, bool | np.bool_)).any():
        return False
    return dtype == "float" or bool((numbers % 1 == 0).all())


def _dtypes(frame: pd.DataFrame) -> dict[str, object] | None:
    """Each column's type by name, read once (None where two columns share a name: each is then read itself)."""
    return None if frame.columns.has_duplicates else dict(frame.dtypes.items())


def _held_by_type(dtype: str, kind_of: object) -> bool:
    """Whether a column of numpy type ``kind_of`` holds the declared ``dtype`` whatever its values: a float column
    declared float, an int column declared int or float, a bool column declared bool. Anything else is answered by
    :func:`_holds` from the values."""
    if not isinstance(kind_of, np.dtype):
        return False
    kind = kind_of.kind
    return (
        (kind == "f" and dtype == "float")
        or (kind in "iu" and dtype in ("int", "float"))
        or (kind == "b" and dtype == "bool")
    )


def check_frame(table: str, frame: pd.DataFrame) -> None:
    """A frame about to be stored as ``table``: every column declared, numbers where numbers are declared (a
    column of no value at all is allowed). A :class:`ManifestError` names the table and the column."""
    spec = spec_of(table)
    declared = {c.name: c for c in spec.columns}
    by_type = _dtypes(frame)
    for name in frame.columns:
        column = declared.get(str(name))
        if column is None:
            raise ManifestError(
                f"table {table!r}: column {name!r} is not declared (verifylab/store/schema.py declares "
                f"{', '.join(spec.column_names)})"
            )
        if column.dtype in ("str", "json") or (by_type is not None and _held_by_type(column.dtype, by_type[name])):
            continue  # answered by the column's declaration or its numpy type: its values need not be read
        if not _holds(column.dtype, frame[name]):
            raise ManifestError(
                f"table {table!r}: column {name!r} is declared {column.dtype}, holds {frame[name].dtype} values"
            )


MEASURED_UNITS = ("µs", "ms", "s", "GB/s", "tok/s", "bytes", "TFLOP/s")  # a time, a rate or a size: never < 0
SIGNED = re.compile(r"saving|delta|diff|gain|change")  # a difference of two measured values may be negative


def check_values(table: str, frame: pd.DataFrame) -> None:
    """A stored table's numbers as its columns declare them: a time, rate or size is finite and not negative (an
    empty cell, NaN, is 'not measured' and allowed). A :class:`ManifestError` names the column and the row."""
    by_type = _dtypes(frame)
    for name in frame.columns:
        unit = unit_of(str(name))
        if unit not in MEASURED_UNITS:
            continue
        if not pd.api.types.is_numeric_dtype(frame[name] if by_type is None else by_type[name]):
            continue
        values = frame[name].to_numpy(dtype=float)
        bad = np.isinf(values) | ((values < 0) & (SIGNED.search(str(name)) is None))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ManifestError(
                f"table {table!r}: column {name!r} row {row + 1} holds {values[row]!r} {unit}: a measured "
                "time, rate or size is finite and not negative"
            )


def migrate(table: str, frame: pd.DataFrame, schema_version: int) -> pd.DataFrame:
    """``frame`` as stored by a run of ``schema_version``, under the current schema's names."""
    if schema_version < 2 and table in RENAMED_IN_2:
        frame = frame.rename(columns=RENAMED_IN_2[table])
    return frame
