"""Audit published SGLang (and FlashInfer) wheels: which versions need which patch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from verifylab.errors import GateError
from verifylab.gates import audit
from verifylab.gates.prefilter import may_hold_gates
from verifylab.gates.wheel import WheelReader, open_wheel
from verifylab.vocab import version_key

DIST = {"sglang": "sglang", "flashinfer": "flashinfer-python"}
FALLBACK_PLATFORM = [
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--platform",
    "manylinux_2_34_x86_64",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux2014_x86_64",
]


def download_wheel(package: str, version: str, cache: Path) -> Path:
    """``pip download --no-deps`` one wheel into ``cache`` (reused when already there). pip writes into a folder
    of its own, and the whole wheel is renamed into the cache: a process reading the cache never opens half a
    wheel that another is still downloading."""
    dist = DIST[package]
    stem = dist.replace("-", "_")
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as tmp:
        base = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            tmp,
            f"{dist}=={version}",
        ]
        for extra in ([], FALLBACK_PLATFORM):
            try:
                proc = subprocess.run(base + extra, capture_output=True, text=True, check=False, timeout=600)
            except subprocess.TimeoutExpired:
                raise GateError(f"pip download of {dist}=={version} took longer than 600 s and was stopped") from None
            got = sorted(Path(tmp).glob(f"{stem}-{version}-*.whl"))
            if proc.returncode == 0 and got:
                target = cache / got[0].name
                os.replace(got[0], target)
                return target
    raise GateError(f"pip could not download {dist}=={version}: {proc.stderr.strip().splitlines()[-1:]}")


UNPACK_FORMAT = "gate files v1"  # what an unpacked folder holds; a folder of another format is unpacked again
KEPT_WHOLE = ("__init__.py", "version.py", "_build_meta.py")  # kept whatever they hold


def unpack_sources(wheel: Path, package: str, into: Path) -> Path:
    """Extract what an audit reads (nothing compiled): the package's Python files that may hold a gate or define
    an arch predicate (``prefilter.may_hold_gates``), its ``__init__``/``version`` modules and the dist-info
    METADATA. An SGLang wheel's 4,700 sources shrink to a few hundred; the audit finds the same."""

    def unpacked(folder: Path) -> bool:
        marker = folder / ".unpacked"
        return marker.is_file() and marker.read_text().endswith(UNPACK_FORMAT)

    if unpacked(into):
        return into
    into.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{into.name}.", dir=into.parent))  # extracted aside, renamed whole:
    try:  # two processes unpacking one wheel never see (or delete) each other's half
        with open_wheel(wheel) as zf:  # limits on members and bytes; a bad wheel is one line
            for name in zf.names():
                if name.endswith(".dist-info/METADATA") or (name.startswith(f"{package}/") and name.endswith(".py")):
                    text = zf.read_text(name)
                    keep = name.endswith("METADATA") or name.rsplit("/", 1)[-1] in KEPT_WHOLE
                    if keep or may_hold_gates(text):
                        target = staging / name  # a plain relative name (open_wheel refused any other)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(text, encoding="utf-8")
        (staging / ".unpacked").write_text(f"{wheel.name}\n{UNPACK_FORMAT}")
        if into.exists() and not unpacked(into):
            shutil.rmtree(into, ignore_errors=True)  # an older format
        try:
            os.rename(staging, into)
        except OSError:
            if not unpacked(into):  # another process got there first: theirs is whole; anything else is an error
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return into


REMEDY_NONE = "check the version exists on the package index; a hand-placed wheel in the cache is read as is"


def gate_matrix(
    versions: dict[str, list[str]], cache: Path, arch: str = "sm120", progress: Callable[[str], None] | None = None
) -> pd.DataFrame:
    """One row per (package, version, finding): file, function, kind, status for ``arch``."""
    rows = []
    for package, package_versions in versions.items():
        for version in package_versions:
            if progress:
                progress(f"{package} {version}")
            wheel = download_wheel(package, version, cache / "wheels")
            root = unpack_sources(wheel, package, cache / "unpacked" / f"{package}-{version}")
            try:
                findings = [f for f in audit(root, arch).findings if f.file not in DIST]  # not version-level ones
            except GateError as exc:
                raise GateError(f"{wheel.name}: {exc}") from None
            if not findings:
                raise GateError(
                    f"{wheel.name}: no gate, table or limit found in {package} {version}: not a wheel this audit can "
                    f"read ({REMEDY_NONE})"
                )
            for f in findings:
                rows.append(
                    {
                        "package": package,
                        "version": version,
                        "file": f.file,
                        "function": f.function,
                        "line": f.line,
                        "kind": f.kind,
                        "status": f.status,
                        "expression": f.expression,
                        "note": f.note,
                        "provenance": f"audited: published {DIST[package]} {version} wheel",
                    }
                )
    return pd.DataFrame(rows)


def pin_in_metadata(text: str) -> str | None:
    """The FlashInfer version a wheel's METADATA requires (``Requires-Dist: flashinfer_python==X``), or None."""
    for line in text.splitlines():
        found = re.match(r"Requires-Dist:\s*flashinfer[-_]python(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)", line, re.I)
        if found:
            return found.group(1)
    return None


def flashinfer_pin(unpacked: Path) -> str | None:
    """The FlashInfer version an unpacked SGLang wheel requires."""
    for metadata in unpacked.glob("*.dist-info/METADATA"):
        pin = pin_in_metadata(metadata.read_text(encoding="utf-8", errors="replace"))
        if pin is not None:
            return pin
    return None


def pinned_flashinfer(archive: WheelReader) -> str | None:
    """The FlashInfer version an open SGLang wheel requires."""
    metadata = next((n for n in archive.names() if n.endswith(".dist-info/METADATA")), None)
    return pin_in_metadata(archive.read_text(metadata)) if metadata else None


def flashinfer_pins(versions: list[str], cache: Path) -> pd.DataFrame:
    """Per SGLang version (wheels already in ``cache``, as ``gate_matrix`` leaves them): the FlashInfer it pins."""
    rows = []
    for version in versions:
        root = unpack_sources(
            download_wheel("sglang", version, cache / "wheels"), "sglang", cache / "unpacked" / f"sglang-{version}"
        )
        rows.append(
            {
                "sglang": version,
                "flashinfer_pin": flashinfer_pin(root),
                "provenance": f"audited: published sglang {version} wheel METADATA",
            }
        )
    return pd.DataFrame(rows)


def matrix_pivot(matrix: pd.DataFrame) -> pd.DataFrame:
    """Gate (file:function, kind) x version -> status: which versions need which patch."""
    frame = matrix[matrix["kind"] != "limit"].copy()
    frame["gate"] = frame["file"].str.replace(r"^(sglang/srt|flashinfer)/", "", regex=True) + " : " + frame["function"]
    frame["column"] = frame["package"] + " " + frame["version"]
    pivot = frame.pivot_table(index=["kind", "gate"], columns="column", values="status", aggfunc="first")
    order = sorted(pivot.columns, key=lambda c: (c.split()[0] != "sglang", version_key(c.split()[1])))
    return pivot[order].fillna("—").reset_index()
