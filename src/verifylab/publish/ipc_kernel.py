"""The kernel a chapter runs in talks to papermill over Unix sockets in a folder of its own, not TCP ports, and
writes its own log (stdout and stderr of the kernel process) to a file in that folder, not to the terminal.

jupyter_client picks free ports on 127.0.0.1, closes them and lets the kernel bind them: a server started in
between (a benchmark's SGLang, another chapter's kernel) can take one, and the kernel dies before its first cell
("Kernel died before replying to kernel_info"; seen in a test run with three chapters' kernels and servers
starting at once). A socket file in a private folder cannot be taken, and no port of a shared box is opened.

A cell's output reaches the notebook through the kernel's messages, never through the process's stderr; what the
process itself prints is ipykernel's housekeeping, such as the traceback of its known shutdown race (a control reply
sent on the output socket it has just closed: ipykernel PR 1518), which read as a failure after a Ctrl-C the user
asked for. It is kept in the log, and the log's last lines are what a chapter whose kernel died reports."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any, BinaryIO

from jupyter_client.manager import AsyncKernelManager

from verifylab.publish import interrupt

SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sockaddr_un.sun_path, less its terminating zero)
LOG_TAIL_BYTES = 4000  # how much of a dead kernel's log its chapter reports

_last_words: dict[int, str] = {}  # chapter thread -> the end of its last kernel's log
_last_words_lock = threading.Lock()


def _short_base() -> str:
    """The temporary folder, unless a socket's path under it would not fit (a long TMPDIR): then /tmp."""
    base = tempfile.gettempdir()
    longest = os.path.join(base, "vl-kernel-xxxxxxxx", "k-99")
    return base if len(os.fsencode(longest)) <= SOCKET_PATH_MAX else "/tmp"


def last_kernel_log() -> str:
    """The end of the log of the kernel this thread's chapter ran last (empty if it wrote none); read once."""
    with _last_words_lock:
        return _last_words.pop(threading.get_ident(), "")


class IpcKernelManager(AsyncKernelManager):
    """papermill's kernel manager with ``transport="ipc"``: the channels are socket files in a private folder
    (a short path: a socket's must fit in 107 bytes), removed with the kernel, as is the kernel's log."""

    def __init__(self, **kwargs: Any) -> None:
        self._sockets = tempfile.mkdtemp(prefix="vl-kernel-", dir=_short_base())
        self._log: BinaryIO | None = None
        self._thread = threading.get_ident()  # the chapter's thread: papermill starts the kernel there
        with _last_words_lock:  # the log of this thread's kernel before (a chapter that ended well) is not this one's
            _last_words.pop(self._thread, None)
        super().__init__(transport="ipc", ip=os.path.join(self._sockets, "k"), **kwargs)
        interrupt.CURRENT.add_kernel(self)  # a second Ctrl-C reaches this kernel's running cell

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        """Start the kernel with its stdout and stderr going to ``kernel.log`` in its private folder."""
        if self._log is None:
            self._log = open(os.path.join(self._sockets, "kernel.log"), "ab")  # noqa: SIM115 - closed at cleanup
        await super()._async_launch_kernel(kernel_cmd, **{"stdout": self._log, "stderr": self._log, **kw})

    async def _ipc_cleanup_resources(self, restart: bool = False) -> None:
        await AsyncKernelManager.cleanup_resources(self, restart=restart)
        if not restart:
            interrupt.CURRENT.drop_kernel(self)
            self._keep_log_tail()
            shutil.rmtree(self._sockets, ignore_errors=True)

    cleanup_resources = _ipc_cleanup_resources

    def _keep_log_tail(self) -> None:
        """Close the log and keep its end for :func:`last_kernel_log` (the folder is removed next)."""
        if self._log is None:
            return
        self._log.close()
        self._log = None
        try:
            with open(os.path.join(self._sockets, "kernel.log"), "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - LOG_TAIL_BYTES))
                tail = log.read().decode(errors="replace").strip()
        except OSError as exc:  # the folder went first (a cleaner of the temporary folder): say so, never fail
            tail = f"(the kernel's log could not be read: {exc.strerror or exc})"
        with _last_words_lock:
            _last_words[self._thread] = tail
