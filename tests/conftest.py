"""Shared fixtures: the project root, a temporary run store, and one built book per session (in a temp folder)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from functools import partial
from http.server import ThreadingHTTPServer
from multiprocessing.util import Finalize
from pathlib import Path

import pytest

from .browsing import (
    CHART_MARKS,
    CHROMIUM,
    FIRST_SCREEN,
    FIRST_SCREENS,
    FIRST_USES,
    GLOSSARY_TERMS,
    LAUNCH_ARGS,
    LAYOUT,
    LONGEST,
    PHONE_WIDTH,
    READ_PAGES,
    READING,
    SCREEN_HEIGHT,
    SCREEN_WIDTHS,
    SIDEWAYS,
    UNFOLDED_SCREENS,
    QuietHandler,
    Tab,
    offline_proxy,
    pages,
)
from .projects import project_copy

ROOT = Path(__file__).resolve().parents[1]

# The system's temporary folder, as the tests (and every process they start) see it, is a folder of this session's
# own; at the end it must hold nothing but pytest's tmp_path folders (and, under xdist, the workers' own such
# folders): anything else is a file a test or the code under test left behind (#41 item 6).
# Each session makes its own folder, fresh (two clones, a worktree or two users' sessions on one machine never share
# one, and no session removes another's); an xdist worker's lives inside its controller's (#54 item 2).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    SESSION_TMP = Path(tempfile.gettempdir()) / f"w-{_WORKER}"  # inside the controller's folder (its TMPDIR)
    SESSION_TMP.mkdir(parents=True, exist_ok=True)
else:
    SESSION_TMP = Path(tempfile.mkdtemp(prefix=f"verifylab-tests-{os.getuid()}-"))
os.environ["TMPDIR"] = str(SESSION_TMP)
tempfile.tempdir = None  # tempfile reads TMPDIR again
# The interactive commands' caches (verifylab.entry, verifylab.store.derived_disk) stay off in every process a test
# starts: a test asserts what a command computes, and leaves nothing in the user's cache folder; the tests of the
# caches turn them on in a folder of their own.
os.environ["VERIFYLAB_CACHE"] = "off"

# The property-based tests (hypothesis) generate hostile inputs for the boundaries: their verdicts are behaviour, never
# time (no deadline: CI's two loaded cores must not fail them), the same examples every run (derandomized: a failure
# reproduces), and no example database written into the checkout.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("verifylab", deadline=None, database=None, derandomize=True)
_hypothesis_settings.load_profile("verifylab")


def leftovers(folder: Path) -> list[str]:
    """What a test session left in its temporary folder besides pytest's own folders; an xdist worker's folder
    (inside its controller's) is looked into by the controller, whose exit status is the session's."""
    own = (
        "pytest-of-",
        "w-gw",  # an xdist worker's folder: read below, as its own
        "pymp-",  # multiprocessing's own folder: it removes it when the process exits, after this check
        "torchinductor_",  # torch's kernel cache, kept by torch on purpose between processes
        "uv-setuptools-",  # uv's lock on its cached build backend, kept by uv on purpose
    )
    if not folder.is_dir():
        return []
    left = [p.name for p in folder.iterdir() if not p.name.startswith(own)]
    for worker in folder.glob("w-gw*"):
        left += [f"{worker.name}/{name}" for name in leftovers(worker)]
    return sorted(left)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _WORKER:
        return  # the controller reads this worker's folder when every worker is done (a worker's status is lost)
    left = leftovers(SESSION_TMP)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"tests left {len(left)} item(s) in the temporary folder: {', '.join(left[:20])}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:  # the session's own folder goes with it (a failing session's stays, to be read): at exit, after
        # multiprocessing removed its own pymp- folder in it (finalisers of lower priority run later; removed
        # now, multiprocessing's finaliser printed a FileNotFoundError at exit)
        Finalize(None, shutil.rmtree, args=(SESSION_TMP,), kwargs={"ignore_errors": True}, exitpriority=-101)


SEEDS = ROOT.parent / "shared" / "seeds"
BOOK_FIXTURES = {"smoke_run", "built_book"}  # a test using one builds the book: the slow lane


# other costly shared fixtures (a module's, computed once per worker that runs one of its tests): one worker each
PROCESS_FIXTURES = {"gloo_61", "two_ranks", "cluster"}  # fixtures that start processes: their tests are slow
SHARED_BUILDS = {
    "gloo_61": "gloo-traces",
    "cluster": "ray-cluster",
    "two_ranks": "probe-ranks",
    "computed": "one-value",
}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Every test that needs the built book, or a fixture that starts processes, is ``slow`` (``make check`` leaves
    it to ``make test``). When tests
    run in parallel (``-n``, ``--dist loadgroup``) the tests of one costly shared fixture run in one worker, so
    the book (and each other such fixture) is built once. Marked as each test is collected: xdist reads the
    groups before any ``pytest_collection_modifyitems`` of a conftest runs."""
    used = set(getattr(item, "fixturenames", ()))
    if PROCESS_FIXTURES & used:  # their fixture starts processes (ranks, a cluster): the slow lane's by definition
        item.add_marker(pytest.mark.slow)
    if BOOK_FIXTURES & used:
        item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group("book"))
    else:
        for fixture in sorted(used & set(SHARED_BUILDS)):
            item.add_marker(pytest.mark.xdist_group(SHARED_BUILDS[fixture]))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shipped():
    """The shipped data folder as one Evidence for the whole session: tests that only read it share what it derives
    (the case study, the fits) instead of deriving it again; a test that changes data uses ``data_dir``."""
    from verifylab.store.evidence import Evidence

    return Evidence(ROOT / "data")


