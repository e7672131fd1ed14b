"""#77, outside files: a device run's archive is unpacked by verifylab itself (``intake.unpack_archive``): regular
files and folders only, nothing outside the target, within a count and a size. Hypothesis builds archives with hostile
members (links to a private key, hard links, devices, FIFOs, absolute and ``..`` names, too many or too large members)
among harmless ones: each is refused naming the archive and nothing is left; a harmless one unpacks whole. Through
``benchmarks/engine_reads/store_runs.py``, a lease whose log is a link to a private key stores nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifylab.intake import OutsideFileError, unpack_archive

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ["symlink", "hardlink", "chrdev", "fifo", "absolute", "dotdot", "too-large"]


def _add(tar: tarfile.TarFile, name: str, kind: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    if kind == "file":
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        return
    if kind == "symlink":
        info.type, info.linkname = tarfile.SYMTYPE, "/root/.ssh/id_ed25519"
    elif kind == "hardlink":
        info.type, info.linkname = tarfile.LNKTYPE, "/etc/shadow"
    elif kind == "chrdev":
        info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 5  # /dev/zero
    elif kind == "fifo":
        info.type = tarfile.FIFOTYPE
    elif kind == "absolute":
        info.name, info.size = "/tmp/planted-by-archive", 1
        tar.addfile(info, io.BytesIO(b"x"))
        return
    elif kind == "dotdot":
        info.name, info.size = "../planted-by-archive", 1
        tar.addfile(info, io.BytesIO(b"x"))
        return
    elif kind == "too-large":
        info.size = 64
        tar.addfile(info, io.BytesIO(b"y" * 64))
        return
    tar.addfile(info)


@settings(max_examples=80, deadline=None)
@given(
    harmless=st.lists(st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8})?\.(log|json)", fullmatch=True), max_size=5, unique=True),
    hostile=st.one_of(st.none(), st.sampled_from(HOSTILE)),
    position=st.integers(min_value=0, max_value=5),
)
def test_an_archive_unpacks_whole_or_not_at_all(harmless, hostile, position):
    with tempfile.TemporaryDirectory(prefix="archive-") as tmp:
        archive, into = Path(tmp) / "reads.tar.gz", Path(tmp) / "out" / "lease"
        names = [n for n in harmless if not any(n != m and m.startswith(n.split("/")[0] + ".") for m in harmless)]
        with tarfile.open(archive, "w:gz") as tar:
            for i, name in enumerate(names):
                if hostile is not None and i == min(position, len(names)):
                    _add(tar, f"evil{i}", hostile)
                _add(tar, name, "file", name.encode())
            if hostile is not None and position >= len(names):
                _add(tar, "evil-last", hostile)
        try:
            unpack_archive(archive, into, total=32)
        except OutsideFileError as exc:
            assert hostile is not None or sum(len(n) for n in names) > 32, f"a harmless archive refused: {exc}"
            assert str(archive) in str(exc)
            assert not into.exists(), "a refused archive left files behind"
            assert not (Path(tmp) / "out" / "planted-by-archive").exists()
            return
        assert hostile is None, f"a {hostile} member was unpacked"
        for name in names:
            assert (into / name).read_bytes() == name.encode()
        assert all(not p.is_symlink() for p in into.rglob("*"))


def test_too_many_members_are_refused(tmp_path):
    archive = tmp_path / "many.tar"
    with tarfile.open(archive, "w") as tar:
        for i in range(5):
            _add(tar, f"f{i}.log", "file")
    with pytest.raises(OutsideFileError, match="more than 3 members"):
        unpack_archive(archive, tmp_path / "out", members=3)
    assert not (tmp_path / "out").exists()


def test_a_lease_whose_log_links_to_a_private_key_stores_nothing(tmp_path):
    """The engine store script reads a lease through the boundary: a log that is a link is refused, no run stored."""
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n")
    lease = tmp_path / "lease"
    (lease / "logs").mkdir(parents=True)
    box = {"started": "2026-12-06T00:00:00+00:00", "nvidia_smi": "NVIDIA H100 80GB HBM3, 9.0, 580.1, 81559 MiB",
           "torch": "2.11.0", "cuda": "13.0", "sglang": "0.5.17", "flashinfer": "0.6.15.post1", "triton": "3.6.0",
           "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 1}  # fmt: skip
    (lease / "box.json").write_text(json.dumps(box))
    cell = {"cell": ["mla-triton-plain", 2048, 1], "server": "mla-triton-plain", "shape": "mla", "backend": "triton",
            "mode": "plain", "context": 2048, "streams": 1, "kv_pool_tokens": 1000, "server_start_s": 1.0,
            "window_s": 0.1, "tokens_in_window": 10.0, "verify_tokens": 1, "accept_length": None}  # fmt: skip
    (lease / "context.jsonl").write_text(json.dumps(cell) + "\n")
    (lease / "logs" / "mla-triton-plain.log").symlink_to(key)
    runs = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "engine_reads" / "store_runs.py"), "--lease", str(lease),
         "--commit", "abc1234", "--note", "planted", "--data", str(runs)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "VERIFYLAB_CACHE": "off"},
    )  # fmt: skip
    assert done.returncode != 0
    assert "a link" in done.stderr and "PRIVATE KEY" not in done.stdout + done.stderr
    assert not runs.exists() or not any(runs.iterdir()), "a run was stored from a lease with a linked log"
