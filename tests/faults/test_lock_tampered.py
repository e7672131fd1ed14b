"""#53 class 8: a tampered lock is refused before anything is installed from it — a pin changed by hand (its digest
is not the one `make lock` recorded), an index or a URL injected — and the Makefile checks each lock before each
install from it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "install" / "check_lock.py"


def check(*locks: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *map(str, locks)], capture_output=True, text=True)


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    for name in ("book.lock", "test.lock", "SHA256SUMS"):
        shutil.copy(ROOT / "requirements" / name, tmp_path / name)
    return tmp_path


def test_the_shipped_locks_pass(locks):
    result = check(locks / "book.lock", locks / "test.lock")
    assert result.returncode == 0, result.stderr


def test_a_pin_changed_by_hand_is_refused_by_its_digest(locks):
    lock = locks / "test.lock"
    lock.write_text(re.sub(r"^pandas==\S+", "pandas==1.0.0", lock.read_text(), flags=re.M))
    result = check(lock)
    assert result.returncode == 2 and "edited by hand" in result.stderr and "nothing was installed" in result.stderr


@pytest.mark.parametrize(
    "line",
    [
        "--extra-index-url https://evil.example/simple",
        "-i https://evil.example/simple",
        "--find-links /tmp/wheels",
        "pandas @ https://evil.example/pandas.whl",
        "pandas>=1",
    ],
)
def test_an_injected_index_or_url_is_refused_even_with_a_matching_digest(locks, line):
    lock = locks / "book.lock"
    lock.write_text(lock.read_text() + line + "\n")
    assert subprocess.run([sys.executable, str(CHECK), "--write", str(lock)], capture_output=True).returncode == 2
    result = check(lock)
    assert result.returncode == 2 and f"book.lock:{len(lock.read_text().splitlines())}" in result.stderr


def test_a_missing_digest_file_names_make_lock(locks):
    (locks / "SHA256SUMS").unlink()
    result = check(locks / "book.lock")
    assert result.returncode == 2 and "make lock" in result.stderr


def test_the_makefile_checks_each_lock_before_installing_from_it():
    lines = (ROOT / "Makefile").read_text().splitlines()
    installs = [n for n, line in enumerate(lines) if re.search(r"UV_INSTALL\) -r \$\((\w+)_LOCK\)", line)]
    assert len(installs) == 2
    for n in installs:
        lock = re.search(r"-r (\$\(\w+_LOCK\))", lines[n]).group(1)
        assert lines[n - 1].strip() == f"$(CHECK_LOCK) {lock}", lines[n - 1]
