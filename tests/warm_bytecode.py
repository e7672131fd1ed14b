"""Compile the bytecode of what the test processes import, before they start: ``make test`` runs one process per
group beside the lint. A fresh clone has no bytecode, and the first workers, kernels and ranks of a session would
otherwise each compile the same modules at the same time.

    python tests/warm_bytecode.py torch    # torch (with the compiler stack its profiler loads), Ray, Playwright
    python tests/warm_bytecode.py book     # pandas, the Jupyter and Sphinx stacks, pytest, every verifylab module
    python tests/warm_bytecode.py fast     # what `make check`'s workers import: pandas, Altair, every verifylab module
"""

from __future__ import annotations

import contextlib
import importlib
import pkgutil
import sys

FAST = ["pandas", "pyarrow.csv", "altair", "vl_convert", "jupytext", "aiohttp.web", "xdist.remote"]  # make check
GROUPS = {
    "torch": [
        "torch",
        "torch.distributed",
        "torch.profiler",
        "torch._inductor",
        "ray",
        "ray.cluster_utils",
        "ray.dashboard.agent",  # every node of the fleet tests' cluster starts one
        "ray.autoscaler._private.monitor",
        "playwright.sync_api",
    ],
    "fast": FAST,
    "book": [
        *FAST,
        "ipykernel.kernelapp",
        "debugpy",  # each kernel imports its debugger
        "jupyter_cache.cache.main",  # the render's notebook cache (SQLAlchemy)
        "sphinx.builders.html",
        "myst_nb.sphinx_ext",
        "sphinx_book_theme",
        "papermill",
        "nbclient",
        "jupyter_book.cli.main",
        "sphinx.application",
        "myst_nb",
        "pypdf",
    ],
}
SKIP = ("verifylab.guard.site",)  # the multicast guard's sitecustomize acts when imported


def verifylab_modules() -> list[str]:
    """Every module of the package but ``__main__`` ones, which run when imported (those that need the GPU stack
    fail to import here, and are left alone)."""
    import verifylab

    walk = pkgutil.walk_packages(verifylab.__path__, "verifylab.")
    return sorted(m.name for m in walk if not m.name.startswith(SKIP) and not m.name.endswith(".__main__"))


def main(group: str) -> int:
    if group not in GROUPS:
        print(f"warm_bytecode: unknown group {group!r}; the groups are {', '.join(GROUPS)}", file=sys.stderr)
        return 2
    names = GROUPS[group] + (verifylab_modules() if group in ("book", "fast") else [])
    for name in names:
        with contextlib.suppress(Exception):  # a module that cannot import here is not one the tests load
            importlib.import_module(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
