"""#54: every command's help reads as a user expects: a flag's row shows no value type (typer prints ``<bool>`` for
each by default), an option that takes a value still shows its type."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from verifylab.cli import app


def _commands(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [(*prefix, c.name or c.callback.__name__.replace("_", "-")) for c in group.registered_commands]
    for sub in group.registered_groups:
        found += _commands(sub.typer_instance, (*prefix, sub.name))
    return found


def test_no_help_row_shows_a_type_for_a_flag():
    commands = _commands(app)
    assert ("box",) in commands and ("model", "speculation") in commands
    for command in commands:
        text = CliRunner().invoke(app, [*command, "--help"], terminal_width=100).output
        assert "<bool>" not in text, command
    assert "<str>" in CliRunner().invoke(app, ["box", "--help"], terminal_width=100).output  # a value keeps its type


def _command_rows(output: str) -> list[str]:
    """The lines of a help's Commands panel, between its frame's top and bottom."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line and line.startswith("╭"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("╰"))
    return [line.strip("│ ") for line in lines[start + 1 : end]]


def test_each_row_of_a_command_list_is_one_line_on_a_wide_terminal():
    """A row is its command's first sentence, whole (it broke where the docstring's lines broke)."""
    groups = [()] + [(sub.name,) for sub in app.registered_groups]
    for group in groups:
        output = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "2000"}).output
        rows = _command_rows(output)
        names = {c[len(group)] for c in _commands(app) if c[: len(group)] == group and len(c) > len(group)}
        names |= {sub.name for sub in app.registered_groups} if not group else set()
        assert rows and all(row.split(" ", 1)[0] in names for row in rows), (group, rows)
    rows = _command_rows(CliRunner().invoke(app, ["runs", "--help"], env={"COLUMNS": "2000"}).output)
    assert any(row.split() == ["show", "Print", "one", "run's", "manifest", "(validated)."] for row in rows), rows


def test_a_long_first_sentence_is_cut_before_its_first_clause_outside_brackets_and_code():
    from verifylab.cli import ROW_CHARS, first_sentence

    detail = "x" * ROW_CHARS
    text = f"Store the table (a: b; c) with `k: v`: {detail}; more.\nSecond line.\n\nA second paragraph."
    assert first_sentence(text) == "Store the table (a: b; c) with `k: v`."
    assert first_sentence("Print one run's\nmanifest. Example: `x`") == "Print one run's manifest."


def _help_paragraphs(output: str) -> list[list[str]]:
    """A help's text between its usage line and its first panel, as paragraphs of lines (rich's one-space margin
    removed)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.rstrip()[1:])
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def test_each_prose_paragraph_of_a_help_is_one_line_on_a_wide_terminal():
    """Prose is not broken where the docstring's lines broke (typer keeps them past the first paragraph): on a wide
    terminal a paragraph is one line, an ``Example`` line apart; an indented example command, YAML and a list of
    backquoted commands keep their lines."""
    commands = [*_commands(app), *[(sub.name,) for sub in app.registered_groups]]
    assert ("model", "whatif") in commands and ("fleet",) in commands
    for command in commands:
        output = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "2000"}).output
        for paragraph in _help_paragraphs(output):
            if any(line.startswith(" ") for line in paragraph) or all(line.startswith("`") for line in paragraph):
                continue  # a block: its lines are meant
            assert all(line.startswith("Example") for line in paragraph[1:]), (command, paragraph)
    fleet = _help_paragraphs(CliRunner().invoke(app, ["fleet", "--help"], env={"COLUMNS": "2000"}).output)
    assert fleet[2][:2] == ["campaign: pcie-vs-nvlink     # recorded in every run's manifest", "hosts:"]
