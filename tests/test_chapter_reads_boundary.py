"""#77, chapter reads: what a chapter read is fixed before it runs, by one boundary (``ChapterInputs.begin``: the data
folder snapshot right before the chapter executes; the record is digested from it). Hypothesis generates data
folders, what a chapter read of them (files, folders listed) and what lands while it executes (a new run, a manifest,
a changed table, a file outside the run store, a removal, a file nobody reads): the recorded digest is always the one
the data had when the chapter began, and the next build re-executes the chapter exactly when something it read
changed. The rule before the change (the reads digested after the chapter ran) fails the same property: hypothesis
finds a landing it records as read."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from verifylab.publish.chapter_inputs import ChapterInputs
from verifylab.publish.chapter_reads import Reads
from verifylab.store.digests import data_files

RUNS = ["runs/r1", "runs/r2", "runs/r3"]
FILES = [f"{run}/{name}" for run in RUNS for name in ("manifest.json", "single_stream.csv")]
OUTSIDE = ["reference/public.csv", "reference/context.csv", "gates/matrix.json"]
FOLDERS = ["runs", *RUNS, "reference"]
LANDINGS = ["write", "remove", "outside", "unread"]


@dataclass(frozen=True)
class Landing:
    """What lands while the chapter executes: ``kind`` at ``path`` with ``text``."""

    kind: str
    path: str
    text: str


STATE = st.dictionaries(st.sampled_from(FILES + OUTSIDE), st.text("abc1", max_size=6), max_size=8)
READS = st.builds(
    Reads,
    files=st.lists(st.sampled_from(FILES + OUTSIDE), unique=True, max_size=5).map(lambda xs: tuple(sorted(xs))),
    dirs=st.lists(st.sampled_from(FOLDERS), unique=True, max_size=3).map(lambda xs: tuple(sorted(xs))),
)
LANDING = st.builds(
    Landing, kind=st.sampled_from(LANDINGS), path=st.sampled_from(FILES + OUTSIDE), text=st.text("xyz", max_size=4)
)
CASE = st.tuples(STATE, READS, st.lists(LANDING, min_size=1, max_size=3))


def _inputs(data: Path, root: Path) -> ChapterInputs:
    """A chapter's inputs as ``verifylab book`` makes them: the data folder's names listed when the build starts."""
    source = root / "chapter.py"
    source.write_text("# %%\n")
    names = [f.relative_to(data).as_posix() for f in data_files(data)]
    return ChapterInputs(source, {"data_dir": "data"}, "code", {"jupyter-book": "1"}, data, names)


def _land(data: Path, landing: Landing) -> None:
    path = data / landing.path
    if landing.kind == "remove":
        path.unlink(missing_ok=True)
        return
    if landing.kind == "outside":
        path = data / "reference" / f"new-{len(landing.text)}.csv"
    elif landing.kind == "unread":
        path = data / "runs" / "r3" / "profile" / "trace.txt"  # read only by a chapter that lists runs/r3
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("landed " + landing.text)


def _touched(before: dict[str, str], after: dict[str, str], reads: Reads) -> bool:
    """Whether what landed changed anything the chapter read: a read file's text (or presence), a listed folder's
    names, or the names of the files outside the run store (every chapter asks about those)."""

    def listing(files: dict[str, str], folder: str) -> set[str]:
        under = [p for p in [*files, *FOLDERS] if p.startswith(folder + "/")]  # the generated folders always stand
        return {p[len(folder) + 1 :].split("/")[0] for p in under}

    outside = {p for p in before if not p.startswith("runs/")} != {p for p in after if not p.startswith("runs/")}
    return (
        outside
        or any(before.get(f) != after.get(f) for f in reads.files)
        or any(listing(before, d) != listing(after, d) for d in reads.dirs)
    )


def _texts(data: Path) -> dict[str, str]:
    return {f.relative_to(data).as_posix(): f.read_text() for f in data_files(data)}


def _holds(case: tuple, recorded_by: Callable[[ChapterInputs, Reads, Callable[[], None]], str]) -> bool:
    """The property for one generated case under a rule ``recorded_by(inputs, reads, run)`` (run: the chapter
    executing, while which the landings arrive): the record is the data as the chapter began, and the next build
    re-executes the chapter exactly when what landed changed something it read."""
    state, reads, landings = case
    root = Path(tempfile.mkdtemp(prefix="verifylab-tests-reads-"))
    try:
        data = root / "data"
        for folder in FOLDERS:
            (data / folder).mkdir(parents=True, exist_ok=True)
        for rel, text in state.items():
            (data / rel).parent.mkdir(parents=True, exist_ok=True)
            (data / rel).write_text(text)
        inputs = _inputs(data, root)
        as_begun, before = inputs.digest(reads), _texts(data)

        def run() -> None:
            for landing in landings:
                _land(data, landing)

        recorded = recorded_by(inputs, reads, run)
        next_build = _inputs(data, root).digest(reads)  # the names listed again, the reads digested as they are now
        touched = _touched(before, _texts(data), reads)
        return recorded == as_begun and (next_build != recorded) == touched
    finally:
        shutil.rmtree(root)


def _fixed_before(inputs: ChapterInputs, reads: Reads, run: Callable[[], None]) -> str:
    """The boundary, as ``execute_chapter`` uses it: begin, execute, record."""
    begun = inputs.begin()
    run()
    return begun.record(reads)[0]


def _digested_after(inputs: ChapterInputs, reads: Reads, run: Callable[[], None]) -> str:
    """The rule before the change (5bf98bf's parent): the reads digested from the data as it is after the run."""
    run()
    return inputs.digest(reads)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=CASE)
def test_what_a_chapter_read_is_fixed_before_it_runs(case):
    assert _holds(case, _fixed_before)


def test_the_rule_before_the_change_fails_the_same_property():
    counterexample = find(CASE, lambda case: not _holds(case, _digested_after), settings=settings(max_examples=500))
    _state, reads, landings = counterexample
    assert landings and (reads.files or reads.dirs or any(x.kind == "outside" for x in landings))


def test_the_build_records_through_the_boundary():
    """``execute_chapter`` fixes the data before the kernel starts and records through it (no second rule)."""
    import inspect

    from verifylab.publish import build

    text = inspect.getsource(build.execute_chapter)
    assert text.index("inputs.begin()") < text.index("papermill.execute_notebook(")
    assert "begun.record(reads)" in text and ".digest(reads" not in text
