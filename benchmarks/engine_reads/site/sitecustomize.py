"""The engine-reads runs' start-up hook (a measurement fixture, never product code): loads verifylab's multicast guard
(src/verifylab/guard/site/sitecustomize.py, the backstop) and, with ``VERIFYLAB_READS_DRAFT_VARIES=1``, zeroes an
EAGLE-3 draft's ``fc`` weight after SGLang's dummy initialisation, and with ``VERIFYLAB_READS_SPLITKV=1``
switches SGLang's Triton split-KV verify kernel on for an NVIDIA GPU (``is_gfx95_supported`` answers True inside
``triton_backend`` alone: the one gate that keeps it off there; issue #83). With SGLang's dummy weights (the same
uniform
values for every parameter of a shape) the draft's residual stream is the projected target hidden state, so every
step of a chain proposes the same token; with ``fc`` zero the residual starts from the draft's attention and MLP
over the token's embedding, and a chain's tokens vary. The verify pass's cost is untouched; only which tokens it
verifies changes.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import runpy
from pathlib import Path

_GUARD = Path(__file__).resolve().parents[3] / "src" / "verifylab" / "guard" / "site" / "sitecustomize.py"
runpy.run_path(str(_GUARD), run_name="verifylab_multicast_guard")

LOADER_MODULE = "sglang.srt.model_loader.loader"


def _draft_varies(module) -> None:
    original = module.initialize_dummy_weights

    def initialize(model, *args, **kwargs):
        original(model, *args, **kwargs)
        if type(model).__name__.endswith("Eagle3"):
            zeroed = []
            for name, param in model.named_parameters():
                if name.endswith("fc.weight"):
                    param.data.zero_()
                    zeroed.append(name)
            print(f"verifylab reads fixture: zeroed {zeroed} of {type(model).__name__}", flush=True)

    module.initialize_dummy_weights = initialize


TRITON_BACKEND = "sglang.srt.layers.attention.triton_backend"


def _splitkv_on_nvidia(module) -> None:
    module.is_gfx95_supported = lambda: True  # read once, when the backend is made: use_verify_splitkv
    print(
        "verifylab reads fixture: split-KV verify gate lifted (triton_backend.is_gfx95_supported -> True)", flush=True
    )


PATCHES = {}
if os.environ.get("VERIFYLAB_READS_DRAFT_VARIES") == "1":
    PATCHES[LOADER_MODULE] = _draft_varies
if os.environ.get("VERIFYLAB_READS_SPLITKV") == "1":
    PATCHES[TRITON_BACKEND] = _splitkv_on_nvidia


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, patch) -> None:
        self.inner, self.patch = inner, patch

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, PATCHES[fullname])
        return spec


if PATCHES:
    import sys

    sys.meta_path.insert(0, _Finder())
