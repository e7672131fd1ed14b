"""#77, writes: inside a data folder only a run's own store methods write. A command's user-chosen output
(``exhibit --csv/--out``, ``box --out``, ``trace --csv``) passes one check, ``intake.refuse_write_into_data``:
hypothesis generates paths into the data folder by every spelling (``..``, ``.``, links, the folder itself) and
paths beside it; each inside is refused with its path named, each outside is allowed. Through the command: the
public matrix and a run's manifest are never overwritten, and the command exits non-zero."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifylab.intake import OutsideFileError, refuse_write_into_data

ROOT = Path(__file__).resolve().parents[1]
VERIFYLAB = Path(sys.executable).with_name("verifylab")
SEGMENT = st.sampled_from(["data", "runs", "reference", "r1", "x.csv", "..", ".", "elsewhere", "link-to-data"])


@contextlib.contextmanager
def _project():
    with tempfile.TemporaryDirectory(prefix="writes-") as tmp:
        project = Path(tmp)
        for folder in ("data/runs/r1", "data/reference", "elsewhere"):
            (project / folder).mkdir(parents=True)
        (project / "data/reference/public_context.csv").write_text("kept\n")
        (project / "link-to-data").symlink_to(project / "data")
        yield project


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(SEGMENT, min_size=1, max_size=6), given_data_dir=st.booleans())
def test_an_output_inside_a_data_folder_is_refused_by_every_spelling(parts, given_data_dir):
    with _project() as project:
        output = project.joinpath(*parts)
        resolved, data = output.resolve(), (project / "data").resolve()
        inside = resolved == data or data in resolved.parents
        try:
            refuse_write_into_data(output, "--csv", project / "data" if given_data_dir else None)
        except OutsideFileError as exc:
            assert inside, f"refused {output} (resolves to {resolved}), outside the data folder"
            assert str(output) in str(exc) and "--csv" in str(exc)
            return
        assert not inside, f"allowed a write to {resolved}, inside the data folder"


def test_an_output_that_is_an_input_is_refused(tmp_path):
    given = tmp_path / "params.yaml"
    given.write_text("x: 1\n")
    with pytest.raises(OutsideFileError, match="that is an input"):
        refuse_write_into_data(tmp_path / "." / "params.yaml", "--csv", inputs=(given,))


def _verifylab(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "VERIFYLAB_CACHE": "off", "COLUMNS": "200"}
    return subprocess.run([str(VERIFYLAB), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "victim"),
    [
        (
            ["exhibit", "tbl-reported-figures", "--csv", "data/reference/public_context.csv"],
            "reference/public_context.csv",
        ),
        (
            ["exhibit", "fig-reported-throughput", "--out", "data/runs/20261202-203301-box-probe/manifest.json"],
            "runs/20261202-203301-box-probe/manifest.json",
        ),
        (["box", "--probe", "20261202-203301-box-probe", "--out", "data/reference"], "reference/public_context.csv"),
    ],
)
def test_a_command_never_overwrites_the_data_it_reads(tmp_path, argv, victim):
    project = tmp_path / "p"
    shutil.copytree(ROOT / "data", project / "data")
    before = (project / "data" / victim).read_bytes()
    done = _verifylab(project, *argv, "--root", str(ROOT)) if argv[0] == "exhibit" else _verifylab(project, *argv)
    assert done.returncode != 0, done.stdout
    assert "inside the data folder" in done.stderr + done.stdout
    assert (project / "data" / victim).read_bytes() == before
