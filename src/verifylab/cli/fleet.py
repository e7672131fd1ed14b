"""``verifylab fleet plan|run|status``: one campaign over several GPU boxes, scheduled by Ray (the ``fleet``
extra). The boxes run their jobs; the runs come back to this checkout's data folder; render the edition here."""

from __future__ import annotations

import os
import time
from pathlib import Path

import typer
from rich.markup import escape

from verifylab.cli._shared import console, err_console, fail, print_frame, progress_bar
from verifylab.errors import VerifylabError

FLEET_HELP = """A campaign over several GPU boxes, scheduled by Ray: each box is a Ray node offering a custom resource
named in the campaign file; each job is `verifylab run --params … --only … --no-render` on its box, and its runs
come back into data/runs here, each naming its host (the book's hardware table shows it).

A campaign file (examples/fleet/campaign.yaml):

campaign: pcie-vs-nvlink     # recorded in every run's manifest
hosts:
  - name: rtxpro-8
    resource: rtxpro-8       # the Ray resource only this box offers
    description: "8x RTX PRO 6000 Blackwell, PCIe"
  - name: h200-2
    resource: h200-2
    description: "2x H200, NVLink"
jobs:
  - name: rtxpro-benchmarks
    params: ../params-case-study.yaml   # relative to this file
    host: rtxpro-8
    only: ["01", "02", "03"]
  - name: h200-benchmarks
    params: ../params-case-study.yaml
    host: h200-2
    only: ["02", "03"]
    label: "2x H200, NVLink, TP 2"

Start Ray: `ray start --head` on one machine, then on each box
`ray start --address HEAD:6379 --resources '{"rtxpro-8": 1}'`
(each box its own resource). Then:

`verifylab fleet plan campaign.yaml` (what runs where)
`verifylab fleet run campaign.yaml --address HEAD:6379`
`verifylab book` (one edition from the runs that came back)

Needs the fleet extra, from this checkout: `pip install -e '.\\[fleet]'`
(README, 'Campaigns over several boxes')."""

fleet_app = typer.Typer(help=FLEET_HELP, no_args_is_help=True)

CAMPAIGN_HELP = "The campaign file (YAML: campaign, hosts, jobs; see examples/fleet/campaign.yaml)."


def _load(campaign_file: Path, root: Path):
    from verifylab.fleet.campaign import load_campaign

    return load_campaign(campaign_file, root)


@fleet_app.command("plan")
def fleet_plan(
    campaign_file: Path = typer.Argument(..., help=CAMPAIGN_HELP),
    root: Path = typer.Option(Path("."), help="Project root (its chapters and data folder)."),
) -> None:
    """Print what will run where, and which jobs a rerun skips (done, same parameters, box and code)."""
    from verifylab.fleet.campaign import job_key
    from verifylab.fleet.state import CampaignState
    from verifylab.fleet.task import code_identity

    try:
        campaign = _load(campaign_file, root)
        code = code_identity()
        done = CampaignState(root / "data", campaign.campaign).done()
    except VerifylabError as exc:
        raise fail(exc) from None
    rows = []
    for job in campaign.jobs:
        host = campaign.host(job.host)
        key = job_key(job, host, code)
        rows.append(
            {
                "job": job.name,
                "host": host.name,
                "resource": host.resource,
                "chapters": ",".join(job.only) or "all",
                "params": job.params.name,
                "state": "done (skipped)" if key in done else "to run",
            }
        )
    import pandas as pd  # here, not above: every command starts without it

    print_frame(pd.DataFrame(rows), title=f"campaign {campaign.campaign} (verifylab {code})")


@fleet_app.command("run")
def fleet_run(
    campaign_file: Path = typer.Argument(..., help=CAMPAIGN_HELP),
    address: str = typer.Option(None, help="The Ray cluster (default: $RAY_ADDRESS, else a local one)."),
    root: Path = typer.Option(Path("."), help="Project root: the runs come back into its data/runs."),
) -> None:
    """Run every job not done yet on its box; a rerun skips finished jobs. Exit 1 if a job failed.

    Example: `verifylab fleet run examples/fleet/campaign.yaml --address head.lab:6379`, then `verifylab book`
    renders the edition from the runs that came back (each names its host in the hardware table)."""
    from verifylab.fleet.ray_runner import JobOutcome, run_campaign

    try:
        campaign = _load(campaign_file, root)
    except VerifylabError as exc:
        raise fail(exc) from None
    began = time.monotonic()
    with progress_bar() as bar:
        task = bar.add_task(f"campaign {campaign.campaign}", total=len(campaign.jobs))

        def on_event(event) -> None:
            if isinstance(event, JobOutcome):
                bar.advance(task)
                where = f"{event.job} on {event.host}"
                if event.status == "skipped":
                    err_console.print(f"{escape(where)}: done earlier, skipped", highlight=False, markup=True)
                elif event.status == "done":
                    runs = ", ".join(event.run_ids) or "no run written"
                    err_console.print(
                        f"{escape(where)}: done in {event.seconds:.0f} s ({escape(runs)})",
                        highlight=False,
                        soft_wrap=True,
                        markup=True,
                    )
                else:
                    err_console.print(  # one line, whole, however long the box's error
                        f"[red]{escape(where)}: failed after {event.seconds:.0f} s:[/] {escape(event.error)}",
                        highlight=False,
                        soft_wrap=True,
                        markup=True,
                    )
            else:
                err_console.print(
                    f"{escape(event[1])}: submitted (it starts when its box is free)", highlight=False, markup=True
                )

        try:
            outcomes = run_campaign(campaign, root / "data", address or os.environ.get("RAY_ADDRESS"), on_event)
        except VerifylabError as exc:
            raise fail(exc) from None
    failed = [o for o in outcomes if o.status == "failed"]
    console.print(
        f"campaign {campaign.campaign}: {sum(o.status == 'done' for o in outcomes)} done, "
        f"{sum(o.status == 'skipped' for o in outcomes)} skipped, {len(failed)} failed "
        f"in {time.monotonic() - began:.0f} s; render the edition with `verifylab book`",
        highlight=False,
    )
    if failed:
        raise typer.Exit(1)


@fleet_app.command("status")
def fleet_status(
    campaign_file: Path = typer.Argument(..., help=CAMPAIGN_HELP),
    root: Path = typer.Option(Path("."), help="Project root."),
) -> None:
    """Each job's state as the last `fleet run` recorded it: done / running / failed (with its one line)."""
    from verifylab.fleet.state import CampaignState

    try:
        campaign = _load(campaign_file, root)
        records = CampaignState(root / "data", campaign.campaign).read()
    except VerifylabError as exc:
        raise fail(exc) from None
    latest: dict[str, dict] = {}  # a job whose parameters changed has a record per key: the newest counts
    for record in records.values():
        name = str(record.get("job", ""))
        if record.get("updated", "") >= latest.get(name, {}).get("updated", ""):
            latest[name] = record
    rows = [
        {
            "job": job.name,
            "host": job.host,
            "state": latest.get(job.name, {}).get("status", "not run"),
            "runs": ", ".join(latest.get(job.name, {}).get("runs", [])),
            "error": latest.get(job.name, {}).get("error", ""),
        }
        for job in campaign.jobs
    ]
    import pandas as pd

    print_frame(pd.DataFrame(rows), title=f"campaign {campaign.campaign}")
