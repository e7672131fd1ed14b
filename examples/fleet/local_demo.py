"""A fleet campaign over two Ray nodes on this machine, rendered into one edition (the mechanics, end to end).

    python examples/fleet/local_demo.py [WORK_DIR]      # needs the fleet extra: pip install 'verifylab[fleet]'

Starts a local Ray cluster (a head and two nodes offering box-a and box-b, as two GPU boxes would), copies the
project three times into WORK_DIR (the driver and one checkout per box), and runs `verifylab fleet run` with a
campaign of one chapter-02 job per box. The job benchmarks verifylab's test double, a stand-in server whose
numbers are mechanics, never evidence: the demo works on its scratch copies only and never on this checkout's
data/. Then `verifylab book` renders the driver's edition, and the script prints the rows of its hardware table
(chapter 01) that name the two hosts.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from verifylab.testing.params import chapter02_on_test_double

ROOT = Path(__file__).resolve().parents[2]


def copy_project(target: Path) -> Path:
    for name in ("notebooks", "data", "_config.yml", "book"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, target / name, ignore=shutil.ignore_patterns("_generated"))
        else:
            shutil.copy(src, target / name)
    return target


def job_params(path: Path, run_id: str, port: int) -> Path:
    settings = chapter02_on_test_double(
        run_id, port, label="test double on a demo box (not data)", campaign="fleet-demo", mechanics_only=True
    )
    path.write_text(yaml.safe_dump(settings))
    return path


def main() -> None:
    from ray.cluster_utils import Cluster

    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="verifylab-fleet-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="vl-ray-", dir="/tmp")  # socket paths must stay short
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        hosts, jobs = [], []
        for i, box in enumerate(("box-a", "box-b")):
            checkout = copy_project(work / box)
            hosts.append(
                {
                    "name": box,
                    "resource": box,
                    "description": f"demo box {box[-1].upper()}, this machine",
                    "project": str(checkout),
                }
            )
            cluster.add_node(num_cpus=1, resources={box: 1})
            job_params(work / f"{box}.yaml", f"20261201-000000-fleet-demo-{box}", 31300 + i)
            jobs.append({"name": f"bench-{box}", "params": f"{box}.yaml", "host": box, "only": ["02"]})
        cluster.wait_for_nodes()
        campaign = work / "campaign.yaml"
        campaign.write_text(yaml.safe_dump({"campaign": "fleet-demo", "hosts": hosts, "jobs": jobs}))
        driver = copy_project(work / "driver")
        cli = [sys.executable, "-m", "verifylab.cli"]
        subprocess.run(
            [*cli, "fleet", "run", str(campaign), "--address", cluster.address, "--root", str(driver)], check=True
        )
    finally:
        cluster.shutdown()
    subprocess.run([*cli, "book", "--root", str(driver)], check=True)
    page = (driver / "_build" / "html" / "book" / "_generated" / "01_environment_and_gates.html").read_text()
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())  # the page's words, tags dropped
    rows = sorted(set(re.findall(r"host box-[ab] \([^)]*\)", text)))
    print(f"edition in {driver / '_build' / 'html'}; its hardware table names: {', '.join(rows) or 'nothing'}")
    if len(rows) != 2:
        raise SystemExit("expected both hosts in the hardware table")


if __name__ == "__main__":
    main()
