"""The campaign file of ``verifylab fleet``: the GPU boxes (each a Ray custom resource that one box provides) and
the jobs (a parameters file, the chapters to run, the box), validated before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verifylab.errors import FleetError, ParameterError, describe_error
from verifylab.iorw import sha256_bytes, sha256_of
from verifylab.publish.build import chapter_sources
from verifylab.publish.pipeline import load_params, select_chapters
from verifylab.strict_yaml import read_strict_yaml_file

NAME = r"[a-z0-9][a-z0-9._-]{1,63}"


class FleetHost(BaseModel):
    """One GPU box: the Ray custom resource its node offers (``ray start --resources '{"box-a": 1}'``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=f"^{NAME}$")
    resource: str = Field(pattern=f"^{NAME}$", description="the Ray custom resource only this box offers")
    description: str = Field(min_length=3, description="what the box is, e.g. '8x RTX PRO 6000, PCIe, no P2P'")
    project: str | None = Field(
        None, description="the verifylab checkout on the box (default: $VERIFYLAB_FLEET_PROJECT there, else its cwd)"
    )


class FleetJob(BaseModel):
    """One ``verifylab run --params P --only C --no-render`` on one box."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=f"^{NAME}$")
    params: Path = Field(description="the parameters file (relative to the campaign file)")
    host: str = Field(description="the name of the host that runs it")
    only: list[str] = Field(default_factory=list, description="chapters to run (all when empty)")
    label: str = ""


class Campaign(BaseModel):
    """``campaign.yaml``: an id, the boxes, the jobs."""

    model_config = ConfigDict(extra="forbid")

    campaign: str = Field(pattern=f"^{NAME}$", description="recorded in every run's manifest")
    hosts: list[FleetHost] = Field(min_length=1)
    jobs: list[FleetJob] = Field(min_length=1)

    @field_validator("hosts")
    @classmethod
    def _distinct_hosts(cls, hosts: list[FleetHost]) -> list[FleetHost]:
        for attr in ("name", "resource"):
            seen = [getattr(h, attr) for h in hosts]
            twice = sorted({v for v in seen if seen.count(v) > 1})
            if twice:
                raise ValueError(f"host {attr}s must differ: {', '.join(twice)} given twice")
        return hosts

    @model_validator(mode="after")
    def _jobs_name_known_hosts(self) -> Campaign:
        names = [j.name for j in self.jobs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"job names must differ: {', '.join(twice)} given twice")
        known = {h.name for h in self.hosts}
        for job in self.jobs:
            if job.host not in known:
                raise ValueError(f"job {job.name!r} names host {job.host!r}; the hosts are {', '.join(sorted(known))}")
        return self

    def host(self, name: str) -> FleetHost:
        return next(h for h in self.hosts if h.name == name)


def load_campaign(path: Path, project: Path) -> Campaign:
    """Read and check a campaign file: its schema, every job's parameters file (as ``verifylab run`` would) and
    chapter names against ``project``'s chapters. Paths of parameters files become absolute."""
    data = read_strict_yaml_file(path, "campaign", FleetError)
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as exc:
        raise FleetError(describe_error(exc, str(path))) from None
    sources = chapter_sources(project)
    for job in campaign.jobs:
        job.params = (path.parent / job.params).resolve()
        try:
            load_params(job.params)
            select_chapters(sources, job.only or None)
        except ParameterError as exc:
            raise FleetError(f"{path}: job {job.name!r}: {exc}") from None
    return campaign


def job_key(job: FleetJob, host: FleetHost, code: str) -> str:
    """What makes a job done: its parameters (the file's bytes), chapters, label, the box and the code. A rerun
    of the campaign skips a job whose key is recorded as done."""
    parts = {
        "params": sha256_of(job.params),
        "only": job.only,
        "label": job.label,
        "resource": host.resource,
        "code": code,
    }
    return sha256_bytes(json.dumps(parts, sort_keys=True).encode())[:16]
