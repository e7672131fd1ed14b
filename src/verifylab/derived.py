"""Values derived from one body of evidence, computed once: a function marked :func:`derived` keeps what it
returned for ``(sources, *inputs)`` in that evidence's :class:`DerivedCache`, keyed by the function itself and its
explicit inputs (an account, a regime, a box: hashable values). Two callers with different inputs never share an
entry, and mypy sees every value's type (no string keys, no ``Any``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar


class DerivedCache:
    """What :func:`derived` functions computed from one evidence, by (function, inputs)."""

    def __init__(self) -> None:
        self._values: dict[tuple[Hashable, ...], Any] = {}

    def __len__(self) -> int:
        return len(self._values)

    def functions(self) -> set[str]:
        """The qualified names of the functions that stored a value (what a chapter derived)."""
        return {str(key[0]) for key in self._values}

    def value(self, key: tuple[Hashable, ...], compute: Callable[[], Any]) -> Any:
        if key not in self._values:
            self._values[key] = compute()
        return self._values[key]


class HasDerivedCache(Protocol):
    """Evidence that keeps derived values (``store.evidence.Evidence``, ``sources.SourcesInMemory``)."""

    @property
    def derived_cache(self) -> DerivedCache: ...


S = TypeVar("S", bound=HasDerivedCache)
P = ParamSpec("P")
R = TypeVar("R")


def derived(function: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """``function(sources, *inputs)`` computed once per evidence and inputs; an input that cannot be a key (a
    frame, a dict) is refused by name: pass what identifies it instead."""
    name = f"{function.__module__}.{function.__qualname__}"

    @functools.wraps(function)
    def cached(sources: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        key = (name, *args, *sorted(kwargs.items()))
        try:
            hash(key)
        except TypeError:
            kinds = ", ".join(type(a).__name__ for a in (*args, *kwargs.values()))
            raise TypeError(
                f"{name}: derived values are keyed by their inputs, and these ({kinds}) are not hashable"
            ) from None
        result: R = sources.derived_cache.value(key, lambda: function(sources, *args, **kwargs))
        return result

    return cached
