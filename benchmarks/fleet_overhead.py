"""What `verifylab fleet` costs per job, and that N jobs on N boxes take about the time of one.

    python benchmarks/fleet_overhead.py [--boxes 2] [--step-ms 20] [--tokens 64]

Starts a local Ray cluster (a head and N nodes, each offering box-<i>), and runs the same live chapter-02 job
(the test double as the server, so a job mostly waits on "the GPU", as a real one does) three ways, in one run:
called directly (no Ray; the second of two calls), as a one-job campaign, and as an N-job campaign with one job
per box. Prints each wall time, the overhead per job (campaign of one minus direct) and the ratio N jobs / one
job. Needs the fleet extra.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.projects import project_copy, write_params  # noqa: E402  (the test project helpers)
from tests.test_bench import free_port  # noqa: E402
from verifylab.fleet.campaign import load_campaign  # noqa: E402
from verifylab.fleet.ray_runner import run_campaign  # noqa: E402
from verifylab.fleet.task import code_identity, run_job  # noqa: E402
from verifylab.testing.params import chapter02_on_test_double  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boxes", type=int, default=2)
    parser.add_argument("--step-ms", type=float, default=20.0, help="the test double's decode step")
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory(prefix="verifylab-fleet-bench-") as tmp:
        folder = Path(tmp)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        for i in range(args.boxes):
            cluster.add_node(num_cpus=1, resources={f"box-{i}": 1})
        cluster.wait_for_nodes()
        hosts, jobs = [], []
        for i in range(args.boxes):
            project = project_copy(ROOT, folder / f"box-{i}")
            hosts.append(
                {"name": f"box-{i}", "resource": f"box-{i}", "description": "test double", "project": str(project)}
            )
            run_id = f"20261201-000000-bench-{i}"
            settings = chapter02_on_test_double(
                run_id, free_port(), step_ms=args.step_ms, max_tokens=args.tokens, runs=3
            )
            params = write_params(folder / f"p{i}.yaml", settings)
            jobs.append({"name": f"job-{i}", "params": params.name, "host": f"box-{i}", "only": ["02"]})

        def campaign(name: str, chosen: list[dict]) -> Path:
            path = folder / f"{name}.yaml"
            write_params(path, {"campaign": name, "hosts": hosts, "jobs": chosen})
            return path

        spec = {
            "name": "direct",
            "params_text": (folder / "p0.yaml").read_text(),
            "only": ["02"],
            "label": "",
            "code": code_identity(),
            "project": str(project_copy(ROOT, folder / "direct")),
        }
        for _ in range(2):  # the second call: caches as warm as the campaigns' (the first pays the cold start)
            began = time.perf_counter()
            assert run_job(spec)["ok"]
            direct = time.perf_counter() - began
        timings = {}
        for name, chosen in [("one", jobs[:1]), ("all", jobs)]:
            loaded = load_campaign(campaign(name, chosen), ROOT)
            began = time.perf_counter()
            outcomes = run_campaign(loaded, folder / f"driver-{name}" / "data", cluster.address)
            timings[name] = time.perf_counter() - began
            assert all(o.status == "done" for o in outcomes), [o.error for o in outcomes]
        cluster.shutdown()
    print(f"one job, called directly:          {direct:6.1f} s")
    print(
        f"one job as a fleet campaign:       {timings['one']:6.1f} s  (overhead {timings['one'] - direct:+.1f} s a job)"
    )
    print(f"{args.boxes} jobs on {args.boxes} boxes as a campaign:  {timings['all']:6.1f} s")
    print(f"{args.boxes} jobs / one job: {timings['all'] / timings['one']:.2f}x (1.00 = perfectly parallel)")


if __name__ == "__main__":
    main()
