"""A rank's device kernels as columns: one small code per distinct (name, category) plus start, duration and
correlation id in numpy arrays. A million kernels take about 28 MB this way instead of a Python object (and
an args dict) each, and the analysis works on them with array operations."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from verifylab.trace.classify import KernelClass, classify_kernel


class KernelColumnsBuilder:
    """Collects kernels one at a time while a trace streams by (typed arrays, not objects), then ``finish``."""

    def __init__(self) -> None:
        self._codes: dict[tuple[str, str], int] = {}
        self._code = array("i")
        self._ts = array("d")
        self._dur = array("d")
        self._correlation = array("q")

    def appenders(self) -> tuple[dict[tuple[str, str], int], Callable, Callable, Callable, Callable]:
        """(codes by (name, category), and the code, start, duration and correlation appends): what a reading loop
        binds once to add a kernel without a method call per event (a new key takes ``len(codes)``)."""
        return self._codes, self._code.append, self._ts.append, self._dur.append, self._correlation.append

    def append(self, name: str, cat: str, ts: float, dur: float, correlation: int) -> None:
        key = (name, cat)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self._codes)
        self._code.append(code)
        self._ts.append(ts)
        self._dur.append(dur)
        self._correlation.append(correlation)

    def finish(self) -> KernelColumns:
        return KernelColumns(
            keys=tuple(self._codes),
            code=np.frombuffer(self._code, dtype=np.int32).copy(),
            ts=np.frombuffer(self._ts, dtype=np.float64).copy(),
            dur=np.frombuffer(self._dur, dtype=np.float64).copy(),
            correlation=np.frombuffer(self._correlation, dtype=np.int64).copy(),
        )


@dataclass(frozen=True, eq=False)
class KernelColumns:
    """Device kernels in trace order: ``keys[code[i]]`` is kernel i's (name, category); times in microseconds;
    ``correlation`` is ``reader.NO_CORRELATION`` (-1) where the event carries none."""

    keys: tuple[tuple[str, str], ...]
    code: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    correlation: np.ndarray

    @classmethod
    def empty(cls) -> KernelColumns:
        return KernelColumnsBuilder().finish()

    def __len__(self) -> int:
        return len(self.code)

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    @cached_property
    def classes(self) -> tuple[KernelClass, ...]:
        """What each distinct kernel is (``classes[code]``): every name is classified once."""
        return tuple(classify_kernel(name, cat) for name, cat in self.keys)

    def per_code(self, attribute: str) -> np.ndarray:
        """One field of the kernel classes, by code, as an array to index with ``code``."""
        return object_array([getattr(c, attribute) for c in self.classes])


def object_array(values: list) -> np.ndarray:
    """A 1-D object array of ``values`` (numpy would otherwise guess a shape or a string dtype)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
