"""Where a job's ranks meet: a file of torch's ``FileStore`` in the job's own folder, fresh for each start. A TCP port
chosen by binding port 0 and closing it could be taken by any process (another job's rank, a server, a kernel)
before rank 0 bound it again; a file in the job's folder is the job's alone."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

RENDEZVOUS_TIMEOUT = "Wait timeout"  # what torch's FileStore raises when the other ranks never came


def fresh_rendezvous(folder: Path, name: str) -> Path:
    """The rendezvous file for one start of a job's ranks in ``folder``: a file an earlier start left (a killed
    job's) is removed first, since a store's file that holds old keys would let ranks of two starts meet."""
    path = Path(folder).resolve() / name
    path.unlink(missing_ok=True)
    return path


def rendezvous_store(path: str | Path, world: int, timeout: timedelta) -> Any:
    """The store a rank hands ``torch.distributed.init_process_group`` (``store=``): a wait on it ends after
    ``timeout``. On NCCL a rank 0 whose peer never came was seen waiting far longer, outside the store (1 x H100,
    torch 2.11: benchmarks/device/rendezvous_check.sh): the parent's deadline (the probe's, synth-verify's) ends it."""
    import torch.distributed as dist

    store = dist.FileStore(str(path), world)
    store.set_timeout(timeout)
    return store
