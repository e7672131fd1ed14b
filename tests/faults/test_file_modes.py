"""Atomic writes keep a file's permission bits and a symlink's link (#17 item 3)."""

from __future__ import annotations

import os
import stat

from verifylab.iorw import atomic_write_bytes, atomic_write_text


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_rewritten_file_keeps_its_mode(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("old")
    os.chmod(target, 0o644)
    atomic_write_text(target, "new")
    assert target.read_text() == "new" and mode(target) == 0o644  # mkstemp alone would leave 0600


def test_a_new_file_gets_the_umask_mode(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "new.bin", b"x")
    finally:
        os.umask(umask)
    assert mode(tmp_path / "new.bin") == 0o644


def test_a_symlinked_target_stays_a_link(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
