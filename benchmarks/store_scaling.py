"""How chapter 02's replay grows with the run store: the chapter executed (papermill, as `verifylab book` runs it)
on the shipped store, then on the same store grown to 200 and 2,000 runs.

    python benchmarks/store_scaling.py [--sizes 200 2000] [--grow-by fleet|all] [--keep DIR]

``--grow-by fleet`` (the default) grows the store the way a fleet grows it: communication probes and campaigns of
other boxes (copies of the shipped probe and comm runs under new ids, made a day earlier than the originals), which
chapter 02 does not show. The chapter's work should then stay what it is at the shipped size; what grows is only
what every reader pays to find its runs (listing the store, reading each manifest). ``--grow-by all`` copies every
kind of shipped run, sweeps included, as older campaigns of the same hardware and model: chapter 02 shows only the
newest campaign per hardware and model (older ones have their run pages and the runs index), so its time should stay
within 2x of the shipped store's (#54). Prints each size's wall seconds and its ratio to the shipped store's time
measured in the same run, and how many table files the store holds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = "02_benchmarks"
# shipped runs the store grows by: what a fleet adds (chapter 02 shows none of them), or every kind
GROWN_BY = {"fleet": ("-probe-", "-comm"), "all": ("",)}


def grown_store(target: Path, runs: int, grow_by: str = "fleet") -> int:
    """``data/`` copied to ``target`` with its run store grown to ``runs`` runs; returns the table files it holds."""
    shutil.copytree(ROOT / "data", target)
    store = target / "runs"
    shipped = sorted(p for p in store.iterdir() if (p / "manifest.json").is_file())
    seeds = [p for p in shipped if any(tag in p.name for tag in GROWN_BY[grow_by])]
    for n in range(max(0, runs - len(shipped))):
        seed = seeds[n % len(seeds)]
        copy = store / f"{seed.name[:15]}-fleet{n:05d}-{seed.name[16:]}"
        copy.mkdir()
        for file in seed.iterdir():
            if file.name != "manifest.json" and file.is_file():
                (copy / file.name).hardlink_to(file)
        manifest = json.loads((seed / "manifest.json").read_text())
        created = datetime.fromisoformat(manifest["created"]) - timedelta(days=1, seconds=n)
        manifest |= {"run_id": copy.name, "created": created.isoformat()}
        (copy / "manifest.json").write_text(json.dumps(manifest))
    return sum(1 for p in store.rglob("*") if p.suffix in (".parquet", ".csv"))


def replay_seconds(data_dir: Path) -> float:
    """Wall seconds of chapter 02 executed in replay on ``data_dir`` (a fresh kernel, as the book runs it)."""
    from verifylab.publish.build import execute_chapter

    with tempfile.TemporaryDirectory(prefix="verifylab-bench-nb-") as out:
        start = time.perf_counter()
        result = execute_chapter(
            ROOT / "notebooks" / f"{CHAPTER}.py",
            Path(out) / f"{CHAPTER}.ipynb",
            {"mode": "replay", "data_dir": str(data_dir)},
            ROOT,
        )
        seconds = time.perf_counter() - start
    if not result.ok:
        sys.exit(f"chapter {CHAPTER} failed on {data_dir}: {result.error}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000], help="store sizes beyond the shipped one")
    parser.add_argument("--grow-by", choices=sorted(GROWN_BY), default="fleet", help="which shipped runs are copied")
    parser.add_argument("--keep", type=Path, help="build the grown stores here and keep them")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="verifylab-store-scaling-"))
    shipped = sum(1 for p in (ROOT / "data" / "runs").iterdir() if (p / "manifest.json").is_file())
    rows = []
    try:
        for runs in [shipped, *args.sizes]:
            data = base / f"data-{args.grow_by}-{runs}"
            tables = grown_store(data, runs, args.grow_by) if not data.exists() else -1
            replay_seconds(data)  # once to warm the file cache and bytecode; the second is timed
            rows.append((runs, tables, replay_seconds(data)))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    reference = rows[0][2]
    print(
        f"chapter {CHAPTER} replay, one fresh kernel each, store grown by {args.grow_by} (reference: the shipped store)"
    )
    print(f"{'runs':>6} {'tables':>7} {'seconds':>8} {'x shipped':>10}")
    for runs, tables, seconds in rows:
        print(f"{runs:>6} {tables:>7} {seconds:>8.2f} {seconds / reference:>10.2f}")


if __name__ == "__main__":
    main()
