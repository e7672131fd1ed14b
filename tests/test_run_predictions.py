"""#83: a run that stores the model's prediction made before it ran (``parameters.prediction``: the file and the commit
it was read at) holds that file byte for byte (``prediction/<name>``), and the commit is an ancestor of the run's own
``git_commit``: the prediction existed in the project's history before the code that ran. A planted run whose stored
prediction differs, or whose prediction commit comes after its code, is caught."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _git(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, check=False)


def prediction_problems(run: Path) -> list[str]:
    """What is wrong with ``run``'s stored prediction (empty: it is the committed file, committed before the run)."""
    manifest = json.loads((run / "manifest.json").read_text())
    prediction = manifest.get("parameters", {}).get("prediction")
    if not prediction:
        return []
    file, commit, code = prediction["file"], prediction["commit"], manifest["git_commit"]
    problems = []
    committed = _git("show", f"{commit}:{file}")
    stored = run / "prediction" / Path(file).name
    if committed.returncode != 0:
        problems.append(f"{file} is not in commit {commit}")
    elif not stored.is_file() or stored.read_bytes() != committed.stdout:
        problems.append(f"{stored} is not {file} as committed in {commit}")
    if _git("merge-base", "--is-ancestor", commit, code).returncode != 0:
        problems.append(f"the prediction's commit {commit} is not an ancestor of the run's code {code}")
    return problems


def _history() -> bool:
    return _git("rev-parse", "--is-shallow-repository").stdout.strip() == b"false"


RUNS = sorted(p.parent for p in (ROOT / "data" / "runs").glob("*/prediction"))


@pytest.mark.skipif(not _history(), reason="needs the project's whole git history")
def test_every_stored_prediction_is_the_committed_file_from_before_the_run():
    for run in RUNS:
        assert prediction_problems(run) == [], run.name


@pytest.mark.skipif(not _history() or not RUNS, reason="needs the history and a run with a stored prediction")
def test_a_planted_prediction_or_a_later_commit_is_caught(tmp_path):
    run = tmp_path / RUNS[0].name
    shutil.copytree(RUNS[0], run)
    stored = next((run / "prediction").iterdir())
    stored.write_bytes(stored.read_bytes() + b"planted,row\n")
    assert any("is not" in p for p in prediction_problems(run))
    manifest = json.loads((run / "manifest.json").read_text())
    first = _git("rev-list", "--max-parents=0", "HEAD").stdout.split()[0].decode()
    manifest["git_commit"] = first  # code older than the prediction
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert any("not an ancestor" in p for p in prediction_problems(run))
