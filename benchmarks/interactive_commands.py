"""The interactive commands' CPU against importing pandas, same machine, same run (#71: within 1.5x on a warm cache).

    python benchmarks/interactive_commands.py [--repeats 5]

For each command (`model whatif`, `model speculation`, `box --plan`, `box --probe RUN`, as the README runs them):
CPU seconds (user + system, the process and its children) with the caches off, on the first call into an empty
cache folder (cold: each of the ``--repeats`` calls into a folder of its own) and on the calls after it (warm: the
kept answer, or for a call that is not pure the derived values); the median of ``--repeats`` calls each, beside the
median of as many `python -c "import pandas"`; and the floor under a cold call: the CPU of importing every module
the call imports (as ``python -X importtime`` lists them), answering nothing. The package's bytecode is compiled
first (a clone's first call compiles it, once). The load average is printed.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tree_cpu import children_cpu

ROOT = Path(__file__).resolve().parents[1]
VERIFYLAB = str(Path(sys.executable).with_name("verifylab"))
COMMANDS = {
    "model whatif": ["model", "whatif"],
    "model speculation": ["model", "speculation", "--config", "examples/configs/kimi-k2.5-int4", "--gpu",
                          "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p", "--context", "16384"],
    "box --plan": ["box", "--plan", "--config", "examples/configs/qwen3-30b-a3b", "--gpu", "h200", "--tp", "1",
                   "--load", "32", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--accept", "2.4",
                   "--decode-tok-s", "90"],
    "box --probe RUN": ["box", "--probe", "20261202-203301-box-probe", "--config", "examples/configs/qwen3-30b-a3b",
                        "--out", "{tmp}/page"],
}  # fmt: skip


def call(argv: list[str], cache: str) -> subprocess.CompletedProcess[str]:
    """One call with ``cache`` as its cache folder (``off``: none), bytecode written; a failing call ends the run."""
    env = {**os.environ, "VERIFYLAB_CACHE": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return proc


def cpu(argv: list[str], cache: str) -> float:
    """CPU seconds of one call (children included)."""
    before = children_cpu()
    call(argv, cache)
    return children_cpu() - before


def imported_modules(argv: list[str], cache: str) -> list[str]:
    """The modules a call imports at the top level of its import tree (``-X importtime``), in the order it does."""
    names = []  # the console script run as a call runs it
    for line in call([sys.executable, "-X", "importtime", VERIFYLAB, *argv], cache).stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        measured = line.startswith("import time:") and len(fields) == 3 and fields[0].strip().isdigit()  # no header
        if measured and not fields[2].startswith("  "):  # one space: the call imported it, not another module
            names.append(fields[2].strip())
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "src"), quiet=1)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    pandas = statistics.median(cpu([sys.executable, "-c", "import pandas"], "off") for _ in range(args.repeats))
    print(f"import pandas: {pandas:.2f} CPU-s (median of {args.repeats})")
    with tempfile.TemporaryDirectory(prefix="interactive-") as tmp:
        for name, words in COMMANDS.items():
            given = [w.format(tmp=tmp) for w in words]
            argv = [VERIFYLAB, *given]
            cache = str(Path(tmp) / name.replace(" ", "_"))
            modules = imported_modules(given, f"{cache}-imports")
            only = [sys.executable, "-c", f"import importlib\nfor m in {modules!r}: importlib.import_module(m)"]
            floor = statistics.median(cpu(only, "off") for _ in range(args.repeats))
            off = statistics.median(cpu(argv, "off") for _ in range(args.repeats))
            cold = statistics.median(cpu(argv, f"{cache}-cold-{i}") for i in range(args.repeats))  # fresh folders
            cpu(argv, cache)  # the call that fills the folder the warm calls read
            warm = statistics.median(cpu(argv, cache) for _ in range(args.repeats))
            print(
                f"{name:18s} imports only {floor:5.2f} ({floor / pandas:4.2f}x)  caches off {off:5.2f} "
                f"({off / pandas:4.2f}x)  cold {cold:5.2f} ({cold / pandas:4.2f}x)  warm {warm:5.2f} "
                f"({warm / pandas:4.2f}x pandas)"
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
