"""verifylab's NVLink-multicast guard, loaded by every Python process that has this folder on PYTHONPATH.

A backstop, not the protection: compiled callers (NCCL, PyTorch symmetric memory, NVSHMEM) are stopped only
by ``NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1``. This module makes
``cuMulticastCreate`` in ``cuda.bindings.driver`` (and the legacy ``cuda.cuda``) raise, for Python callers
such as FlashInfer's ``mnnvl`` and ``mixed_comm``. With ``VERIFYLAB_SIMULATE_NO_MULTICAST=1`` it also
answers like a PCIe box without NVLink multicast: ``cuMulticastGetGranularity`` returns
``(CUDA_ERROR_NOT_SUPPORTED, 0)`` and the ``MULTICAST_SUPPORTED`` device attribute reads 0.

Standalone on purpose (no verifylab import): it runs before anything else in the interpreter.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

GUARDED_MODULES = ("cuda.bindings.driver", "cuda.cuda")
SIMULATE = os.environ.get("VERIFYLAB_SIMULATE_NO_MULTICAST") == "1"


class MulticastForbidden(RuntimeError):
    """Raised instead of creating an NVLink multicast object on a shared machine."""


def _forbidden(*_args, **_kwargs):
    raise MulticastForbidden(
        "cuMulticastCreate is blocked by verifylab's guard (sitecustomize): NVLink multicast can take a shared "
        "machine's GPUs out of service. Use FlashInfer's 'trtllm' backend, never 'mnnvl'."
    )


def _patch(module) -> None:
    if getattr(module, "_verifylab_guarded", False) or not hasattr(module, "cuMulticastCreate"):
        return
    module.cuMulticastCreate = _forbidden
    if SIMULATE:
        not_supported = module.CUresult.CUDA_ERROR_NOT_SUPPORTED
        real_attribute = module.cuDeviceGetAttribute
        multicast_attr = module.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED

        def granularity(*_args, **_kwargs):
            return (not_supported, 0)

        def attribute(attrib, device):
            if attrib == multicast_attr:
                return (module.CUresult.CUDA_SUCCESS, 0)
            return real_attribute(attrib, device)

        module.cuMulticastGetGranularity = granularity
        module.cuDeviceGetAttribute = attribute
    module._verifylab_guarded = True


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        _patch(module)


class _GuardFinder(importlib.abc.MetaPathFinder):
    """Patches the guarded modules right after they are first imported."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in GUARDED_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


def install() -> None:
    for name in GUARDED_MODULES:
        if name in sys.modules:
            _patch(sys.modules[name])
    if not any(isinstance(f, _GuardFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardFinder())
    if os.environ.get("VERIFYLAB_GUARD_QUIET") != "1":
        mode = " (simulating a box without NVLink multicast)" if SIMULATE else ""
        print(f"verifylab multicast guard loaded in pid {os.getpid()}{mode}", file=sys.stderr)


install()
