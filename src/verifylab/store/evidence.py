"""``Evidence``: one data folder as the book reads it — reported figures, measured runs, the audited gate
matrix — each part loaded once on first use and shared by every table, figure and finding."""

from __future__ import annotations

import atexit
from functools import cached_property
from pathlib import Path

import pandas as pd

from verifylab.csv_cells import restored
from verifylab.derived import DerivedCache
from verifylab.errors import ManifestError, ReferenceDataError
from verifylab.iorw import file_exists
from verifylab.launch import LaunchTarget
from verifylab.sources import MeasuredRuns
from verifylab.store.derived_disk import DiskDerivedCache, cache_key, open_cache
from verifylab.store.public import load_public_measurements
from verifylab.store.public_context import load_public_context
from verifylab.store.public_speculation import load_public_speculation
from verifylab.store.reference import load_reported_figures
from verifylab.store.runs import RunStore

GATE_MATRIX_FILE = Path("gates") / "gate_matrix.csv"  # written by `verifylab gates matrix`
FLASHINFER_PINS_FILE = Path("gates") / "flashinfer_pins.csv"  # written next to the matrix
FORENSICS_FILE = Path("gates") / "fusion_forensics.csv"  # written next to the matrix
SGLANG_FLAGS_FILE = Path("gates") / "sglang_flags.csv"  # written next to the matrix
SGLANG_ENV_FILE = Path("gates") / "sglang_env.csv"  # the variables each audited wheel reads
SGLANG_WHEELS_FILE = Path("gates") / "sglang_wheels.csv"  # each audited wheel's file name and sha256
VERIFY_PATH_FILE = Path("gates") / "verify_path.csv"  # the verify path's gates per audited SGLang wheel


