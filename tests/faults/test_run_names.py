"""#53 class 8: a run's name never takes another's place — a caption cites a run only where it names that run's id
as a whole word (not as part of a longer id), and a run cannot be named like a page of the book (``index``)."""

from __future__ import annotations

import pytest

from verifylab.errors import ParameterError
from verifylab.publish.exhibit_sources import runs_named
from verifylab.store.runs import RunStore
from verifylab.vocab import RESERVED_RUN_IDS, plain_run_id


def test_a_caption_cites_only_the_runs_it_names():
    runs = ["20261130-live", "20261130-live-tp2", "20261201-probe"]
    text = "Fig. 2.3: tokens per second (measured, run 20261130-live-tp2; H200)."
    assert runs_named(text, runs) == ["20261130-live-tp2"]
    assert runs_named("runs 20261130-live and 20261201-probe.", runs) == ["20261130-live", "20261201-probe"]
    # table cells run together in an exhibit's text: an id beside another still counts, inside a longer one never
    assert runs_named("20261130-live-tp220261201-probe", runs) == ["20261130-live-tp2", "20261201-probe"]


@pytest.mark.parametrize("name", sorted(RESERVED_RUN_IDS))
def test_a_run_named_like_a_page_is_refused(tmp_path, name):
    with pytest.raises(ParameterError, match="name of a page of the book"):
        plain_run_id(name)
    with pytest.raises(ParameterError, match="name of a page of the book"):
        RunStore(tmp_path).exists(name)
