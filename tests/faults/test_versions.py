"""One way to compare versions (PEP 440), used by the gates (#17 item 10): 0.6.17rc1 comes before 0.6.17."""

from verifylab.gates.inventory import _version_preconditions
from verifylab.vocab import version_at_least, version_key


def test_a_release_candidate_comes_before_its_release():
    assert not version_at_least("0.6.17rc1", "0.6.17")
    assert version_at_least("0.6.17", "0.6.17") and version_at_least("0.6.15.post1", "0.6.15")
    assert not version_at_least(None, "0.6.15") and not version_at_least("not-a-version", "0.6.15")
    assert sorted(["0.5.10", "0.5.9", "0.5.9.post1"], key=version_key) == ["0.5.9", "0.5.9.post1", "0.5.10"]


def test_flashinfer_0_6_17rc1_is_not_reported_supported_upstream():
    (finding,) = _version_preconditions({"flashinfer": "0.6.17rc1"}, 120)
    assert finding.note.startswith("experimental")
