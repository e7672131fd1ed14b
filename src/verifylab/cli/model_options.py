"""The arguments ``verifylab model speculation`` parses into its ask, each refused in one line naming the option."""

from __future__ import annotations

import re
from typing import Any

from verifylab.errors import ModelInputError


def matched_accept_high(result: Any) -> float:
    """The highest accept length an answer from a public matrix assumed (its inputs name the page's range)."""
    text = str(result.inputs.get("accept_length", ""))
    numbers = [float(n) for n in re.findall(r"\d+\.\d+", text.split("(")[0])]
    return max(numbers) if numbers else float("inf")


def regime_of(text: str):
    """``--regime`` in either spelling (``healthy-p2p`` or ``healthy P2P``), refused in one line otherwise."""
    from verifylab.vocab import regime_named

    try:
        return regime_named(text)
    except ValueError as exc:
        raise ModelInputError(str(exc)) from None


def gpu_key(name: str) -> str:
    """``RTX_PRO_6000`` -> ``rtx-pro-6000``: the GPU table's key as ``--gpu`` spells it."""
    from verifylab.model.answers.speculation_answer import gpu_key as table_key

    return table_key(name)


def choice(option: str, value: str, allowed: list[str]) -> str:
    if value not in allowed:
        raise ModelInputError(f"{option} {value!r}: choose {', '.join(allowed)}")
    return value


def stream_counts(text: str) -> list[int]:
    """``1,2,4`` as sorted, distinct stream counts (each 1 to 100000)."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ModelInputError(f"--streams {text!r}: whole numbers separated by commas, e.g. 1,2,4,8") from None
    if not counts or counts[0] < 1 or counts[-1] > 100_000:
        raise ModelInputError(f"--streams {text!r}: stream counts from 1 to 100000")
    return counts
