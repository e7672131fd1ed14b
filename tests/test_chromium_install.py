"""Issue 71: a fresh machine's ``make book`` prints the PDFs where apt works: ``install/chromium.sh`` installs
Debian's chromium when none is on PATH (and says in one line how, where apt cannot). Tested with Chromium hidden
from PATH and stand-in apt-get, id and sudo that record their calls; never by removing the machine's own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "install" / "chromium.sh"
BASH = "/bin/bash"


def _path(tmp_path: Path, *, apt: str | None, uid: int = 0, sudo: bool = False) -> tuple[dict[str, str], Path]:
    """A PATH of stand-ins only (no chromium): apt-get that succeeds (and puts a chromium on this PATH) or fails."""
    calls = tmp_path / "calls"
    calls.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def tool(name: str, body: str) -> None:
        (bin_dir / name).write_text(f'#!{BASH}\necho "{name} $*" >> {calls}\n{body}\n')
        (bin_dir / name).chmod(0o755)

    if apt == "works":
        tool(
            "apt-get",
            f'case "$*" in *install*) printf "#!{BASH}\\n" > {bin_dir}/chromium; chmod +x {bin_dir}/chromium ;; esac',
        )
    elif apt == "fails":
        tool("apt-get", 'echo "E: Could not open lock file" >&2; exit 100')
    tool("id", f"echo {uid}")
    if sudo:
        tool("sudo", 'shift; "$@"')  # sudo -n CMD...: runs CMD
    return {"PATH": str(bin_dir), "HOME": str(tmp_path)}, calls


def _run(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, str(SCRIPT), *args], capture_output=True, text=True, env=environ)


def test_where_apt_works_chromium_is_installed(tmp_path):
    environ, calls = _path(tmp_path, apt="works")
    result = _run(environ)
    assert result.returncode == 0, result.stderr
    assert "apt-get update -qq" in calls.read_text() and "apt-get install -y -qq chromium" in calls.read_text()
    assert (tmp_path / "bin" / "chromium").exists()


def test_a_user_with_sudo_installs_through_it(tmp_path):
    environ, calls = _path(tmp_path, apt="works", uid=1000, sudo=True)
    assert _run(environ).returncode == 0
    assert "sudo -n apt-get install -y -qq chromium" in calls.read_text()


@pytest.mark.parametrize(
    ("apt", "uid", "words"),
    [(None, 0, "no apt-get here"), ("fails", 0, "could not install"), ("works", 1000, "needs root")],
    ids=["no apt", "apt fails", "not root, no sudo"],
)
def test_where_apt_cannot_one_line_says_how_and_the_book_goes_on(tmp_path, apt, uid, words):
    environ, _ = _path(tmp_path, apt=apt, uid=uid)
    book = _run(environ)
    assert book.returncode == 0 and words in book.stderr and "apt-get install chromium" in book.stderr
    assert len([line for line in book.stderr.splitlines() if line.startswith("chromium.sh:")]) == 1
    assert _run(environ, "--required").returncode == 1  # the browser tests need it: make test stops


def test_a_chromium_already_on_path_is_left_alone(tmp_path):
    environ, calls = _path(tmp_path, apt="works")
    (tmp_path / "bin" / "chromium").write_text(f"#!{BASH}\n")
    (tmp_path / "bin" / "chromium").chmod(0o755)
    assert _run(environ).returncode == 0 and calls.read_text() == ""


def test_make_book_asks_for_chromium_before_it_builds():
    dry = subprocess.run(["make", "-n", "book"], cwd=ROOT, capture_output=True, text=True)
    lines = dry.stdout.splitlines()
    assert "bash install/chromium.sh" in lines and lines.index("bash install/chromium.sh") < next(
        i for i, line in enumerate(lines) if "verifylab book" in line
    )
