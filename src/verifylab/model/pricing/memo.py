"""A method's results kept per instance and arguments until one of its inputs is set anew (the instance's ``memo``
dict, cleared by its ``__setattr__``): one book page asks a pricer for the same price hundreds of times."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

Method = TypeVar("Method", bound=Callable[..., Any])


def memoized(method: Method) -> Method:
    """A method whose result is kept per instance and arguments, until an input is set anew: one book page asks
    for the same price hundreds of times, each a pandas filter of the public table."""

    @functools.wraps(method)
    def kept(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = (method.__name__, args, tuple(sorted(kwargs.items())))
        if key not in self.memo:
            self.memo[key] = method(self, *args, **kwargs)
        return self.memo[key]

    return kept  # type: ignore[return-value]
