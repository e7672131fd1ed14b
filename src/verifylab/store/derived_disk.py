"""What :func:`verifylab.derived.derived` functions computed from one data folder, kept on disk between the
interactive commands (``box``, ``box --plan``, ``model *``) so that a second call does not refit the speculation
grid nor read the stored tables again. The file is keyed by everything the values are made of: the data folder's
digest (every file), the package's code digest, the Python and pandas versions and the installed packages (their
folder's last change); a call's own inputs are the
functions' keys inside it. Never used by the book's chapters: their data reads must be seen to be recorded.

``VERIFYLAB_CACHE``: the folder (default ``$XDG_CACHE_HOME/verifylab``, else ``~/.cache/verifylab``), or ``off``.
A file that does not read back (truncated, another format) is ignored and replaced; values that do not pickle are
computed again each call."""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from verifylab.derived import DerivedCache
from verifylab.errors import VerifylabError
from verifylab.iorw import atomic_write_bytes
from verifylab.store.digests import code_digest, data_digest, installed_stamp

CACHE_ENV = "VERIFYLAB_CACHE"
FORMAT = 1  # bumped when the file's layout changes


def cache_folder() -> Path | None:
    """Where the derived values are kept, or None where the cache is off."""
    chosen = os.environ.get(CACHE_ENV, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verifylab"


def cache_file(folder: Path, data_dir: Path) -> Path:
    """The file of ``data_dir``'s derived values under this code and these versions."""
    import pandas as pd

    key = "\0".join((str(FORMAT), data_digest(data_dir), code_digest(), sys.version, pd.__version__, installed_stamp()))
    return folder / "derived" / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle"


class DiskDerivedCache(DerivedCache):
    """A :class:`DerivedCache` that starts from the values a file holds and writes back what it computed."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._added = False
        try:
            with open(path, "rb") as fh:
                loaded = pickle.load(fh)  # our own file, under the user's cache folder
            if isinstance(loaded, dict):
                self._values.update(loaded)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
            pass  # none yet, or one that does not read back: computed again and replaced

    def value(self, key: tuple[Hashable, ...], compute: Callable[[], Any]) -> Any:
        if key not in self._values:
            self._added = True
        return super().value(key, compute)

    def save(self) -> None:
        """Write the values back (whole, then renamed into place) when this call computed new ones."""
        if not self._added:
            return
        keep = {}
        for key, value in self._values.items():
            try:
                pickle.dumps(value)
            except Exception:  # a value that does not pickle (a closure): computed again next call
                continue
            keep[key] = value
        with contextlib.suppress(OSError, VerifylabError):  # a read-only or full cache folder: computed next call
            atomic_write_bytes(self.path, pickle.dumps(keep, protocol=pickle.HIGHEST_PROTOCOL))
        self._added = False
