"""A pytest plugin for running a boundary's test against the code before the boundary existed (``run.sh``): a
``verifylab`` module or name that commit does not have imports as a stand-in that does nothing, so every test is
collected and each fails or passes on that commit's behaviour, instead of the whole file ending at its imports."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types


class Missing(Exception):
    """What a name the commit lacks stands for: a class that builds an inert value and raises nothing."""


def _getattr(module: types.ModuleType):  # type: ignore[no-untyped-def]
    """The module's fallback for a name: its submodule when the commit has one, else a stand-in."""

    def missing(name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        if hasattr(module, "__path__"):
            try:
                return importlib.import_module(f"{module.__name__}.{name}")
            except ImportError:
                pass
        return type(name, (Missing,), {})

    return missing


class _Stand(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a ``verifylab`` module the commit lacks (an empty module) and gives every module a ``__getattr__``."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if not fullname.startswith("verifylab"):
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                loader = spec.loader
                exec_module = loader.exec_module  # type: ignore[union-attr]

                def run(module: types.ModuleType, exec_module=exec_module) -> None:
                    exec_module(module)
                    module.__getattr__ = _getattr(module)  # type: ignore[attr-defined]

                loader.exec_module = run  # type: ignore[union-attr, method-assign]
                return spec
        return importlib.machinery.ModuleSpec(fullname, self)  # a module the commit lacks: not a package

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__getattr__ = _getattr(module)  # type: ignore[attr-defined]


sys.meta_path.insert(0, _Stand())
