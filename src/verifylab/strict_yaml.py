"""YAML as verifylab reads its input files (parameters, prompts): a key given twice is an error (the second
``mode:`` silently won), and anchors or aliases are refused (a parameters file needs none, and an alias bomb
expands a few lines into gigabytes). Errors are one line and never echo more than :data:`SHOWN` characters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from verifylab.intake import OutsideFileError, read_outside_text

MAX_BYTES = 1_000_000  # a parameters or prompts file is a few kilobytes
SHOWN = 200


class StrictYAMLError(ValueError):
    """The text is not YAML verifylab accepts; the message is one line."""


class _UniqueKeyLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise StrictYAMLError(
                f"line {event.start_mark.line + 1}: anchors and aliases (&name, *name) are refused: write the value out"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise StrictYAMLError(f"line {key_node.start_mark.line + 1}: key {str(key)[:SHOWN]!r} is given twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_strict_yaml(text: str) -> Any:
    """``text`` parsed as YAML with unique keys and no aliases; :class:`StrictYAMLError` (one line) otherwise."""
    if len(text) > MAX_BYTES:
        raise StrictYAMLError(f"{len(text)} characters: more than the {MAX_BYTES} an input file may hold")
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise StrictYAMLError(first[:SHOWN] + ("…" if len(first) > SHOWN else "")) from None


def read_strict_yaml_file(path: Path, kind: str, error: type[Exception]) -> Any:
    """A ``kind`` file (parameters, campaign) as :func:`load_strict_yaml` reads it ({} when empty); a missing file,
    bytes that are not UTF-8 or YAML it refuses raise ``error`` with one line naming the file."""
    try:
        data = load_strict_yaml(read_outside_text(path, kind, limit=MAX_BYTES)) or {}
    except OutsideFileError as exc:
        raise error(str(exc)) from None
    except StrictYAMLError as exc:
        raise error(f"{path}: not a {kind} file verifylab accepts ({exc})") from None
    if not isinstance(data, dict):  # its content is never echoed: it may be any file at all
        raise error(f"{path}: not a {kind} file: its top level is a {type(data).__name__}, not 'name: value' lines")
    return data
