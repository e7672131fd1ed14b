"""Facts shared across verifylab. For now: one way to compare package versions."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def version_at_least(version: str | None, minimum: str) -> bool:
    """Whether ``version`` (PEP 440: ``0.6.17rc1`` is *before* ``0.6.17``) is at least ``minimum``; an absent or
    unparsable version is not."""
    if not version:
        return False
    try:
        return Version(version) >= Version(minimum)
    except InvalidVersion:
        return False


def version_key(version: str) -> Version | tuple:
    """A sort key for package versions (unparsable ones sort first)."""
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)
