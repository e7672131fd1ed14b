"""Make every interpreter of this venv keep its bytecode in one folder (``sys.pycache_prefix``), as ``make`` does
for the processes it starts: a ``.pth`` file in the venv's site-packages sets it at start-up unless the environment
set one (``PYTHONPYCACHEPREFIX``, ``-X pycache_prefix``). A call outside ``make`` (a shell, an editor, a kernel) then
reuses what ``make`` compiled instead of compiling its imports again where bytecode cannot be written beside the
sources.

    python install/pycache_prefix.py PREFIX    (run with the venv's python: ``make install`` does)
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
from pathlib import Path

PTH = "_verifylab_pycache_prefix.pth"


def write_pth(prefix: Path) -> Path:
    """The ``.pth`` for ``prefix`` in this interpreter's site-packages, written whole (temp file + rename)."""
    site = Path(sysconfig.get_paths()["purelib"])
    line = f"import sys; sys.pycache_prefix = sys.pycache_prefix or {str(prefix.resolve())!r}\n"
    fd, tmp = tempfile.mkstemp(dir=site, prefix=f".{PTH}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(line)
    target = site / PTH
    os.replace(tmp, target)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.prefix == sys.base_prefix:
        sys.exit("install/pycache_prefix.py: run it with the venv's python, not the system's")
    print(write_pth(Path(sys.argv[1])))
