"""The ``verifylab`` console entry point. A pure command — ``model whatif|speculation|reconcile|pass``, ``box --plan``
without ``--verify`` and ``box --probe RUN`` (with the page it writes) — gives an answer that is a function of its
arguments, the files they name, the data folder, the code, the installed packages and the terminal; such an answer
is kept on disk (``answers/`` in the cache folder of :mod:`verifylab.store.derived_disk`) and given again, without
importing the model, while none of them changed. Everything else runs the typer app as it is.
``VERIFYLAB_CACHE=off`` turns both caches off."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import shutil
import sys
from pathlib import Path

from verifylab.iorw import atomic_write_text
from verifylab.store.derived_disk import CACHE_ENV, cache_folder
from verifylab.store.digests import code_digest, data_digest, installed_stamp

FORMAT = 1
PURE = {("model", "whatif"), ("model", "speculation"), ("model", "reconcile"), ("model", "pass")}
ACTS = ("--verify", "--server", "--gpus", "--dry-run", "--run-id", "--help", "-h", "--install-completion", "--label")
PAGE_FILES = ("decision.html", "decision.json")  # what `box --probe RUN` writes beside its answer
ENVIRONMENT = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM", "TTY_COMPATIBLE")
KEPT_ANSWERS = 64  # the newest answers kept; older ones are removed as new ones are written
MAX_NAMED_BYTES = 64 << 20  # a named file or folder larger than this is not digested: the call is not cached


def _value(argv: list[str], option: str) -> str | None:
    """An option's value as given (``--x V`` or ``--x=V``), or None."""
    for k, v in itertools.pairwise(argv):
        if k == option:
            return v
    return next((a.split("=", 1)[1] for a in argv if a.startswith(f"{option}=")), None)


def is_pure(argv: list[str]) -> bool:
    """Whether this call only gives an answer (no measurement, no help; the only files it writes are its page's)."""
    if any(a.split("=")[0] in ACTS for a in argv):
        return False
    if tuple(argv[:2]) in PURE:
        return "--out" not in argv
    return argv[:1] == ["box"] and ("--plan" in argv or _value(argv, "--probe") is not None)


def page_folder(argv: list[str]) -> Path | None:
    """Where ``box --probe RUN`` writes its page (None: the call writes none)."""
    if argv[:1] != ["box"] or "--plan" in argv or (probe := _value(argv, "--probe")) is None:
        return None
    return Path(_value(argv, "--out") or Path("box") / probe)


def _keyed(variable: str) -> bool:
    """Whether an environment variable can change an answer (the cache's own folder cannot)."""
    return (variable.startswith("VERIFYLAB_") and variable != CACHE_ENV) or variable in ENVIRONMENT


def _named_digest(path: Path) -> str | None:
    """The bytes of a file the call names, or of a folder's ``config.json`` (a model folder: all the commands read
    of it), else of every file under the folder (None: too large to be worth it)."""
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    if sum(p.stat().st_size for p in files) > MAX_NAMED_BYTES:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def answer_file(argv: list[str]) -> Path | None:
    """Where this call's answer is kept, keyed by everything it is made of; None where it is not to be kept."""
    folder = cache_folder()
    if folder is None or not is_pure(argv):
        return None
    data = Path(_value(argv, "--data-dir") or "data")
    if not data.is_dir():
        return None  # the command says what is wrong
    named = {}
    page = page_folder(argv)
    for arg in argv:
        if Path(arg.split("=", 1)[-1]) in (page, data):
            continue  # what the call writes is no input of it; the data folder is digested whole below
        candidate = Path(arg.split("=", 1)[-1])
        if arg and candidate.exists():
            digest = _named_digest(candidate)
            if digest is None:
                return None
            named[arg] = digest
    record = [
        str(FORMAT),
        repr(argv),
        os.getcwd(),
        repr(sorted(named.items())),
        data_digest(data),
        code_digest(),
        sys.version,
        installed_stamp(),
        repr(sorted((k, v) for k, v in os.environ.items() if _keyed(k))),
        str(sys.stdout.isatty()),
        str(shutil.get_terminal_size() if sys.stdout.isatty() else ""),
    ]
    return folder / "answers" / f"{hashlib.sha256(chr(0).join(record).encode()).hexdigest()}.json"


class _Tee(io.TextIOBase):
    """Standard output as it is, and a copy of what was written."""

    def __init__(self, real) -> None:
        self.real, self.copy = real, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return self.real.isatty()

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.real.encoding


def _keep(path: Path, answer: str, page: Path | None) -> None:
    """Write the answer and its page's files (whole, then renamed into place); remove the oldest answers beyond
    :data:`KEPT_ANSWERS`."""
    try:
        files = {name: (page / name).read_text(encoding="utf-8") for name in PAGE_FILES} if page else {}
        atomic_write_text(path, json.dumps({"stdout": answer, "files": files}))
        kept = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in kept[KEPT_ANSWERS:]:
            old.unlink(missing_ok=True)
    except Exception:  # a cache that cannot be written costs the next call its time, nothing else
        pass


def main() -> None:
    """``verifylab``: a kept answer where there is one, else the app (a pure call's answer is then kept)."""
    argv = sys.argv[1:]
    try:
        path = answer_file(argv)
    except OSError:
        path = None  # a named file that cannot be read: the command itself says so
    page = page_folder(argv)
    if path is not None and path.is_file():
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            for name, text in kept["files"].items() if page is not None else ():  # the page first: the answer names it
                atomic_write_text(page / name, text)
            sys.stdout.write(kept["stdout"])
            sys.stdout.flush()
            return
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a kept answer that does not read back: computed again
    from verifylab.cli import app

    if path is None:
        app()
        return
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    code: object = 1  # an exception that is not an exit: nothing kept
    try:
        app()
        code = 0
    except SystemExit as stop:
        code = stop.code
        raise
    finally:
        sys.stdout = tee.real
        if code in (0, None):
            _keep(path, tee.copy.getvalue(), page)
