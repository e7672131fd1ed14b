"""The commands the project prints for its reader to run (README, CONTRIBUTING, every command's ``--help``, the book's
pages), found and checked by class (#82): ``run`` (a replay command, run as printed in a fresh folder that holds the
checkout's data and examples), ``parse`` (argv through verifylab's own parser: a command that needs a GPU box, a
server or a cluster, or one named in passing; ``make``, ``pip``, ``ray``, ``git`` and script lines checked against
the real targets, extras, flags and paths; an SGLang launch line against the audited flags of the version it is
built for) and ``placeholder`` (a declared ``<...>``-style token the reader replaces: parsed like the rest; a
template token of the build, ``@NAME@``, is never printed). :func:`check` returns what fails, one line each."""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("verifylab", "make", "pip", "python", "python3", "bash", "papermill", "ray", "git")
TEMPLATE = re.compile(r"@[A-Z][A-Z_]*@")  # a token a build or a script fills in (sed): never shown to a reader
# the tokens a reader replaces, each declared with what it stands for
PLACEHOLDERS = {
    "PYTHON": "the interpreter of the box's SGLang environment",
    "SRC": "a source tree of SGLang",
    "HEAD:6379": "the Ray head's address",
    "RUN": "a stored run id",
    "NAME": "an exhibit's name",
    "DIR": "a folder",
    "[DIR]": "an optional folder",
    "FILE": "a file",
    "URL": "a server's address",
    "VARIANT": "a variant's name",
    "/models/kimi/config.json": "the served model's config on the box",
    "/models/kimi": "the served model on the box",
    "params.yaml": "a parameters file of your own",
    "campaign.yaml": "a campaign file of your own",
    "curve.csv": "an all-reduce curve file of your own",
    "/models/eagle3": "the EAGLE-3 draft on the box",
    "site-packages": "an installed environment's packages",
    "/opt/venv/lib/python3.12/site-packages": "an installed environment's packages",
    "/tmp/sglang_profile/": "the folder SGLang's profiler wrote",
    "head.lab:6379": "the Ray head's address",
}
# verifylab commands parsed but never replayed here, each with why (the rest of a printed command is run as printed)
PARSED_ONLY = {
    ("book",): "renders the whole book (minutes): the built_book fixture of make test runs it",
    ("run",): "executes every chapter (live on a box, or replay: minutes)",
    ("runs", "migrate"): "rewrites the stored runs in place",
    ("comm", "verdict"): "--write rewrites a stored run's verdict",
    ("gates", "matrix"): "downloads the published wheels",
    ("gates", "audit"): "reads an installed SGLang",
    ("gates", "apply"): "patches an installed SGLang",
    ("gates", "verify"): "imports an installed SGLang",
    ("gates", "revert"): "patches an installed SGLang",
    ("gates", "status"): "reads an installed SGLang",
    ("serve",): "starts SGLang on GPUs",
    ("bench",): "drives a running server",
    ("sweep",): "drives a running server",
    ("synth-verify",): "runs on GPUs",
    ("comm", "probe"): "probes GPUs",
    ("fleet", "run"): "schedules a Ray cluster",
}
NEEDS_A_BOX = ("--gpus", "--server", "--url")  # options that probe GPUs or drive a server: parsed, never run here
GIT_COMMANDS = {"clone", "log", "show", "diff", "status", "worktree", "checkout", "switch", "pull", "fetch"}


@dataclass(frozen=True)
class Printed:
    """One command as printed: where (``README.md``, ``--help of box``, a page), its text and its words."""

    where: str
    text: str
    argv: tuple[str, ...]
    inline: bool = False  # named in passing in prose (a reference: parsed, never run)

    @property
    def placeholders(self) -> list[str]:
        return [a for a in self.argv if is_placeholder(a)]


def is_placeholder(word: str) -> bool:
    """A word the reader replaces: one of :data:`PLACEHOLDERS`, a ``<...>`` token, an elision, or a name in capitals
    (``RUN_ID``, ``PATH...``, ``FILE.svg``: the help's convention for a value)."""
    return word in PLACEHOLDERS or re.fullmatch(r"<[^<>]+>|\.\.\.|[A-Z][A-Z0-9_]*(\.\.\.|\.[a-z]+)?", word) is not None


