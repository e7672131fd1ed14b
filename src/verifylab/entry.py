"""The ``verifylab`` console entry point. A pure command — ``model whatif|speculation|reconcile|pass``, ``box --plan``
without ``--verify`` and ``box --probe RUN`` (with the page it writes) — gives an answer that is a function of its
arguments, the files they name, the data folder, the code, the installed packages and the terminal; such an answer
is kept on disk (``answers/`` in the cache folder of :mod:`verifylab.store.derived_disk`, read and written through
:mod:`verifylab.store.cache_folder`: the folder checked, every entry authenticated) and given again, without
importing the model, while none of them changed; what it prints is stripped of every terminal control sequence but
colours, and it writes only its page's own files into the page's folder. Everything else runs the typer app as it is.
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
from verifylab.redact import strip_terminal_codes
from verifylab.store.cache_folder import CacheFolder
from verifylab.store.derived_disk import CACHE_ENV, cache_folder, open_cache
from verifylab.store.digests import code_digest, data_digest, installed_stamp

FORMAT = 2  # 2: authenticated entries
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


def answer_name(argv: list[str]) -> str | None:
    """The name this call's answer is kept under, keyed by everything it is made of; None where it is not to be
    kept."""
    if cache_folder() is None or not is_pure(argv):
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
    return f"{hashlib.sha256(chr(0).join(record).encode()).hexdigest()}.json"


def kept_answer(payload: bytes) -> tuple[str, dict[str, str]] | None:
    """A kept answer as it may be given: its printed text stripped of every control sequence but colours, and only
    its page's own files (:data:`PAGE_FILES`, by name); None where it does not read as one."""
    try:
        kept = json.loads(payload.decode("utf-8"))
        stdout, files = kept["stdout"], kept["files"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(stdout, str) or not isinstance(files, dict):
        return None
    page = {name: files[name] for name in PAGE_FILES if isinstance(files.get(name), str)}
    return strip_terminal_codes(stdout, keep_colour=True), page


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


def _keep(folder: CacheFolder, name: str, answer: str, page: Path | None) -> None:
    """Write the answer and its page's files (whole, then renamed into place); remove the oldest answers beyond
    :data:`KEPT_ANSWERS`."""
    try:
        files = {each: (page / each).read_text(encoding="utf-8") for each in PAGE_FILES} if page else {}
        folder.write(name, json.dumps({"stdout": answer, "files": files}).encode("utf-8"))
        for old, _ in folder.entries(".json")[KEPT_ANSWERS:]:
            folder.remove(old)
    except Exception:  # a cache that cannot be written costs the next call its time, nothing else
        pass


def main() -> None:
    """``verifylab``: a kept answer where there is one, else the app (a pure call's answer is then kept)."""
    argv = sys.argv[1:]
    try:
        name = answer_name(argv)
    except OSError:
        name = None  # a named file that cannot be read: the command itself says so
    folder = open_cache("answers") if name is not None else None
    page = page_folder(argv)
    payload = folder.read(name) if folder is not None and name is not None else None
    answer = kept_answer(payload) if payload is not None else None
    if answer is not None:
        stdout, files = answer
        try:
            for each, text in files.items():  # the page first: the answer names it
                if page is not None:
                    atomic_write_text(page / each, text)
            sys.stdout.write(stdout)
            sys.stdout.flush()
            if folder is not None:
                folder.close()
            return
        except OSError:
            pass  # the page cannot be written: the command computes it again and says what is wrong
    from verifylab.cli import app

    if folder is None or name is None:
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
            _keep(folder, name, tee.copy.getvalue(), page)
        folder.close()
