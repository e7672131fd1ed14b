"""Where a test run's CPU goes: every process the suite starts, Chromium's included (#82: `make test` within 240 s).

    python benchmarks/suite_cpu.py [--interval 0.1] [--top 15] [--tests 0] [-- PYTEST_ARGS...]

Runs pytest (by default as `make pytest` does: ``-q -n 3 --dist loadgroup``) and prints its wall time, the CPU of
every process it started, by kind (the test workers themselves, the chapters' kernels, Sphinx, Chromium, the test
servers, the ranks, other commands) and by test file, with the load before and after.

Two counts of the same CPU, each a floor: what every process that ended as this script's child used, its orphans'
included (``tree_cpu``: the script is their sub-reaper; a plugin that reads ``getrusage`` in each worker leaves out
Chromium's renderers and every daemon's children), which misses a process never waited for through it (one still
running, or one adopted by a sub-reaper of its own, as Ray's raylet can be); and the sum of ``/proc``'s samples every
``--interval`` seconds, which misses a process shorter than that. The larger is printed as the run's CPU; the kinds
and the files come from the samples. A file's CPU is its tests' own CPU in their worker plus that of the processes
started under the worker while they ran. Linux only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from tree_cpu import become_subreaper, children_cpu, wait_reaping

ROOT = Path(__file__).resolve().parents[1]
OUT_ENV = "VERIFYLAB_SUITE_CPU_OUT"  # set by this script for the workers' plugin (below): where each writes its tests
MAKE_PYTEST = ["-q", "-n", "3", "--dist", "loadgroup"]
KINDS = (  # (kind, words one of which its command line holds), first match wins
    ("chapter kernel", ("ipykernel",)),
    ("chromium", ("chrom", "headless_shell")),
    ("playwright", ("playwright",)),
    ("sphinx (jupyter-book)", ("sphinx", "jupyter-book", "jupyter_book")),
    ("test server", ("verifylab.testing.server",)),
    ("fault double", ("verifylab.testing.faults",)),
    ("pip", ("-m pip", "bin/pip")),
    ("ray", ("ray", "raylet", "gcs_server")),
    ("rank (torch)", ("verifylab.comm.rank", "torch", "synth")),
    ("verifylab command", ("verifylab",)),
)


# --- the workers' plugin (loaded with -p suite_cpu): each test's window and its worker's own CPU -----------------
_TESTS: list[tuple[str, float, float, float]] = []


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    started, cpu = time.time(), _self_cpu()
    yield
    _TESTS.append((item.nodeid, started, time.time(), _self_cpu() - cpu))


def pytest_sessionfinish(session):
    out = os.environ.get(OUT_ENV)
    if out and _TESTS:  # a process that ran tests (xdist's controller runs none)
        Path(out, f"tests-{os.getpid()}.json").write_text(json.dumps(_TESTS), encoding="utf-8")


# --- the script -------------------------------------------------------------------------------------------------
@dataclass
class Seen:
    """One process as the sampler last saw it."""

    pid: int
    ppid: int
    started: float  # seconds since boot
    first_seen: float
    cpu: float
    command: str


def _sample(seen: dict[tuple[int, int], Seen], tick: float) -> None:
    """Every process now running, its CPU so far (its command line read the first time it is seen)."""
    now = time.time()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            key = (int(name), int(fields[19]))  # a pid and its start time: a reused pid is another process
            if key not in seen:
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
                seen[key] = Seen(int(name), int(fields[1]), int(fields[19]) / tick, now, 0.0, command)
            seen[key].cpu = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):  # it ended while being read
            continue


def _since_boot() -> float:
    with open("/proc/uptime", encoding="ascii") as uptime:
        return float(uptime.read().split()[0])


def _climb(pid: int, parent: dict[int, int], ends: set[int]) -> int:
    """The first of ``ends`` among ``pid`` and its ancestors in ``parent``, else the last ancestor it knows."""
    hops = 0
    while pid not in ends and pid in parent and hops < 64:
        pid, hops = parent[pid], hops + 1
    return pid


def descendants(seen: dict[tuple[int, int], Seen], root: int, since: float) -> list[Seen]:
    """The processes that started after ``since`` (seconds since boot) under ``root``: an orphan is re-parented to
    ``root`` (the sub-reaper), so every one's chain of parents reaches it."""
    parent = {s.pid: s.ppid for s in seen.values() if s.started >= since}
    return [s for s in seen.values() if s.started >= since and _climb(s.pid, parent, {root}) == root]


def kind_of(command: str) -> str:
    for kind, words in KINDS:
        if any(word in command for word in words):
            return kind
    return "other (python, shells, git)" if command else "unnamed (ended before it was read)"


