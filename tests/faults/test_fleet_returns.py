"""Issue 41 classes 1, 4 and 6 at the boundary where a box's runs come back (``fleet.pack.unpack_runs`` and the
driver's collection): a run is never overwritten, a damaged or oversize tar is refused whole in one line, and a
job whose result cannot be collected is 'failed' while the other jobs' results still land."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile

import pytest

from verifylab.errors import FleetError
from verifylab.fleet.campaign import load_campaign
from verifylab.fleet.pack import pack_runs, unpack_runs
from verifylab.fleet.ray_runner import _collect_or_fail
from verifylab.fleet.state import CampaignState
from verifylab.store.runs import RunStore

from ..test_fleet import HOSTS, ROOT, campaign_file, live_params


def _one_run():
    source = ROOT / "data" / "runs"
    run_id = sorted(p.name for p in source.iterdir() if (p / "manifest.json").is_file())[0]
    return source, run_id


def test_two_boxes_returning_the_same_run_id_keep_both_runs(tmp_path):
    source, run_id = _one_run()
    blob, digest = pack_runs(source, [run_id])
    store = RunStore(tmp_path / "runs")
    assert unpack_runs(blob, digest, store, {"host": "box-a"}) == [run_id]
    before = (store.path(run_id) / "manifest.json").read_bytes()
    (second,) = unpack_runs(blob, digest, store, {"host": "box-b"})
    assert second == f"{run_id}-box-b"
    assert (store.path(run_id) / "manifest.json").read_bytes() == before  # the first is untouched
    manifest = store.manifest(second)
    assert manifest.run_id == second and manifest.fleet["renamed_from"] == run_id


def test_a_re_run_returning_the_same_run_stores_no_second_copy(tmp_path):
    """#53 class 8: the same job re-run returns the same run; the store keeps the one it has (both ids the same)."""
    source, run_id = _one_run()
    blob, digest = pack_runs(source, [run_id])
    store = RunStore(tmp_path / "runs")
    first = unpack_runs(blob, digest, store, {"host": "box-b", "job": "j1"})
    again = unpack_runs(blob, digest, store, {"host": "box-b", "job": "j1"})
    assert first == again == [run_id]
    assert sorted(p.name for p in store.root.iterdir() if not p.name.startswith(".")) == [run_id]
    other_job = unpack_runs(blob, digest, store, {"host": "box-b", "job": "j2"})
    assert other_job == [f"{run_id}-box-b"]  # another job's run of the same name is kept beside it


def _gz_tar(members: dict[str, int]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, size in members.items():
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"\0" * size))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("blob", "digest", "words"),
    [
        (b"not a tar at all", "sha", "not a whole gzip'd tar"),
        (gzip.compress(b"x" * 100), "sha", "not a whole gzip'd tar"),
        (_gz_tar({"20261201-000000-ok/a.csv": 10})[:-30], "sha", "not a whole gzip'd tar"),
        (_gz_tar({"20261201-000000-ok/a.csv": 10}), None, "without its sha256"),
        (_gz_tar({"20261201-000000-ok/a.csv": 4096, "20261201-000000-ok/b.csv": 4096}), "sha", "more than 5000"),
    ],
    ids=["not-a-tar", "gzip-not-tar", "truncated", "no-digest", "oversize"],  # the same names in every xdist worker
)
def test_a_damaged_digestless_or_oversize_tar_is_refused_whole(tmp_path, blob, digest, words):
    store = RunStore(tmp_path / "runs")
    digest = hashlib.sha256(blob).hexdigest() if digest == "sha" else digest
    with pytest.raises(FleetError, match=words) as err:
        unpack_runs(blob, digest, store, {"host": "a"}, max_bytes=5000)
    assert len(str(err.value).splitlines()) == 1
    assert not store.root.exists() or [p.name for p in store.root.iterdir()] == []


class _Ray:
    """Stands in for ray.get: each reference is the result a box returned."""

    @staticmethod
    def get(ref):
        return ref


def test_a_job_whose_result_cannot_be_collected_is_failed_and_the_others_land(tmp_path):
    params = live_params(tmp_path / "p.yaml", "20261201-000000-a", 30002)
    jobs = [{"name": f"j{i}", "host": h["name"], "params": str(params)} for i, h in enumerate(HOSTS)]
    campaign = load_campaign(campaign_file(tmp_path, HOSTS, jobs), ROOT)
    store, state = RunStore(tmp_path / "runs"), CampaignState(tmp_path, campaign.campaign)
    source, run_id = _one_run()
    blob, digest = pack_runs(source, [run_id])
    good = {"ok": True, "blob": blob, "digest": digest, "node_id": "n", "ray_job_id": "r"}
    digestless = {"ok": True, "blob": b"garbage", "node_id": "n", "ray_job_id": "r"}
    malformed = {"ok": True, "blob": b"garbage"}  # not what a verifylab box returns at all
    for key in ("k0", "k1"):
        state.mark(key, "running")
    first = _collect_or_fail(_Ray, digestless, campaign.jobs[0], "k0", campaign, store, state, 1.0)
    assert first.status == "failed" and "without its sha256" in first.error
    other = _collect_or_fail(_Ray, malformed, campaign.jobs[0], "k0", campaign, store, state, 1.0)
    assert other.status == "failed" and "could not be collected: KeyError" in other.error
    second = _collect_or_fail(_Ray, good, campaign.jobs[1], "k1", campaign, store, state, 1.0)
    assert second.status == "done" and second.run_ids == [run_id]
    jobs_now = state.read()
    assert jobs_now["k0"]["status"] == "failed" and jobs_now["k1"]["status"] == "done"
    assert state.done() == {"k1"}  # a rerun retries only the failed job