@pytest.fixture()
def data_dir(tmp_path: Path) -> Path:
    """A copy of the shipped data folder (reference + runs) that tests may change."""
    target = tmp_path / "data"
    shutil.copytree(ROOT / "data", target)
    return target


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The one book build of a test session, made as a user makes it: ``verifylab run --params
    examples/params-smoke.yaml`` (replay) on a copy of the project in a temporary folder."""
    from typer.testing import CliRunner

    from verifylab.cli import app

    root = project_copy(ROOT, tmp_path_factory.mktemp("book"))
    params = ROOT / "examples" / "params-smoke.yaml"
    return root, CliRunner().invoke(app, ["run", "--params", str(params), "--root", str(root)])


@pytest.fixture(scope="session")
def built_book(request) -> Path:
    """The session's built book (``_build/html``); VERIFYLAB_BOOK_HTML reuses a build (nothing is built then)."""
    reuse = os.environ.get("VERIFYLAB_BOOK_HTML")
    if reuse and (Path(reuse) / "index.html").is_file():
        return Path(reuse)
    root, result = request.getfixturevalue("smoke_run")
    assert result.exit_code == 0, result.output
    return root / "_build" / "html"


@pytest.fixture(scope="session")
def book_url(built_book: Path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(built_book)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@contextmanager
def _chromium():
    """Headless Chromium for as long as the block runs. Playwright's sync API keeps an event loop in this
    thread while it is open: a fixture that holds it must not outlive the module that needs it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, offline_proxy() as proxy:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, proxy=proxy)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def browser():
    with _chromium() as instance:
        yield instance


@pytest.fixture(scope="session")
def visited(book_url, built_book) -> dict[str, dict]:
    """Every page of the book opened once at 1400 px: console errors, blocked requests, marks per chart and, for
    the pages read as a reader reads them (``READ_PAGES``), what the reader sees at each width — shared by the
    page-level tests. The
    browser closes as soon as the pages are read. It runs in a thread of its own: a module's ``browser`` fixture
    may hold playwright's event loop in this one, and a second sync playwright here would refuse to start."""
    from concurrent.futures import ThreadPoolExecutor

    def visit() -> dict[str, dict]:
        with _chromium() as browser:
            return _visit(browser, book_url, built_book)

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(visit).result()


def _visit(browser, book_url: str, built_book: Path) -> dict[str, dict]:
    tab = Tab(browser)
    glossary, *_ = tab.open(f"{book_url}/book/glossary.html")
    terms = glossary.evaluate(GLOSSARY_TERMS)
    seen = {}
    for path in pages(built_book):
        rel = path.relative_to(built_book).as_posix()
        page, errors, blocked = tab.open(f"{book_url}/{rel}")
        seen[rel] = {"errors": errors, "blocked": blocked, "marks": page.evaluate(CHART_MARKS)}
        page.set_viewport_size({"width": PHONE_WIDTH, "height": SCREEN_HEIGHT})  # a phone: nothing scrolls sideways
        seen[rel]["sideways"] = page.evaluate(SIDEWAYS)
        page.set_viewport_size({"width": LONGEST[0], "height": LONGEST[1]})  # a laptop, every fold open
        seen[rel]["length"] = page.evaluate(UNFOLDED_SCREENS, LONGEST[1])
        page.set_viewport_size({"width": 1400, "height": 1000})
        if rel not in READ_PAGES:  # a run's page, an index: opened, not read (a third of the visit's CPU)
            continue
        layout, first_screen = {}, {}
        for width in SCREEN_WIDTHS:  # a laptop and a narrow window
            page.set_viewport_size({"width": width, "height": SCREEN_HEIGHT})
            layout[width] = page.evaluate(LAYOUT)
        for width, height in FIRST_SCREENS:
            page.set_viewport_size({"width": width, "height": height})
            first_screen[width] = page.evaluate(FIRST_SCREEN)
        page.set_viewport_size({"width": 1400, "height": 1000})
        seen[rel] |= {
            "reading": page.evaluate(READING),
            "layout": layout,
            "first_screen": first_screen,
            "unlinked_terms": page.evaluate(FIRST_USES, terms),
            "terms_checked": len(terms),
        }
    tab.page.close()
    return seen
