"""verifylab: evidence for SGLang tensor-parallel speculative decoding on PCIe GPUs."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata when first asked for: importlib.metadata costs every
    process that imports verifylab (kernels, ranks, servers) 45 ms, and few of them ask."""
    if name != "__version__":
        raise AttributeError(f"module 'verifylab' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("verifylab")
    except PackageNotFoundError:  # running from a source tree without installation (a device copy)
        found = source_tree_version()
    globals()["__version__"] = found
    return found


def source_tree_version() -> str:
    """The version pyproject.toml beside this source tree declares, marked ``+src`` (not an installed build);
    ``0.0.0+src`` where there is none."""
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, KeyError, ValueError):
        declared = "0.0.0"
    return f"{declared}+src"
