"""What :func:`verifylab.derived.derived` functions computed from one data folder, kept on disk between the
interactive commands (``box``, ``box --plan``, ``model *``) so that a second call does not refit the speculation
grid nor read the stored tables again. The entry is keyed by everything the values are made of: the data folder's
digest (every file), the package's code digest, the Python and pandas versions and the installed packages (their
folder's last change); a call's own inputs are the functions' keys inside it. Never used by the book's chapters:
their data reads must be seen to be recorded.

``VERIFYLAB_CACHE``: the folder (default ``$XDG_CACHE_HOME/verifylab``, else ``~/.cache/verifylab``), or ``off``.
Every read and write goes through :mod:`verifylab.store.cache_folder` (the folder checked, entries authenticated
before they are unpickled: a planted file is never loaded). An entry that does not read back is computed again and
replaced; values that do not pickle are computed again each call. A folder that is refused is said once, on
standard error, and the command runs without it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from verifylab.derived import DerivedCache
from verifylab.errors import CacheFolderRefused
from verifylab.store.cache_folder import CacheFolder, open_cache_folder
from verifylab.store.digests import code_digest, data_digest, installed_stamp

CACHE_ENV = "VERIFYLAB_CACHE"
FORMAT = 2  # bumped when the entry's layout changes (2: authenticated entries)


def cache_folder() -> Path | None:
    """Where the caches are kept, or None where they are off (not yet checked: :func:`open_cache`)."""
    chosen = os.environ.get(CACHE_ENV, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verifylab"


@functools.cache
def _said(message: str) -> None:
    print(f"verifylab: {message}", file=sys.stderr)


def open_cache(sub: str) -> CacheFolder | None:
    """The checked cache sub-folder ``sub``, or None: the cache is off, or its folder is refused (said once on
    standard error) or cannot be made."""
    folder = cache_folder()
    if folder is None:
        return None
    try:
        return open_cache_folder(folder, sub)
    except CacheFolderRefused as refused:
        _said(str(refused))
    except OSError as exc:  # cannot be made or opened (read-only, no room): the command runs without it
        _said(f"cache folder {folder} not used: {exc.strerror or exc}")
    return None


def cache_key(data_dir: Path) -> str:
    """The entry name of ``data_dir``'s derived values under this code and these versions."""
    import pandas as pd

    key = "\0".join((str(FORMAT), data_digest(data_dir), code_digest(), sys.version, pd.__version__, installed_stamp()))
    return f"{hashlib.sha256(key.encode()).hexdigest()}.pickle"


class DiskDerivedCache(DerivedCache):
    """A :class:`DerivedCache` that starts from the values its entry holds and writes back what it computed."""

    def __init__(self, folder: CacheFolder, name: str) -> None:
        super().__init__()
        self.folder, self.name = folder, name
        self._added = False
        payload = folder.read(name)  # None unless this cache wrote it (authenticated): nothing else is unpickled
        if payload is not None:
            with contextlib.suppress(Exception):  # written by another version of the code: computed again
                loaded = pickle.loads(payload)
                if isinstance(loaded, dict):
                    self._values.update(loaded)

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
        with contextlib.suppress(OSError):  # a read-only or full cache folder: computed next call
            self.folder.write(self.name, pickle.dumps(keep, protocol=pickle.HIGHEST_PROTOCOL))
        self._added = False
