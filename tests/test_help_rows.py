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
