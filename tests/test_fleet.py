"""verifylab fleet: the campaign file, what a rerun skips, how runs travel back (unit tests, no Ray), and a real
local Ray cluster of a head and two nodes offering ``box-a`` and ``box-b`` (make test installs Ray, the fleet
extra)."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.analysis.hardware import run_hardware_table
from verifylab.cli import app
from verifylab.errors import FleetError
from verifylab.fleet.campaign import job_key, load_campaign
from verifylab.fleet.pack import pack_runs, unpack_runs
from verifylab.fleet.state import CampaignState
from verifylab.fleet.task import code_identity, run_job
from verifylab.store.runs import RunStore
from verifylab.testing.params import chapter02_on_test_double

from .procs import processes
from .projects import project_copy, write_params

ROOT = Path(__file__).resolve().parents[1]
RUN = "20261129-000000-live-test-double"


def live_params(path: Path, run_id: str, port: int, **settings) -> Path:
    """Chapter 02 live against the test double (it starts the double itself), written as a parameters file."""
    return write_params(path, chapter02_on_test_double(run_id, port, **settings))


def campaign_file(folder: Path, hosts: list[dict], jobs: list[dict]) -> Path:
    path = folder / "campaign.yaml"
    write_params(path, {"campaign": "fleet-test", "hosts": hosts, "jobs": jobs})
    return path


HOSTS = [
    {"name": "box-a", "resource": "box-a", "description": "test double box A"},
    {"name": "box-b", "resource": "box-b", "description": "test double box B"},
]


def test_a_job_on_an_unknown_host_or_chapter_is_named_in_one_line(tmp_path):
    params = live_params(tmp_path / "p.yaml", "20261201-000000-a", 30001)
    bad_host = campaign_file(tmp_path, HOSTS, [{"name": "j1", "params": "p.yaml", "host": "box-z"}])
    with pytest.raises(FleetError, match=r"job 'j1' names host 'box-z'; the hosts are box-a, box-b"):
        load_campaign(bad_host, ROOT)
    bad_chapter = campaign_file(tmp_path, HOSTS, [{"name": "j1", "params": "p.yaml", "host": "box-a", "only": ["09"]}])
    with pytest.raises(FleetError, match=r"job 'j1': .*09"):
        load_campaign(bad_chapter, ROOT)
    twice = campaign_file(tmp_path, [HOSTS[0], {**HOSTS[1], "resource": "box-a"}], [])
    with pytest.raises(FleetError, match=r"resources must differ: box-a given twice"):
        load_campaign(twice, ROOT)
    params.write_text("mode: sideways\n")
    ok_names = campaign_file(tmp_path, HOSTS, [{"name": "j1", "params": "p.yaml", "host": "box-a"}])
    with pytest.raises(FleetError, match=r"job 'j1': .*'mode' = 'sideways'"):
        load_campaign(ok_names, ROOT)


def test_a_job_is_done_for_its_parameters_box_and_code_only(tmp_path):
    live_params(tmp_path / "p.yaml", "20261201-000000-a", 30001)
    path = campaign_file(tmp_path, HOSTS, [{"name": "j1", "params": "p.yaml", "host": "box-a"}])
    campaign = load_campaign(path, ROOT)
    job, (a, b) = campaign.jobs[0], campaign.hosts
    key = job_key(job, a, "1+x")
    assert key == job_key(job, a, "1+x")
    assert len({key, job_key(job, b, "1+x"), job_key(job, a, "1+y")}) == 3
    live_params(tmp_path / "p.yaml", "20261201-000000-a", 30002)  # the parameters changed: not the same job
    assert job_key(job, a, "1+x") != key


def test_runs_come_back_whole_with_where_they_were_measured(repo_root, tmp_path):
    source = repo_root / "data" / "runs"
    run_id = sorted(p.name for p in source.iterdir() if (p / "manifest.json").is_file())[0]
    blob, digest = pack_runs(source, [run_id])
    store = RunStore(tmp_path / "runs")
    fleet = {"host": "box-a", "host_description": "2x H200", "node_id": "n1", "ray_job_id": "01", "campaign": "c"}
    assert unpack_runs(blob, digest, store, fleet) == [run_id]
    assert store.manifest(run_id).fleet == fleet
    (row,) = run_hardware_table(store).to_dict("records")  # the book's hardware table names the box
    assert row["hardware"].startswith("host box-a (2x H200): ")

    def files(folder: Path) -> set[Path]:  # the run's data (its lock file is the store's own, made on use)
        return {p.relative_to(folder) for p in folder.rglob("*") if not p.name.startswith(".")}

    assert files(store.root / run_id) == files(source / run_id)  # every file, no other
    with pytest.raises(FleetError, match="does not match its sha256"):
        unpack_runs(blob[:-1] + b"x", digest, RunStore(tmp_path / "other"), fleet)
    assert not (tmp_path / "other").exists() or not list((tmp_path / "other").iterdir())


@pytest.mark.parametrize("member", ["../escape.txt", "/etc/x", "link"])
def test_a_returned_run_that_reaches_outside_its_folder_is_refused_whole(tmp_path, member):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"20261201-000000-ok/{'x' if member == 'link' else member}")
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
        else:
            info.name = member
            tar.addfile(info, io.BytesIO(b""))
    blob = buffer.getvalue()
    store = RunStore(tmp_path / "runs")
    with pytest.raises(FleetError, match="nothing unpacked"):
        unpack_runs(blob, hashlib.sha256(blob).hexdigest(), store, {})
    assert not (tmp_path / "escape.txt").exists()
    assert [p.name for p in store.root.iterdir()] == []


def test_the_state_file_records_jobs_and_names_itself_when_unreadable(tmp_path):
    state = CampaignState(tmp_path, "c1")
    assert state.done() == set()
    state.mark("k1", "running", job="j1")
    state.mark("k1", "done", runs=["r1"])
    state.mark("k2", "failed", error="boom")
    assert state.done() == {"k1"}
    assert state.read()["k1"]["runs"] == ["r1"] and state.read()["k1"]["started"]
    state.path.write_text("[1, 2")
    with pytest.raises(FleetError, match=r"c1\.json: unreadable campaign state"):
        state.done()


def test_a_box_with_another_verifylab_runs_nothing(tmp_path):
    result = run_job(
        {
            "name": "j1",
            "params_text": "mode: replay\n",
            "only": [],
            "label": "",
            "code": "0.0.0+other",
            "project": str(tmp_path),
        }
    )
    assert result == {
        "ok": False,
        "error": f"this box runs verifylab {code_identity()}, the driver 0.0.0+other: install the driver's commit "
        "here (nothing was run)",
    }


def test_an_address_nothing_answers_on_is_one_line_and_exit_1(tmp_path):
    live_params(tmp_path / "p.yaml", "20261201-000000-a", 30001)
    path = campaign_file(tmp_path, HOSTS, [{"name": "j1", "params": "p.yaml", "host": "box-a"}])
    pytest.importorskip("ray")
    from .test_bench import free_port

    address = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["fleet", "run", str(path), "--address", address, "--root", str(ROOT)])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot reach the Ray cluster at {address}" in errors[0], result.output


def test_plan_prints_each_job_with_its_box(tmp_path):
    live_params(tmp_path / "p.yaml", "20261201-000000-a", 30001)
    path = campaign_file(
        tmp_path,
        HOSTS,
        [
            {"name": "j1", "params": "p.yaml", "host": "box-a", "only": ["02"]},
            {"name": "j2", "params": "p.yaml", "host": "box-b"},
        ],
    )
    result = CliRunner().invoke(app, ["fleet", "plan", str(path), "--root", str(ROOT)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "box-" in line]
    assert any("j1" in line and "box-a" in line and "02" in line and "to run" in line for line in lines)
    assert any("j2" in line and "box-b" in line and "all" in line for line in lines)


# --- a real Ray cluster on this machine: a head and two nodes (separate processes), box-a and box-b ------------


@pytest.fixture(scope="module")
def cluster():
    """A head (no CPUs: it runs nothing) and two nodes offering box-a and box-b, each its own raylet process."""
    pytest.importorskip("ray")
    import shutil
    import tempfile

    from ray.cluster_utils import Cluster

    # sessions, sockets and logs of this cluster; short: a socket's path must fit in 107 bytes
    temp = tempfile.mkdtemp(prefix="vl-ray-", dir="/tmp")
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_TMPDIR", temp)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = {box: cluster.add_node(num_cpus=1, resources={box: 1}) for box in ("box-a", "box-b")}
    cluster.wait_for_nodes()
    yield cluster.address, {box: node.node_id for box, node in nodes.items()}
    cluster.shutdown()
    mp.undo()
    shutil.rmtree(temp, ignore_errors=True)


def boxes(repo_root: Path, folder: Path) -> list[dict]:
    """The two boxes, each with a checkout of its own (as two machines would have), no run stored there yet."""
    hosts = []
    for host in HOSTS:
        project = project_copy(repo_root, (folder / host["name"]).resolve(), runs=False)
        hosts.append({**host, "project": str(project)})
    return hosts


@pytest.mark.slow
@pytest.mark.fleet
def test_a_campaign_runs_each_job_on_its_box_and_survives_its_driver_killed(cluster, repo_root, tmp_path):
    """The driver (``verifylab fleet run``) is killed with -9 once box-a's job is done; the next run skips that
    job, runs the others on their boxes, reports the failing one in one line and keeps one run per job."""
    import signal
    import subprocess
    import time

    from .test_bench import free_port

    address, node_ids = cluster
    live_params(tmp_path / "quick.yaml", "20261201-000000-fleet-quick", free_port())
    # slow enough to be still running when the quick job is done on a loaded 2-core machine (at 25 ms a token it
    # once finished first, and the killed driver left nothing running to resume)
    live_params(tmp_path / "slow.yaml", "20261201-000000-fleet-slow", free_port(), step_ms=60, max_tokens=48, runs=3)
    broken = chapter02_on_test_double("20261201-000000-fleet-broken", free_port())
    broken["chapters"]["02_benchmarks"]["launcher"] = [sys.executable, "-c", "raise SystemExit('no GPU on this box')"]
    write_params(tmp_path / "broken.yaml", broken)
    (tmp_path / "boxes").mkdir()
    jobs = [
        {"name": "quick", "params": "quick.yaml", "host": "box-a", "only": ["02"]},
        {"name": "slow", "params": "slow.yaml", "host": "box-b", "only": ["02"], "label": "box B (test double)"},
        {"name": "broken", "params": "broken.yaml", "host": "box-a", "only": ["02"]},  # its server cannot start
    ]
    path = campaign_file(tmp_path, boxes(repo_root, tmp_path / "boxes"), jobs)
    driver = project_copy(repo_root, tmp_path / "driver")
    cmd = [sys.executable, "-m", "verifylab.cli", "fleet", "run", str(path), "--address", address]
    proc = subprocess.Popen([*cmd, "--root", str(driver)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = CampaignState(driver / "data", "fleet-test")
    deadline = time.monotonic() + 120
    while not any(r.get("job") == "quick" and r.get("status") == "done" for r in state.read().values()):
        assert proc.poll() is None and time.monotonic() < deadline, "the quick job never finished"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    recorded = {r["job"]: r["status"] for r in state.read().values()}
    assert recorded["quick"] == "done" and recorded["slow"] == "running"  # as the killed driver left it

    again = CliRunner().invoke(app, [*cmd[3:], "--root", str(driver)])
    assert again.exit_code == 1, again.output  # one job failed
    lines = again.output.splitlines()
    assert "quick on box-a: done earlier, skipped" in lines
    assert "slow on box-b: submitted (it starts when its box is free)" in lines
    assert any(line.startswith("slow on box-b: done in") for line in lines), again.output
    (failure,) = [line for line in lines if line.startswith("broken on box-a: failed after")]
    assert "no GPU on this box" in failure
    assert any(line.startswith("campaign fleet-test: 1 done, 1 skipped, 1 failed") for line in lines)

    store = RunStore(driver / "data" / "runs")
    assert [r for r in store.run_ids() if "fleet" in r and "broken" not in r] == [
        "20261201-000000-fleet-quick",
        "20261201-000000-fleet-slow",
    ]  # one run per job: the killed attempt left none
    for job, box, run_id in [
        ("quick", "box-a", "20261201-000000-fleet-quick"),
        ("slow", "box-b", "20261201-000000-fleet-slow"),
    ]:
        fleet = store.manifest(run_id).fleet
        assert (fleet["host"], fleet["node_id"], fleet["campaign"], fleet["job"]) == (
            box,
            node_ids[box],
            "fleet-test",
            job,
        )
        assert store.read_table(run_id, "single_stream") is not None
    assert store.manifest("20261201-000000-fleet-slow").label == "box B (test double)"
    assert not list((driver / "data" / "runs").glob(".fleet-*"))  # nothing half-unpacked
    status = CliRunner().invoke(app, ["fleet", "status", str(path), "--root", str(driver)])
    assert status.exit_code == 0 and "failed" in status.output and "done" in status.output


@pytest.mark.slow
@pytest.mark.fleet
def test_boxes_with_another_verifylab_are_refused_in_one_line(cluster, repo_root, tmp_path):
    from verifylab.fleet.ray_runner import run_campaign

    address, _ = cluster
    live_params(tmp_path / "a.yaml", "20261201-000000-fleet-v", 30999)
    (tmp_path / "boxes").mkdir()
    path = campaign_file(
        tmp_path, boxes(repo_root, tmp_path / "boxes"), [{"name": "j1", "params": "a.yaml", "host": "box-a"}]
    )
    (outcome,) = run_campaign(load_campaign(path, repo_root), tmp_path / "data", address, code="0.0.0+driver")
    assert outcome.status == "failed" and outcome.error.startswith("this box runs verifylab ")
    assert "the driver 0.0.0+driver" in outcome.error and not (tmp_path / "data" / "runs").exists()


@pytest.mark.slow
@pytest.mark.fleet
def test_a_worker_killed_mid_job_is_run_again_and_leaves_one_run(cluster, repo_root, tmp_path):
    import os
    import signal
    import threading
    import time

    from verifylab.fleet.ray_runner import run_campaign

    from .test_bench import free_port

    address, node_ids = cluster
    run_id = "20261201-000000-fleet-kill"
    live_params(tmp_path / "k.yaml", run_id, free_port())
    (tmp_path / "boxes").mkdir()
    path = campaign_file(
        tmp_path,
        boxes(repo_root, tmp_path / "boxes"),
        [{"name": "killed", "params": "k.yaml", "host": "box-a", "only": ["02"]}],
    )
    driver = project_copy(repo_root, tmp_path / "driver")
    result: list = []
    thread = threading.Thread(
        target=lambda: result.extend(run_campaign(load_campaign(path, repo_root), driver / "data", address))
    )
    thread.start()
    killed, deadline = None, time.monotonic() + 120
    while killed is None and time.monotonic() < deadline:  # the job's `verifylab run`: kill the Ray worker above it
        for ppid, cmdline in processes().values():
            if "verifylab.cli run --params" in cmdline and "fleet-killed-" in cmdline:
                os.kill(ppid, signal.SIGKILL)
                killed = ppid
                break
        time.sleep(0.05)
    assert killed is not None, "the job never started"
    thread.join(timeout=180)
    (outcome,) = result
    assert outcome.status == "done", outcome.error  # Ray ran the task again
    assert outcome.run_ids == [run_id]
    store = RunStore(driver / "data" / "runs")
    assert [r for r in store.run_ids() if "fleet" in r] == [run_id]  # one run, not one per attempt
    assert store.manifest(run_id).fleet["node_id"] == node_ids["box-a"]


def test_the_example_campaign_is_valid(repo_root):
    campaign = load_campaign(repo_root / "examples" / "fleet" / "campaign.yaml", repo_root)
    assert {h.resource for h in campaign.hosts} == {j.host for j in campaign.jobs}
    assert all(job.params.is_file() for job in campaign.jobs)


def test_fleet_help_teaches_with_the_example_campaign(repo_root):
    """`verifylab fleet --help` shows a campaign file: the example's content, so the two never drift apart."""
    import yaml

    from verifylab.cli.fleet import FLEET_HELP

    shown = FLEET_HELP.split("(examples/fleet/campaign.yaml):\n\n", 1)[1].split("\n\n", 1)[0]
    example = (repo_root / "examples" / "fleet" / "campaign.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(shown) == yaml.safe_load(example)
    result = CliRunner().invoke(app, ["fleet", "--help"])
    assert result.exit_code == 0 and "campaign: pcie-vs-nvlink" in result.output
    assert "pip install -e '.[fleet]'" in result.output  # the extra's name survives the help's markup