def _by_test(
    ours: list[Seen], tests: dict[int, list], workers: set[int]
) -> tuple[collections.Counter, collections.Counter]:
    """Each test's CPU: its own in its worker, and that of each process first seen under a worker while it ran
    there (a session or module fixture's processes go to the test that first asked for it)."""
    own: collections.Counter = collections.Counter()
    started: collections.Counter = collections.Counter()
    for worker_tests in tests.values():
        for nodeid, _, _, cpu in worker_tests:
            own[nodeid] += cpu
    parent = {s.pid: s.ppid for s in ours}
    for s in ours:
        if s.pid in workers:
            continue
        running = [t for t in tests.get(_climb(s.ppid, parent, workers), []) if t[1] <= s.first_seen <= t[2]]
        started[running[0][0] if running else "(between tests, or not under a worker)"] += s.cpu
    return own, started


def _by_file(counter: collections.Counter) -> collections.Counter:
    """A per-test count summed over each test file."""
    files: collections.Counter = collections.Counter()
    for nodeid, cpu in counter.items():
        files[nodeid.split("::")[0]] += cpu
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between samples of /proc (default 0.1)")
    parser.add_argument("--top", type=int, default=15, help="test files listed (default 15)")
    parser.add_argument("--tests", type=int, default=0, help="also list the costliest tests (default 0: none)")
    parser.add_argument(
        "pytest_args", nargs="*", help=f"after --: pytest's arguments (default: {' '.join(MAKE_PYTEST)})"
    )
    args = parser.parse_args()
    if not Path("/proc/stat").is_file():
        sys.exit("suite_cpu: needs Linux's /proc")
    become_subreaper()
    tick = os.sysconf("SC_CLK_TCK")
    seen: dict[tuple[int, int], Seen] = {}
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            _sample(seen, tick)
            done.wait(args.interval)

    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as out:
        env = {
            **os.environ,
            OUT_ENV: out,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")])),
        }
        command = [sys.executable, "-m", "pytest", "-p", "suite_cpu", *(args.pytest_args or MAKE_PYTEST)]
        load_before, since = os.getloadavg()[0], _since_boot()
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        began = time.perf_counter()
        run = subprocess.Popen(command, cwd=ROOT, env=env)
        exit_code, adopted, ended = wait_reaping(run)
        wall = ended - began
        load_after = os.getloadavg()[0]
        done.set()
        thread.join()
        total = children_cpu()
        tests = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in Path(out).glob("tests-*.json")}
    ours = descendants(seen, os.getpid(), since - 1.0)
    workers = set(tests)  # without xdist: pytest's own process
    by_kind: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for s in ours:
        kind = "test worker (in its own process)" if s.pid in workers else kind_of(s.command)
        kind = "pytest (xdist's controller)" if s.pid == run.pid and s.pid not in workers else kind
        by_kind[kind] += s.cpu
        count[kind] += 1
    sampled = sum(by_kind.values())
    whole = max(total, sampled)
    print(f"\npytest exit {exit_code}; wall {wall:.1f} s; load {load_before:.2f} before, {load_after:.2f} after")
    print(
        f"CPU of the processes the run started: at least {whole:.1f} s ({whole / wall:.2f} cores busy on average): "
        f"{total:.1f} s waited for ({adopted} orphans among them), {sampled:.1f} s in the samples of /proc"
    )
    print(f"{'kind (from the samples)':<40} {'CPU-s':>8} {'share':>6} {'processes':>10}")
    for kind, cpu in by_kind.most_common():
        print(f"{kind:<40} {cpu:8.1f} {cpu / whole:6.1%} {count[kind]:10d}")
    if total > sampled:
        print(f"{'not in the samples (shorter-lived)':<40} {total - sampled:8.1f} {(total - sampled) / whole:6.1%}")
    own_test, started_test = _by_test(ours, tests, workers)
    own, started = _by_file(own_test), _by_file(started_test)
    outside = sum(s.cpu for s in ours if s.pid in workers) - sum(own.values())
    print(f"\nthe workers outside any test (start-up, collection): {outside:.1f} CPU-s")
    print(f"{'test file':<60} {'CPU-s':>8} {'its own':>8} {'started':>8}")
    for name, cpu in (own + started).most_common(args.top):
        print(f"{name:<60} {cpu:8.1f} {own[name]:8.1f} {started[name]:8.1f}")
    if args.tests:
        print(f"\n{'test':<100} {'CPU-s':>8} {'its own':>8} {'started':>8}")
        for name, cpu in (own_test + started_test).most_common(args.tests):
            print(f"{name[-100:]:<100} {cpu:8.1f} {own_test[name]:8.1f} {started_test[name]:8.1f}")
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
