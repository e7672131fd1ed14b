"""The kernel a chapter runs in talks to papermill over Unix sockets in a folder of its own, not TCP ports.

jupyter_client picks free ports on 127.0.0.1, closes them and lets the kernel bind them: a server started in
between (a benchmark's SGLang, another chapter's kernel) can take one, and the kernel dies before its first cell
("Kernel died before replying to kernel_info"; seen in a test run with three chapters' kernels and servers
starting at once). A socket file in a private folder cannot be taken, and no port of a shared box is opened."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from verifylab.publish import interrupt

SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sockaddr_un.sun_path, less its terminating zero)


def _short_base() -> str:
    """The temporary folder, unless a socket's path under it would not fit (a long TMPDIR): then /tmp."""
    base = tempfile.gettempdir()
    longest = os.path.join(base, "vl-kernel-xxxxxxxx", "k-99")
    return base if len(os.fsencode(longest)) <= SOCKET_PATH_MAX else "/tmp"


class IpcKernelManager(AsyncKernelManager):
    """papermill's kernel manager with ``transport="ipc"``: the channels are socket files in a private folder
    (a short path: a socket's must fit in 107 bytes), removed with the kernel."""

    def __init__(self, **kwargs: Any) -> None:
        self._sockets = tempfile.mkdtemp(prefix="vl-kernel-", dir=_short_base())
        super().__init__(transport="ipc", ip=os.path.join(self._sockets, "k"), **kwargs)
        interrupt.CURRENT.add_kernel(self)  # a second Ctrl-C reaches this kernel's running cell

    async def _ipc_cleanup_resources(self, restart: bool = False) -> None:
        await AsyncKernelManager.cleanup_resources(self, restart=restart)
        if not restart:
            interrupt.CURRENT.drop_kernel(self)
            shutil.rmtree(self._sockets, ignore_errors=True)

    cleanup_resources = _ipc_cleanup_resources
