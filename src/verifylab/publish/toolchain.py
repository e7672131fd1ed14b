"""The toolchain that renders an edition (Jupyter Book, Sphinx, MyST-NB, Altair, vl-convert, pandas, papermill,
jupytext, Python): recorded in every edition, compared with the newest registered edition's before a build, so a
rebuilt edition says when its pages may differ from the registered ones."""

from __future__ import annotations

import platform
from importlib import metadata

TOOLCHAIN = (
    "jupyter-book",
    "sphinx",
    "myst-nb",
    "altair",
    "vl-convert-python",
    "pandas",
    "papermill",
    "jupytext",
)


def toolchain_versions() -> dict[str, str]:
    """Each rendering package's installed version ('not installed' where absent) and Python's."""
    versions = {"python": platform.python_version()}
    for name in TOOLCHAIN:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def toolchain_differences(registry: list[dict], current: dict[str, str]) -> list[str]:
    """One line per package whose version differs from the newest registered edition that recorded its toolchain
    (none recorded: no line)."""
    recorded = next((e for e in reversed(registry) if e.get("toolchain")), None)
    if recorded is None:
        return []
    before = recorded["toolchain"]
    return [
        f"{name} {current.get(name, 'not installed')} here, {before[name]} in edition {recorded['id']}"
        for name in sorted(before)
        if current.get(name) != before[name]
    ]