class Evidence:
    """Everything under one ``data/`` folder; pass it down instead of a path."""

    def __init__(self, data_dir: Path | str, keep_derived: bool = False) -> None:
        """``keep_derived``: keep what @derived functions compute on disk between calls (the interactive commands;
        :mod:`verifylab.store.derived_disk`), never in a chapter, whose reads of the data are recorded."""
        self.data_dir = Path(data_dir)
        if not self.data_dir.is_dir():
            raise ReferenceDataError(f"data folder {self.data_dir} does not exist")
        self.derived_cache = DerivedCache()  # what @derived functions computed from it
        self._kept = open_cache("derived") if keep_derived else None
        self._kept_name = cache_key(self.data_dir) if self._kept is not None else ""
        if self._kept is not None:
            self.derived_cache = self._on_disk(self._kept_name)

    def _on_disk(self, name: str) -> DiskDerivedCache:
        assert self._kept is not None
        disk = DiskDerivedCache(self._kept, name)
        atexit.register(disk.save)  # after the command printed its answer
        return disk

    def __repr__(self) -> str:
        return f"Evidence({str(self.data_dir)!r})"

    @cached_property
    def runs(self) -> RunStore:
        """The measured runs (``data/runs/``)."""
        return RunStore(self.data_dir / "runs")

    @cached_property
    def measured(self) -> MeasuredRuns:
        """The measured runs as the cost model reads them (each table read once)."""
        measured = self.runs.measured()
        if self._kept is not None:  # their own derived values (the grid's sweeps and fit) kept beside the others
            measured.derived_cache = self._on_disk(self._kept_name.replace(".pickle", ".measured.pickle"))
        return measured

    @cached_property
    def figures(self) -> pd.DataFrame:
        """The figures reported by the case study, each with seed file and quote."""
        return load_reported_figures(self.data_dir)

    @cached_property
    def public(self) -> pd.DataFrame:
        """Public measurements (URL, hardware, verbatim quote per figure; empty where the folder has none)."""
        return load_public_measurements(self.data_dir)

    @cached_property
    def public_speculation(self) -> pd.DataFrame:
        """Public end-to-end speculation curves (plain and speculative tok/s per stream count, each quoted)."""
        return load_public_speculation(self.data_dir)

    @cached_property
    def public_context(self) -> pd.DataFrame:
        """Public per-context decode matrices (plain and speculative tok/s per context and stream count, quoted)."""
        return load_public_context(self.data_dir)

    @cached_property
    def gate_matrix(self) -> pd.DataFrame:
        """Every gate of every audited SGLang/FlashInfer wheel (provenance: audited published wheels)."""
        return self._gates_csv(GATE_MATRIX_FILE, keep_default_na=False)

    @cached_property
    def verify_path(self) -> pd.DataFrame:
        """The verify path's gates per audited SGLang wheel: default attention backend per model shape and GPU, the
        split-KV verify's conditions, FlashInfer MLA on SM120, the verify-related options (file and line each)."""
        return self._gates_csv(VERIFY_PATH_FILE, dtype={"version": str, "line": int}, keep_default_na=False)

    @cached_property
    def flashinfer_pins(self) -> pd.DataFrame:
        """The FlashInfer version each audited SGLang wheel pins."""
        return self._gates_csv(FLASHINFER_PINS_FILE, dtype=str, keep_default_na=False)

    @cached_property
    def fusion_forensics(self) -> pd.DataFrame:
        """Per SGLang/FlashInfer pair, what in the wheels allows or blocks fusion on a PCIe SM120 box (audited)."""
        return self._gates_csv(FORENSICS_FILE, dtype={"sglang": str, "flashinfer": str})

    @cached_property
    def sglang_flags(self) -> dict[str, frozenset[str]]:
        """Each audited SGLang version's long options, read from its wheel (``verifylab gates matrix``)."""
        table = self._gates_csv(SGLANG_FLAGS_FILE, dtype=str, keep_default_na=False)
        return {str(v): frozenset(group["flag"]) for v, group in table.groupby("sglang")}

    @cached_property
    def sglang_env(self) -> dict[str, frozenset[str]]:
        """Each audited SGLang version's environment variables, read from its wheel (``verifylab gates matrix``)."""
        table = self._gates_csv(SGLANG_ENV_FILE, dtype=str, keep_default_na=False)
        return {str(v): frozenset(group["variable"]) for v, group in table.groupby("sglang")}

    def launch_target(self, version: str) -> LaunchTarget:
        """SGLang ``version`` as the audited wheels have it: the flags a command for it may use, the FlashInfer it
        pins and the variables it reads (one line naming the versions audited where it is not)."""
        flags = self.sglang_flags if file_exists(self.data_dir / SGLANG_FLAGS_FILE) else {}
        pins = self.flashinfer_pins if file_exists(self.data_dir / FLASHINFER_PINS_FILE) else pd.DataFrame()
        pinned = dict(zip(pins["sglang"], pins["flashinfer_pin"], strict=True)) if not pins.empty else {}
        env = self.sglang_env if file_exists(self.data_dir / SGLANG_ENV_FILE) else None
        return LaunchTarget.audited(version, flags, pinned, env)

    @property
    def has_gate_matrix(self) -> bool:
        return file_exists(self.data_dir / GATE_MATRIX_FILE)

    @property
    def has_verify_path(self) -> bool:
        return file_exists(self.data_dir / VERIFY_PATH_FILE)

    def newest_with(self, *tables: str) -> str | None:
        """The most recently created run holding every one of ``tables``, or None."""
        return self.runs.newest_with(*tables)

    def newest_table(self, table: str) -> pd.DataFrame:
        """Table ``table`` of the most recently created run holding it; an error naming it when none does."""
        run_id = self.newest_with(table)
        if run_id is None:
            raise ManifestError(f"no run under {self.runs.root} holds table '{table}'")
        return self.runs.read_table(run_id, table)

    def _gates_csv(self, name: Path, **read_options) -> pd.DataFrame:
        path = self.data_dir / name
        try:
            return restored(pd.read_csv(path, **read_options))  # as `gates matrix` wrote it (csv_cells)
        except FileNotFoundError as exc:
            raise ReferenceDataError(f"{path}: missing (write it with `verifylab gates matrix`)") from exc
