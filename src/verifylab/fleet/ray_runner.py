"""The driver of ``verifylab fleet run``: each job not yet done becomes a Ray task that needs its box's custom
resource (one unit: a box never runs two jobs at once), retried by Ray if its node or worker dies; what each
returns is unpacked into the driver's run store and recorded in the campaign state. The only module that imports
Ray."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifylab.errors import FleetError
from verifylab.fleet.campaign import Campaign, FleetJob, job_key
from verifylab.fleet.pack import unpack_runs
from verifylab.fleet.state import CampaignState, Status
from verifylab.fleet.task import code_identity, run_job
from verifylab.store.runs import RunStore

TASK_RETRIES = 2  # a node or worker lost mid-job: Ray runs the task again, on the same box


@dataclass
class JobOutcome:
    """How one job ended, as the driver prints and records it."""

    job: str
    host: str
    status: str  # done, failed, skipped
    seconds: float = 0.0
    run_ids: list[str] = field(default_factory=list)
    error: str = ""


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse in one line a ``host:port`` nothing answers on (Ray itself retries for minutes, printing warnings)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": Ray's own names
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise FleetError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}): start its head with "
            f"`ray start --head --port {port}` there, or give the right --address"
        ) from None


def _job_on_box(spec: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: the job, plus the node and Ray job that ran it."""
    import ray

    result = run_job(spec)
    context = ray.get_runtime_context()
    result["node_id"], result["ray_job_id"] = context.get_node_id(), context.get_job_id()
    return result


def run_campaign(
    campaign: Campaign,
    data_dir: Path,
    address: str | None,
    on_event: Callable[[JobOutcome | tuple[str, str]], None] = lambda e: None,
    code: str | None = None,
) -> list[JobOutcome]:
    """Run every job of ``campaign`` not done yet on its box through the Ray cluster at ``address`` (None: the
    ``RAY_ADDRESS`` environment, else a local one); ``code``: the identity boxes must have (default this one)."""
    try:
        import ray
    except ImportError:
        raise FleetError("Ray is not installed: pip install -e '.[fleet]' (from this checkout)") from None
    code = code or code_identity()
    state = CampaignState(data_dir, campaign.campaign)
    store = RunStore(Path(data_dir) / "runs")
    done = state.done()
    outcomes: list[JobOutcome] = []
    todo: list[tuple[FleetJob, str]] = []
    for job in campaign.jobs:
        key = job_key(job, campaign.host(job.host), code)
        if key in done:
            outcomes.append(JobOutcome(job.name, job.host, "skipped"))
            on_event(outcomes[-1])
        else:
            todo.append((job, key))
    if not todo:
        return outcomes
    if address:
        check_reachable(address)
    ray.init(address=address, namespace="verifylab-fleet", log_to_driver=False, logging_level="ERROR")
    try:
        missing = sorted({campaign.host(j.host).resource for j, _ in todo} - set(ray.cluster_resources()))
        if missing:
            raise FleetError(
                f"no node of the cluster offers {', '.join(missing)}: start those boxes with "
                f"ray start --address … --resources '{{\"<name>\": 1}}'"
            )
        remote = ray.remote(_job_on_box)
        pending: dict[Any, tuple[FleetJob, str, float]] = {}
        for job, key in todo:
            host = campaign.host(job.host)
            spec = {
                "name": job.name,
                "params_text": job.params.read_text(encoding="utf-8"),
                "only": job.only,
                "label": job.label,
                "code": code,
                "project": host.project,
            }
            ref = remote.options(resources={host.resource: 1}, num_cpus=0, max_retries=TASK_RETRIES).remote(spec)
            pending[ref] = (job, key, time.monotonic())
            state.mark(key, "running", job=job.name, host=job.host)
            on_event(("start", f"{job.name} on {job.host}"))
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job, key, began = pending.pop(ready[0])
            outcome = _collect_or_fail(ray, ready[0], job, key, campaign, store, state, time.monotonic() - began)
            outcomes.append(outcome)
            on_event(outcome)
    finally:
        ray.shutdown()
    return outcomes


def _collect_or_fail(
    ray, ref, job: FleetJob, key: str, campaign: Campaign, store: RunStore, state: CampaignState, seconds: float
) -> JobOutcome:
    """:func:`_collect`, and whatever goes wrong in it (a malformed result from a box, a full disk) makes this job
    'failed' with its one line: the state never says 'running' for a job the driver is done with, and the other
    jobs' results are still collected."""
    try:
        return _collect(ray, ref, job, key, campaign, store, state, seconds)
    except Exception as exc:
        error = f"its result could not be collected: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        state.mark(key, "failed", error=error)
        return JobOutcome(job.name, job.host, "failed", seconds, error=error)


def _collect(
    ray, ref, job: FleetJob, key: str, campaign: Campaign, store: RunStore, state: CampaignState, seconds: float
) -> JobOutcome:
    """One finished task: its runs into the store (whole or not at all), its state recorded."""
    host = campaign.host(job.host)
    try:
        result = ray.get(ref)
    except Exception as exc:  # the task died more often than Ray retries it
        error = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
        state.mark(key, "failed", error=error)
        return JobOutcome(job.name, job.host, "failed", seconds, error=error)
    run_ids: list[str] = []
    if result.get("blob"):
        fleet = {
            "host": host.name,
            "host_description": host.description,
            "node_id": result["node_id"],
            "ray_job_id": result["ray_job_id"],
            "campaign": campaign.campaign,
            "job": job.name,
        }
        try:
            run_ids = unpack_runs(result["blob"], result.get("digest"), store, fleet)
        except FleetError as exc:
            state.mark(key, "failed", error=str(exc))
            return JobOutcome(job.name, job.host, "failed", seconds, error=str(exc))
    status: Status = "done" if result["ok"] else "failed"
    state.mark(
        key,
        status,
        runs=run_ids,
        error=result.get("error", ""),
        node_id=result.get("node_id", ""),
        seconds=round(seconds, 1),
    )
    return JobOutcome(job.name, job.host, status, seconds, run_ids, result.get("error", ""))