def _commands_of(line: str) -> list[tuple[str, ...]]:
    """A shell line's commands (split at ``&&``, ``;`` and ``|``; a redirection and its file dropped), each after any
    ``VAR=value`` prefix, those of :data:`PROGRAMS` only (a bare program name is no command)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars="&;|<>")
        lexer.whitespace_split, lexer.commenters = True, "#"
        words = list(lexer)
    except ValueError:
        return []
    commands, current, skip = [], [], False
    for word in [*words, ";"]:
        if skip:
            skip = False
        elif word in (">", ">>", "<"):
            skip = True
        elif word in ("&&", ";", "|", "||", "&"):
            while current and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", current[0]):
                current = current[1:]
            if len(current) > 1 and current[0] in PROGRAMS:
                commands.append(tuple(current))
            current = []
        else:
            current.append(word)
    return commands


def _summary(span: str) -> str:
    """A command named in prose as a summary (``verifylab gates audit / apply``, ``env [--json]``,
    ``RUN_ID\\|FILE``) as the words of one command line: alternatives joined by ``|``, optional brackets dropped."""
    span = span.replace("\\|", "|").replace("…", "...")
    span = re.sub(r"(?<=\w) / (?=\w)", "|", span)
    return re.sub(r"\[(--?[\w-]+(?: [^\]]+)?)\]", r"\1", span)


def _alternatives(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """``verifylab gates audit|apply`` as each command it names (a word of ``a|b`` alternatives, no flag, no path)."""
    out: list[tuple[str, ...]] = [()]
    for word in argv:
        plain = "|" in word and not word.startswith(("-", "{")) and "/" not in word
        choices = word.split("|") if plain else [word]
        out = [(*done, choice) for done in out for choice in choices]
    return out


def commands_in(text: str, where: str, *, prose: bool = True) -> list[Printed]:
    """The commands ``text`` prints: each line of a fenced ``bash`` block (continuations joined), each line of an
    indented example, and (``prose``) each inline ```code``` span that starts with a program."""
    found: list[Printed] = []
    joined = re.sub(r"\\[ \t]*\n[ \t]*", " ", text)
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", joined, re.S)
    outside = re.sub(r"```.*?```", "", joined, flags=re.S)
    lines = [line for block in blocks for line in block.splitlines()]
    lines += [line for line in outside.splitlines() if re.match(r"^ {2,}\S", line)]  # an indented example
    for line in lines:
        for argv in _commands_of(line.strip()):
            found += [Printed(where, line.strip(), a) for a in _alternatives(argv)]
    if prose:
        for found_span in re.finditer(r"(?<!`)`([^`]{1,400})`(?!`)", outside):
            span = " ".join(found_span.group(1).split())  # a span the text wrapped
            example = "Example" in outside[max(0, found_span.start() - 12) : found_span.start()]  # an example shown
            for argv in _commands_of(_summary(span)):
                found += [Printed(where, span, a, inline=not example) for a in _alternatives(argv)]
    return found


def help_commands() -> list[Printed]:
    """Every example line of every ``verifylab`` command's help (its text, its options' help)."""
    import typer

    from verifylab.cli import app

    found: list[Printed] = []

    def walk(command, path: list[str]) -> None:
        helps = [getattr(p, "help", "") or "" for p in command.params]
        text = "\n".join([command.help or "", command.epilog or "", *helps]).replace("\\[", "[")  # rich's escape
        found.extend(commands_in(text, f"--help of verifylab {' '.join(path)}".strip()))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def _subcommand(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``verifylab comm probe --x`` -> ``("comm", "probe")``: the command words before the first option."""
    words = []
    for word in argv[1:]:
        if word.startswith("-"):
            break
        words.append(word)
    return tuple(words)


def _root():
    import typer

    from verifylab.cli import app

    return typer.main.get_command(app)


def parse_verifylab(argv: tuple[str, ...]) -> str:
    """``argv`` through verifylab's parser, every group and command to the last (options, choices, types, required
    arguments): "" where it parses (or asks for help), else the parser's message."""
    import contextlib
    import io

    command = _root()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            ctx = command.make_context("verifylab", list(argv[1:]))
            while hasattr(command, "commands"):
                rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
                if not rest:
                    break
                name, command, rest = command.resolve_command(ctx, rest)
                ctx = command.make_context(name, rest, parent=ctx)
    except Exception as exc:  # the parser's own error (no such option, a bad choice, a missing argument)
        if getattr(exc, "exit_code", None) == 0:
            return ""  # --help
        return " ".join(str(getattr(exc, "message", "") or exc).split()) or type(exc).__name__
    return ""


def names_resolve(argv: tuple[str, ...]) -> str:
    """For a command named in passing or with placeholders: its words name a command, and each ``--option`` it
    shows is one of that command's ("" where they do, else what does not)."""
    command, words = _root(), list(argv[1:])
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        name = words.pop(0)
        if name not in command.commands:
            return f"no command {name!r} (its commands: {', '.join(command.commands)})"
        command = command.commands[name]
    known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known]
    return f"no option {', '.join(unknown)} of {command.name}" if unknown else ""


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M))


