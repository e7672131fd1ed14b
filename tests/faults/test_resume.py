"""#27 item 4: a resumed run is the same measurement, and only one process measures into a run at a time. Each
case mixed runs silently before (cells of another server or max_tokens under the first call's provenance)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from verifylab.errors import RunExistsError
from verifylab.store.runs import RunStore

RUN = "20261201-000000-resume"
PARAMS = {"base": {"model_path": "/m", "port": 30000}, "single_stream": {"max_tokens": 128}}


def opened(store: RunStore, label: str = "2x H200, test", **parameters) -> None:
    store.open_or_create(RUN, label, parameters or PARAMS, "benchmark", with_torch=False)


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_resume_with_another_label_or_parameter_is_refused_naming_both(tmp_path):
    store = RunStore(tmp_path / "runs")
    opened(store)
    opened(store)  # the same measurement resumes
    with pytest.raises(RunExistsError, match="labelled '2x H200, test', this call '8x RTX PRO 6000'"):
        opened(store, label="8x RTX PRO 6000")
    with pytest.raises(
        RunExistsError, match=r'single_stream = \{"max_tokens": 128\}, this call has \{"max_tokens": 2048\}'
    ):
        opened(store, **{**PARAMS, "single_stream": {"max_tokens": 2048}})
    with pytest.raises(RunExistsError, match="was measured with base"):
        opened(store, **{**PARAMS, "base": {"model_path": "/other", "port": 30000}})
    assert store.manifest(RUN).parameters == PARAMS  # the refused calls changed nothing


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_another_chapter_adds_its_own_parameters_to_the_run(tmp_path):
    store = RunStore(tmp_path / "runs")
    opened(store)
    opened(store, server_url="http://127.0.0.1:30001", profile_steps=5)  # chapter 03 into chapter 02's run
    assert store.manifest(RUN).parameters == {**PARAMS, "server_url": "http://127.0.0.1:30001", "profile_steps": 5}


HOLDER = """
import sys, time
from pathlib import Path
from verifylab.store.runs import RunStore
store = RunStore(Path(sys.argv[1]))
with store.measuring(sys.argv[2]):
    print("holding", flush=True)
    time.sleep(float(sys.argv[3]))
"""


@pytest.mark.slow  # starts processes (a server, ranks or writers): make test
def test_a_second_process_measuring_into_the_run_is_refused_at_once(tmp_path):
    store = RunStore(tmp_path / "runs")
    opened(store)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root), RUN, "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with (
            pytest.raises(RunExistsError, match=f"run '{RUN}' is being measured by another process"),
            store.measuring(RUN),
        ):
            pass
        assert holder.poll() is None  # refused while the other still measures, not queued behind it
    finally:
        holder.kill()
        holder.wait()
    with store.measuring(RUN), store.measuring(RUN):  # free once the holder died; re-entrant in one process
        pass
