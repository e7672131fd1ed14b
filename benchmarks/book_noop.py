"""A build with nothing changed against a clean one, same checkout, same run (#71: at most a quarter).

    python benchmarks/book_noop.py [--repeats 2]

Copies the committed project (git ls-files) into a temporary folder, then times `verifylab book` there: first
clean (every chapter executed, the HTML, charts, exports and PDFs rendered), then again with nothing changed (every
chapter kept, nothing rendered). Prints wall and CPU seconds (every process the build started, Chromium's renderers
included: ``tree_cpu``) of each and the ratio no-op / clean;
`--repeats` repeats the no-op build. The host's load is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tree_cpu import become_subreaper, run_counted

ROOT = Path(__file__).resolve().parents[1]
VERIFYLAB = Path(sys.executable).with_name("verifylab")


def timed(root: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds (every process it started) of one `verifylab book` in ``root``, and its last lines."""
    exit_code, wall, cpu, output = run_counted(
        [str(VERIFYLAB), "book", "--root", str(root)], capture=True, timeout_s=1800
    )
    if exit_code != 0:
        sys.exit(f"verifylab book failed (exit {exit_code}):\n{output[-4000:]}")
    said = [line for line in output.splitlines() if line.startswith(("executed:", "rendered:"))]
    return wall, cpu, " | ".join(said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2, help="no-op builds after the clean one (default 2)")
    args = parser.parse_args()
    become_subreaper()
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="book-noop-") as tmp:
        root = Path(tmp) / "project"
        for name in files.splitlines():
            source = ROOT / name
            if source.is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, root / name)
        subprocess.run(["git", "init", "-q", str(root)], check=True)  # the edition is named after a commit
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(
            ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@b", "commit", "-qm", "bench"],
            check=True,
        )
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        clean_wall, clean_cpu, said = timed(root)
        print(f"clean build:   {clean_wall:6.2f} s wall, {clean_cpu:6.2f} s CPU   ({said[:150]})")
        for n in range(args.repeats):
            wall, cpu, said = timed(root)
            print(
                f"no-op build {n + 1}: {wall:6.2f} s wall, {cpu:6.2f} s CPU; no-op / clean = {wall / clean_wall:.3f} "
                f"wall, {cpu / clean_cpu:.3f} CPU   ({said[:120]})"
            )
        print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