def _extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])


def _check_other(p: Printed) -> str:
    """A line of another program checked against what it names: a Makefile target, a pyproject extra installed from
    this checkout, a script in it, a papermill parameter of the chapter, a ray or git subcommand."""
    program, args = p.argv[0], p.argv[1:]
    if program == "make":
        missing = [a for a in args if not a.startswith("-") and "=" not in a and a not in _make_targets()]
        return f"no make target {', '.join(missing)}" if missing else ""
    if program == "pip":
        if args[:1] != ("install",):
            return ""
        named = [a for a in args[1:] if not a.startswith("-")]
        bad = [a for a in named if not re.fullmatch(r"\.(\[[\w,-]+\])?", a)]
        if bad:
            return f"installs {', '.join(bad)}: not this checkout (an unpublished name: nothing, or someone else's)"
        extras = {e for a in named for e in re.findall(r"[\w-]+", a.partition("[")[2])}
        return f"no extra {', '.join(sorted(extras - _extras()))}" if extras - _extras() else ""
    if program in ("python", "python3", "bash"):
        if args[:1] == ("-m",) or args[:1] == ("-c",) or not args:
            return ""
        script = args[0]
        return "" if (ROOT / script).is_file() else f"no file {script} in the checkout"
    if program == "ray":
        return "" if args[:1] in (("start",), ("stop",), ("status",)) else f"not a ray command we print: {args[:1]}"
    if program == "git":
        return "" if args[:1] and args[0] in GIT_COMMANDS else f"not a git command: {args[:1]}"
    if program == "papermill":
        return _check_papermill(args)
    return f"{program}: no check for this program"


def _check_papermill(args: tuple[str, ...]) -> str:
    """``papermill IN OUT -p name value ...``: the chapter's parameters (the notebook ``verifylab notebook NN IN``
    writes: its number in the name) validate, as the notebook's first cell will."""
    from verifylab.chapters.registry import chapter_named, chapter_parameters

    notebook = next((a for a in args if not a.startswith("-")), "")
    number = re.search(r"(\d\d)", Path(notebook).name)
    if number is None:
        return "papermill: no chapter number in the notebook's name"
    values, rest = {}, list(args[args.index(notebook) + 1 :])
    while rest:
        flag = rest.pop(0)
        if flag in ("-p", "--parameters") and len(rest) >= 2:
            name, value = rest.pop(0), rest.pop(0)
            values[name] = value
    try:
        chapter_parameters(chapter_named(number.group(1)).name, **values)
    except Exception as exc:
        return " ".join(str(exc).split())
    return ""


def _unfilled_files(p: Printed) -> str:
    """The first file of the checkout the command names that holds a template token of the build ("" for none)."""
    for word in p.argv[1:]:
        path = ROOT / word
        small = "/" in word and not word.startswith("-") and path.is_file() and path.stat().st_size < 1 << 20
        if small and TEMPLATE.search(path.read_text(encoding="utf-8", errors="replace")):
            return word
    return ""


def runs_here(p: Printed) -> bool:
    """Whether a verifylab command that parses is replayed (run as printed): no placeholder, no GPU box, server or
    cluster, nothing :data:`PARSED_ONLY` says."""
    if p.placeholders or any(flag in p.argv for flag in NEEDS_A_BOX):
        return False
    if "--verify" in p.argv and "--dry-run" not in p.argv:
        return False
    sub = _subcommand(p.argv)
    return not any(sub[: len(c)] == c for c in PARSED_ONLY)


def check(printed: list[Printed], run: Callable[[Printed], str] | None = None) -> list[str]:
    """What fails, one line each (``where: command: why``): every verifylab command is parsed (one named in passing
    or with placeholders: its names resolved), and ``run(p)`` replays each that :func:`runs_here` ("" when it
    succeeded)."""
    failures = []
    for p in printed:
        if (token := TEMPLATE.search(p.text)) is not None:
            why = f"a template token of the build ({token.group(0)}) printed as if it were the reader's"
        elif unfilled := _unfilled_files(p):
            why = f"{unfilled}: a template a script fills in (its tokens unfilled), named as if ready to use"
        elif p.argv[0] != "verifylab":
            why = _check_other(p)
        elif p.placeholders:
            why = names_resolve(p.argv)
        elif why := parse_verifylab(p.argv):
            if p.inline:  # named in passing (``box --server``): a reference to a command and its options
                why = names_resolve(p.argv)
        elif run is not None and not p.inline and runs_here(p):
            why = run(p)
        if why:
            failures.append(f"{p.where}: {p.text}: {why}")
    return failures
