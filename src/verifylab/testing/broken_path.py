"""A test double of a broken peer path, entirely outside the product: run as ``python -m
verifylab.testing.broken_path -m MODULE ARGS...``, it runs ``python -m MODULE ARGS...`` with
``torch.distributed.all_reduce`` answering as a peer path that never delivered the peers' data does: each rank's
tensor keeps its own contribution. A test points the probe's ``sys.executable`` at a launcher of this module
(:func:`write_launcher`), so the real ranks run their real checks on a collective that returns wrong sums."""

from __future__ import annotations

import runpy
import shlex
import sys
from pathlib import Path

from verifylab.iorw import atomic_write_text


def write_launcher(folder: Path, python: str = sys.executable) -> Path:
    """An executable that stands for ``python``, every ``-m MODULE`` it is given run with the broken collective."""
    launcher = folder / "python-with-a-broken-all-reduce"
    atomic_write_text(launcher, f'#!/bin/sh\nexec {shlex.quote(python)} -m verifylab.testing.broken_path "$@"\n')
    launcher.chmod(0o755)
    return launcher


def _own_contribution_only(tensor, *args, **kwargs) -> None:
    """``all_reduce`` whose peers never arrive: ``tensor`` is left as this rank's own part."""


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] != "-m":
        raise SystemExit("usage: python -m verifylab.testing.broken_path -m MODULE [ARGS...]")
    import torch.distributed

    torch.distributed.all_reduce = _own_contribution_only
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
