"""A campaign's state file (``data/fleet/<campaign>.json``): which jobs are done, running or failed, keyed by
:func:`~verifylab.fleet.campaign.job_key`. Read and written under a lock, each write atomic, so a driver killed at
any point leaves a file the next run resumes from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from verifylab.errors import FleetError
from verifylab.iorw import atomic_write_json

Status = Literal["running", "done", "failed"]


class CampaignState:
    """The jobs of one campaign as the driver last recorded them."""

    def __init__(self, data_dir: Path, campaign: str) -> None:
        self.path = Path(data_dir) / "fleet" / f"{campaign}.json"

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock", timeout=30):
            jobs = self.read()
            yield jobs
            atomic_write_json(self.path, {"jobs": jobs})

    def read(self) -> dict[str, dict[str, Any]]:
        """Job key -> its record (job, host, status, runs, error, times, Ray ids); empty before the first run."""
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"a {type(data).__name__}, not a table with 'jobs'")
            jobs = data["jobs"]
            if not isinstance(jobs, dict) or not all(isinstance(job, dict) for job in jobs.values()):
                raise ValueError("'jobs' is not a table of job records")
            return jobs
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            raise FleetError(f"{self.path}: unreadable campaign state ({exc}); move it away to start over") from None

    def mark(self, key: str, status: Status, **fields: Any) -> None:
        """Record a job's new status (and what came with it: runs, error, node) with the time."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._locked() as jobs:
            record = jobs.setdefault(key, {})
            record.update(fields, status=status, updated=now)
            if status == "running":
                record.setdefault("started", now)

    def done(self) -> set[str]:
        return {key for key, record in self.read().items() if record.get("status") == "done"}
