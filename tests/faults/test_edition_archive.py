"""Issue 70, writes: archiving an edition never loses the one already there. At 7ac0507 ``publish.edition.archive``
deleted the old edition, then copied the new one into its place: a copy that failed (a full disk) or was interrupted
(Ctrl-C) left no edition at all. The boundary: ``publish.edition.replace_folder`` (staged beside it, renamed in)."""

from __future__ import annotations

import os
import shutil

import pytest

from verifylab.publish import edition as edition_module

EDITION = {"id": "2026-12-05-abc1234", "built": "2026-12-05T04:00:00Z", "data_digest": "d" * 64, "runs": []}


def _book(tmp_path, text: str):
    root = tmp_path / "project"
    html = root / "_build" / "html"
    (html / "chapters").mkdir(parents=True)
    (html / "index.html").write_text(text)
    (html / "chapters" / "ch1.html").write_text(text)
    return root


def _archived(root) -> dict[str, str]:
    folder = root / "_build" / "editions" / EDITION["id"]
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*.html"))}


@pytest.mark.parametrize(
    "stop", [OSError(28, "No space left on device"), KeyboardInterrupt()], ids=["disk full", "ctrl-c"]
)
def test_a_copy_that_stops_half_way_leaves_the_old_edition_whole(tmp_path, monkeypatch, stop):
    monkeypatch.setattr(edition_module, "write_exports", lambda *a, **k: [])  # the exports are not what is tested
    root = _book(tmp_path, "first")
    edition_module.archive(root, EDITION)
    assert _archived(root) == {"index.html": "first", "chapters/ch1.html": "first"}

    (root / "_build" / "html" / "index.html").write_text("second")
    real_copy = shutil.copyfile

    def copy_then_stop(src, dst, *args, **kwargs):
        if os.fspath(src).endswith("ch1.html"):
            raise stop
        return real_copy(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copy_then_stop)
    with pytest.raises(type(stop) if isinstance(stop, KeyboardInterrupt) else (OSError, shutil.Error)):
        edition_module.archive(root, EDITION)
    assert _archived(root) == {"index.html": "first", "chapters/ch1.html": "first"}  # the old edition, whole
    monkeypatch.setattr(shutil, "copyfile", real_copy)
    edition_module.archive(root, EDITION)
    assert _archived(root) == {"index.html": "second", "chapters/ch1.html": "first"}
    assert [p.name for p in (root / "_build" / "editions").iterdir() if p.name.startswith(".")] == []


def test_an_archive_stopped_between_its_renames_puts_the_old_edition_back(tmp_path, monkeypatch):
    monkeypatch.setattr(edition_module, "write_exports", lambda *a, **k: [])
    root = _book(tmp_path, "first")
    edition_module.archive(root, EDITION)
    editions = root / "_build" / "editions"
    (editions / EDITION["id"]).rename(editions / f".{EDITION['id']}.old-x1")  # killed after moving the old aside

    def fail(staging):
        raise OSError("stopped again")

    with pytest.raises(OSError):
        edition_module.replace_folder(editions / EDITION["id"], fail)
    assert _archived(root) == {"index.html": "first", "chapters/ch1.html": "first"}  # put back, then kept
