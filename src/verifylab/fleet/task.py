"""What a box runs for one job (inside a Ray task, but without Ray): check that it has the driver's verifylab, run
``verifylab run --params … --only … --no-render`` in its checkout, and hand back the run folders it wrote."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

import verifylab
from verifylab.fleet.pack import manifest_times, pack_runs, runs_changed
from verifylab.iorw import atomic_write_text
from verifylab.lifetime import run_tied
from verifylab.strict_yaml import load_strict_yaml

OUTPUT_LINES = 15  # of a failed run's output, what the driver is told
JOB_TIMEOUT_S = 24 * 3600  # one job (a live campaign's chapters on one box) never takes a day: it hangs


def code_identity() -> str:
    """verifylab's version and a digest of its installed sources: the driver's and every box's must agree."""
    package = Path(verifylab.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{verifylab.__version__}+{digest.hexdigest()[:12]}"


def job_scratch(spec: dict[str, Any], project: Path) -> Path:
    """The temporary folder of one job on this box, the same for every attempt of it (named by the job, its
    parameters and the project): an attempt killed with its worker leaves it behind, and the next one empties it."""
    key = hashlib.sha256(f"{spec['name']}\0{spec['params_text']}\0{project}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"verifylab-fleet-{spec['name']}-{key}"


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one job as ``spec`` describes it (name, params text, chapters, label, the driver's code identity, the
    project on this box). Never raises for the job's own failure: the result says ok or the one-line error."""
    here = code_identity()
    if here != spec["code"]:
        return {
            "ok": False,
            "error": f"this box runs verifylab {here}, the driver {spec['code']}: install the "
            f"driver's commit here (nothing was run)",
        }
    project = Path(spec.get("project") or os.environ.get("VERIFYLAB_FLEET_PROJECT") or os.getcwd())
    if not (project / "notebooks").is_dir():
        return {"ok": False, "error": f"{project} is no verifylab checkout (no notebooks/): set the host's project"}
    params = load_strict_yaml(spec["params_text"]) or {}
    if spec.get("label"):
        params.setdefault("parameters", {})["label"] = spec["label"]
    runs_dir = project / params.get("data_dir", "data") / "runs"
    before = manifest_times(runs_dir)
    scratch = job_scratch(spec, project)
    shutil.rmtree(scratch, ignore_errors=True)  # what a killed attempt of this job left (its run died with it)
    scratch.mkdir(parents=True)
    atomic_write_text(scratch / "params.yaml", yaml.safe_dump(params))
    try:
        cmd = [sys.executable, "-m", "verifylab.cli", "run", "--params", str(scratch / "params.yaml")]
        cmd += ["--root", str(project), "--no-render"] + (
            ["--only", ",".join(spec["only"])] if spec.get("only") else []
        )
        # the run dies with this worker: a retried task never finds the killed attempt still measuring; its
        # temporary files (kernels, servers' logs) go into the job's scratch folder, which the retry empties
        proc = run_tied(cmd, timeout_s=JOB_TIMEOUT_S, env={**os.environ, "TMPDIR": str(scratch)})
        if proc is None:  # stopped (its servers die with it); what it stored still travels back
            returncode = None
            output = [f"error: verifylab run took longer than {JOB_TIMEOUT_S} s on this box and was stopped"]
        else:
            returncode, output = proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    run_ids = runs_changed(runs_dir, before)
    result: dict[str, Any] = {"ok": returncode == 0, "returncode": returncode, "run_ids": run_ids}
    if returncode != 0:
        failed = [line for line in output if line.startswith("error:") or ": failed: " in line]  # run's one-liners
        errors = failed or output[-1:] or ["(no output)"]
        result["error"] = errors[-1][:400]
        result["output_tail"] = output[-OUTPUT_LINES:]
    if run_ids:
        result["blob"], result["digest"] = pack_runs(runs_dir, run_ids)
    return result
