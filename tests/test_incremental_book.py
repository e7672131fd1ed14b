"""``verifylab book`` and ``verifylab run`` (replay) execute a chapter again only when one of its inputs changed (its
notebook, its parameters, the code, what it read of the data or the toolchain): a second build with nothing changed
executes none, and a changed number in one run re-executes only the chapters that read it (#54)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from verifylab.publish.chapter_inputs import recorded_inputs, recorded_reads
from verifylab.publish.pipeline import load_params, run_pipeline

REPLAY = {"mode": "replay", "data_dir": "data"}


@pytest.mark.slow
def test_a_second_build_executes_only_the_chapters_whose_inputs_changed(smoke_run, repo_root, tmp_path):
    session, result = smoke_run  # the session's book: every chapter executed once, as `verifylab run` does
    assert result.exit_code == 0, result.output
    root = tmp_path / "p"
    shutil.copytree(session, root, ignore=shutil.ignore_patterns("_build"))
    params = load_params(repo_root / "examples" / "params-smoke.yaml")

    def executed() -> list[str]:
        return [c.name for c in run_pipeline(root, params, render=False).chapters if not c.reused]

    first = [p for p in sorted((root / "book" / "_generated").glob("*.ipynb")) if "-" not in p.stem]  # first pages
    assert len(first) == 6 and all(recorded_inputs(c) for c in first)  # each executed copy says what it was made from
    assert executed() == []

    introduction = root / "notebooks" / "00_introduction.py"
    introduction.write_text(introduction.read_text() + "\n# %% [markdown]\n# One more paragraph.\n")
    rerun = [c for c in run_pipeline(root, params, render=False).chapters if not c.reused]
    assert [(c.name, c.changed) for c in rerun] == [("00_introduction", ["its notebook changed"])]  # #71: says why

    readers: dict[str, set[str]] = {}  # each run table -> the chapters that read it
    for chapter in first:
        reads = recorded_reads(chapter)
        assert reads is not None and reads.files, chapter.stem
        for path in reads.files:
            if path.startswith("runs/") and path.endswith(".csv") and not path.endswith("manifest.json"):
                readers.setdefault(path, set()).add(chapter.stem)
    table, who = min(readers.items(), key=lambda item: (len(item[1]), item[0]))
    assert 0 < len(who) < len(first), readers  # some chapter reads it, not every one
    frame = pd.read_csv(root / "data" / table)
    column = next(c for c in frame.columns if pd.api.types.is_float_dtype(frame[c]) and frame[c].notna().any())
    frame.loc[frame[column].first_valid_index(), column] *= 1.01  # one number, one per cent
    frame.to_csv(root / "data" / table, index=False)
    assert set(executed()) == who, table


def test_a_file_that_appears_outside_the_run_store_changes_every_chapter_s_reads(tmp_path):
    """A chapter may only ask whether a file exists (no open, no listing): a name that appears or goes anywhere but
    the run store changes every chapter's digest; a new run's name does not, unless the chapter listed the runs."""
    from verifylab.publish.chapter_reads import Reads, reads_digest

    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "gates").mkdir()
    (tmp_path / "runs" / "r1" / "t.csv").write_text("x\n1\n")
    reads = Reads(files=("runs/r1/t.csv",), dirs=())
    names = ["runs/r1/t.csv"]
    before = reads_digest(tmp_path, reads, names)
    assert reads_digest(tmp_path, reads, [*names, "runs/r2/t.csv"]) == before  # a run nobody listed
    assert reads_digest(tmp_path, reads, [*names, "gates/new.csv"]) != before  # a gate file anyone may ask about
    (tmp_path / "runs" / "r1" / "t.csv").write_text("x\n2\n")
    assert reads_digest(tmp_path, reads, names) != before  # the bytes read changed
    listed = Reads(files=(), dirs=("runs",))
    one = reads_digest(tmp_path, listed, names)
    (tmp_path / "runs" / "r2").mkdir()
    assert reads_digest(tmp_path, listed, names) != one  # a run appears in a folder the chapter listed


def test_what_lands_while_a_chapter_runs_is_not_recorded_as_read(tmp_path):
    """#77: a chapter's reads are digested from the data as it was when the chapter began, so a run (or a changed
    table) that lands while it executes leaves the recorded digest unlike the data after: the next build sees the
    difference and executes the chapter again. Digested from the data as it is after (the code before), it matched."""
    from verifylab.publish.chapter_reads import Reads, data_snapshot, reads_digest

    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "manifest.json").write_text("{}")
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "table.csv").write_text("x\n1\n")
    reads = Reads(files=("reference/table.csv", "runs/r2/manifest.json"), dirs=("runs",))
    names = ["reference/table.csv", "runs/r1/manifest.json"]
    began = data_snapshot(tmp_path)
    at_start = reads_digest(tmp_path, reads, names)
    (tmp_path / "runs" / "r2").mkdir()  # a run lands while the chapter executes
    (tmp_path / "runs" / "r2" / "manifest.json").write_text("{}")
    (tmp_path / "reference" / "table.csv").write_text("x\n2\n")
    recorded = reads_digest(tmp_path, reads, names, began)
    assert recorded == at_start  # what the chapter could have read
    assert recorded != reads_digest(tmp_path, reads, names)  # the next build's view differs: it runs again


def test_an_executed_copy_without_a_digest_or_unreadable_is_never_trusted(tmp_path):
    copy = tmp_path / "01.ipynb"
    assert recorded_inputs(copy) is None
    copy.write_text("{not json")
    assert recorded_inputs(copy) is None
    copy.write_text(json.dumps({"metadata": {"verifylab": {"inputs": 3}}}))
    assert recorded_inputs(copy) is None
    copy.write_text(json.dumps({"metadata": {"verifylab": {"inputs": "abc"}}}))
    assert recorded_inputs(copy) == "abc"


def test_the_digest_changes_with_each_input(tmp_path):
    from verifylab.publish.chapter_inputs import inputs_digest

    notebook = tmp_path / "00.py"
    notebook.write_text("# %%\n")
    base = {"source": notebook, "parameters": REPLAY, "code": "c", "data": "d", "toolchain": {"pandas": "2"}}
    digest = inputs_digest(**base)
    assert inputs_digest(**base) == digest
    for change in ({"parameters": REPLAY | {"run_id": "x"}}, {"code": "c2"}, {"data": "d2"}, {"toolchain": {}}):
        assert inputs_digest(**(base | change)) != digest, change
    notebook.write_text("# %%\nx = 1\n")
    assert inputs_digest(**base) != digest


@pytest.mark.slow
def test_a_build_with_nothing_changed_renders_nothing_and_a_rebuild_says_which_input_changed(smoke_run, tmp_path):
    """#71: the second of two builds renders nothing (the HTML, exports and PDFs of the first are kept, untouched)
    and says so; a changed page of the book's own is named as what the next render is for."""
    from verifylab.publish.build import build_book
    from verifylab.publish.render_key import changed_inputs, last_render, render_inputs

    session, result = smoke_run
    assert result.exit_code == 0, result.output
    root = tmp_path / "p"
    shutil.copytree(session, root)
    first = build_book(root)
    assert first.rendered  # `verifylab run` recorded no render: this build renders, and says why
    # `verifylab run` gave each chapter the parameters `verifylab book` gives it but the smoke file's own (a label for
    # 02 and 03, model settings for 02 and 05): only those three run again, the others are reused
    executed = sorted(c.name for c in first.chapters if not c.reused)
    assert executed == ["02_benchmarks", "03_verify_breakdown", "05_recommendations"], executed
    index = root / "_build" / "html" / "index.html"
    stamp = index.stat().st_mtime_ns
    second = build_book(root)
    assert second.rendered == [] and not [c for c in second.chapters if not c.reused]
    assert (
        index.stat().st_mtime_ns == stamp and second.edition["id"] == first.edition["id"] and second.pdfs == first.pdfs
    )
    from verifylab.publish.registry import edition_as_json

    assert edition_as_json(second.edition) == edition_as_json(first.edition) | {"built": second.edition["built"]}
    names = [c.name for c in second.chapters]
    methods = root / "book" / "methods.md"
    methods.write_text(methods.read_text() + "\nOne more line.\n")
    recorded = last_render(root)
    assert recorded is not None
    assert changed_inputs(recorded["inputs"], render_inputs(root, root / "data", names)) == ["book/methods.md changed"]


def test_a_kernel_that_never_tracked_is_not_read_as_one_that_read_nothing(tmp_path):
    """The tracker creates its log when it is installed: a kernel that read nothing leaves an empty log (its copy is
    recorded as reading nothing); no log means the kernel never tracked (its start-up line failed), and the copy is
    recorded with no digest, so the next build executes it again instead of trusting that it read nothing."""
    import subprocess
    import sys

    from verifylab.publish.chapter_reads import Reads, read_log

    log = tmp_path / "reads.jsonl"
    assert read_log(log) is None
    tracker = "import sys\nfrom verifylab.publish.chapter_reads import track\ntrack(sys.argv[1], sys.argv[2])\n"
    done = subprocess.run([sys.executable, "-c", tracker, str(tmp_path), str(log)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert read_log(log) == Reads()
