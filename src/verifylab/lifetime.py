"""Child processes that do not outlive verifylab: on Linux a child started with :func:`die_with_parent` is
killed by the kernel when the verifylab process that started it dies, however it dies (kill -9 included), so no
server keeps its port and no ``jupyter-book`` writes a build folder after the command that started it is gone."""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: the child gets SIGKILL when its parent dies (Linux; elsewhere
    nothing: the parent's own cleanup is all there is)."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
