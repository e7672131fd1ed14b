"""One rank of a communication probe (``python -m verifylab.comm.rank SPEC RANK``), started by ``probe.py``
with NVLink multicast off and NCCL's INFO log going to a file of its own.

The rank times every all-reduce implementation it can run at every size, first across all ranks, then (more
than two ranks) in every pair and in each half, and writes ``rank<r>.json`` after every size, atomically, so
that a later failure loses nothing measured. Its current phase is in ``rank<r>.phase`` for the parent.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from verifylab.comm.config import ProbeConfig
from verifylab.comm.rank_state import WORLD, Phases, RankResult, RankSpec, group_name, subgroups
from verifylab.comm.timing import CHECK_TOLERANCE, Mode, RankSample, relative_error, time_samples
from verifylab.iorw import atomic_write_text
from verifylab.rendezvous import rendezvous_store

FLASHINFER_RANKS = (2, 4, 8, 16)  # the TRT-LLM all-reduce kernels are instantiated for these world sizes


class Prober:
    """Measures on one rank; ``cuda`` picks events + graphs (GPUs) or the wall clock (gloo on CPU)."""

    def __init__(self, spec: RankSpec, rank: int) -> None:
        import torch
        import torch.distributed as dist

        self.spec, self.rank, self.cfg = spec, rank, ProbeConfig.model_validate(spec.config)
        self.cuda = self.cfg.backend == "nccl"
        self.out = Path(spec.out)
        self.phases = Phases(rank, self.out)
        self.phases.enter("init")
        if self.cuda:
            self.device = torch.device("cuda", spec.devices[rank])
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        kwargs: dict[str, Any] = {"device_id": self.device} if self.cuda else {}
        timeout = timedelta(seconds=self.cfg.timeout)
        dist.init_process_group(
            self.cfg.backend,
            store=rendezvous_store(spec.rendezvous, spec.world, timeout),
            rank=rank,
            world_size=spec.world,
            timeout=timeout,
            **kwargs,
        )
        self.dist, self.torch = dist, torch
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        self.result = RankResult(rank, str(self.device), identity=self._identity())
        self._base: dict[int, object] = {}
        self._barrier(None)()  # NCCL's communicator is set up here: its transport lines are logged now

    def _identity(self) -> dict[str, object]:
        """Which physical GPU this rank is (name, UUID, PCI address as CUDA reports them) and NCCL's version."""
        torch = self.torch
        if not self.cuda:
            return {"cuda_device": None}
        props = torch.cuda.get_device_properties(self.device)
        bus = ""
        if hasattr(props, "pci_bus_id"):
            domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            bus = f"{domain:08x}:{props.pci_bus_id:02x}:{device:02x}.0"
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else ""
        return {
            "cuda_device": self.device.index,
            "name": props.name,
            "uuid": str(getattr(props, "uuid", "")),
            "pci_bus_id": bus,
            "nccl_version": nccl,
            "torch": torch.__version__,
        }

    def _checked(self, impl: str, err: float | None, tokens: int, group_label: str) -> bool:
        """False (and a row saying why) when ``impl`` returned a wrong result: it is then not timed."""
        if err is None or err <= CHECK_TOLERANCE[str(self.dtype).removeprefix("torch.")]:
            return True
        tolerance = CHECK_TOLERANCE[str(self.dtype).removeprefix("torch.")]
        note = (
            f"wrong result: relative error {err:.3g} against the exact result (rounding stays under "
            f"{tolerance:g}): not timed"
        )
        self.result.cells.append(
            RankSample(impl, group_label, Mode.GRAPH, tokens, self.cfg.message_bytes(tokens), [], err, note, False)
        )
        return False

    # ------------------------------------------------------------------------------------------- inputs
    def base(self, tokens: int):
        """The same pseudo-random (tokens, hidden) tensor on every rank; rank r contributes (r + 1) x it."""
        if tokens not in self._base:
            gen = self.torch.Generator(device="cpu").manual_seed(7919 * tokens + 17)
            values = self.torch.randn(tokens, self.cfg.hidden, generator=gen) / 8
            self._base[tokens] = values.to(device=self.device, dtype=self.dtype)
        return self._base[tokens]

    def contribution(self, tokens: int, group_ranks: tuple[int, ...]):
        """This rank's input and the exact sum over ``group_ranks``."""
        base = self.base(tokens)
        mine = base * float(self.rank + 1)
        expected = base.double() * float(sum(r + 1 for r in group_ranks))
        return mine, expected

    # ------------------------------------------------------------------------------------------- timing
    def _barrier(self, group) -> Callable[[], object]:
        if self.cuda:
            return lambda: self.dist.barrier(group=group, device_ids=[self.device.index])
        return lambda: self.dist.barrier(group=group)

    def _timed(self, op: Callable[[object], object], buffers: list, mode: Mode, group) -> list[float]:
        """Samples of ``op`` over ``buffers`` (one call each), captured in a graph or launched eagerly."""
        cfg = self.cfg

        def run_all() -> None:
            for buf in buffers:
                op(buf)

        if mode is Mode.GRAPH:
            from verifylab.synth.cuda import capture_graph

            graph = capture_graph(run_all)
            try:
                return time_samples(graph.replay, cfg.calls, cfg.replays, self._barrier(group), True)
            finally:
                self.torch.cuda.synchronize()
                del graph
        run_all()  # warm-up: lazy set-up outside the samples
        return time_samples(run_all, cfg.calls, cfg.replays, self._barrier(group), self.cuda)

    def measure_nccl(self, group_label: str, group_ranks: tuple[int, ...], group, tokens: int) -> None:
        """The backend's all-reduce (NCCL on GPUs) at ``tokens``: checked once against the exact sum, then
        timed in a graph and eagerly (eagerly only on CPU)."""
        mine, expected = self.contribution(tokens, group_ranks)
        check = mine.clone()
        self.dist.all_reduce(check, group=group)
        impl = "nccl" if self.cuda else self.cfg.backend
        err = relative_error(check, expected)
        if not self._checked(impl, err, tokens, group_label):
            return
        modes = [Mode.GRAPH, Mode.EAGER] if self.cuda else [Mode.EAGER]
        for mode in modes:
            buffers = [mine.clone() for _ in range(self.cfg.calls)]
            samples = self._timed(lambda b: self.dist.all_reduce(b, group=group), buffers, mode, group)
            self.result.cells.append(
                RankSample(impl, group_label, mode, tokens, self.cfg.message_bytes(tokens), samples, err, "", True)
            )

    # --------------------------------------------------------------------------------------- flashinfer
    def flashinfer_kernels(self) -> dict[str, Callable] | None:
        """FlashInfer's one-shot and two-shot all-reduce and its fused all-reduce + residual + RMSNorm, as
        SGLang 0.5.17 calls them (trtllm workspace, PDL on, fp32 accumulation off); None with the reason
        recorded when they cannot run here."""
        reasons = self.result.unavailable
        why = self._flashinfer_refusal()
        if why:
            for impl in ("flashinfer_oneshot", "flashinfer_twoshot", "fused"):
                reasons[impl] = why
            return None
        try:
            from flashinfer import comm

            from verifylab.synth.flashinfer_fusion import SGLANG_0_5_17
            from verifylab.synth.verify_pass import EPS

            max_tokens = max(max(self.cfg.tokens), 2048)
            workspace = comm.create_allreduce_fusion_workspace(
                backend="trtllm",
                world_size=self.spec.world,
                rank=self.rank,
                max_token_num=max_tokens,
                hidden_dim=self.cfg.hidden,
                dtype=self.torch.bfloat16,
                force_oneshot_support=True,
            )
        except Exception as exc:  # an import, JIT or workspace failure: say so, keep measuring NCCL
            message = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            for impl in ("flashinfer_oneshot", "flashinfer_twoshot", "fused"):
                reasons[impl] = f"FlashInfer could not start: {message[:300]}"
            return None
        self._workspace = workspace  # destroyed at teardown, before the process group
        weight = (self.torch.rand(self.cfg.hidden, device=self.device) + 0.5).to(self.torch.bfloat16)
        self._fused_gamma = weight
        s = SGLANG_0_5_17

        settings = {  # as SGLang 0.5.17 calls the kernel
            "workspace": workspace,
            "launch_with_pdl": s.launch_with_pdl,
            "trigger_completion_at_end": s.trigger_completion_at_end,
            "fp32_acc": s.fp32_acc,
        }

        def allreduce(use_oneshot: bool) -> Callable:
            def call(x):
                out = self.torch.empty_like(x)
                comm.allreduce_fusion(
                    input=x,
                    pattern=comm.AllReduceFusionPattern.kAllReduce,
                    output=out,
                    use_oneshot=use_oneshot,
                    **settings,
                )
                return (out,)

            return call

        def fused(x):
            residual, norm = self.torch.empty_like(x), self.torch.empty_like(x)
            comm.allreduce_fusion(
                input=x,
                pattern=comm.AllReduceFusionPattern.kARResidualRMSNorm,
                residual_out=residual,
                norm_out=norm,
                residual_in=self.torch.zeros_like(x),
                rms_gamma=weight,
                rms_eps=EPS,
                use_oneshot=s.use_oneshot,
                **settings,
            )
            return residual, norm

        return {
            "flashinfer_oneshot": allreduce(True),
            "flashinfer_twoshot": allreduce(False),
            "fused": fused,
        }

    def _flashinfer_refusal(self) -> str:
        if not self.cuda:
            return "CPU run: FlashInfer's kernels need GPUs"
        if not self.cfg.extra_impls:
            return "not asked for (--no-extra)"
        if self.spec.world not in FLASHINFER_RANKS:
            return f"FlashInfer's TRT-LLM all-reduce runs on {', '.join(map(str, FLASHINFER_RANKS))} ranks only"
        if os.environ.get("NCCL_P2P_DISABLE", "0") not in ("", "0"):
            return (
                "NCCL_P2P_DISABLE is set: this probe stands for a box without P2P, and FlashInfer's kernels write "
                "straight into the peers' memory (P2P), which that variable does not turn off"
            )
        if not self.spec.p2p_everywhere:
            return "some GPU pair cannot access its peer's memory (cudaDeviceCanAccessPeer): the kernels need P2P"
        try:
            import flashinfer  # noqa: F401
        except Exception as exc:
            return f"flashinfer not importable here ({type(exc).__name__}: {str(exc)[:120]})"
        return ""

    def measure_flashinfer(self, kernels: dict[str, Callable], tokens: int) -> None:
        """Each FlashInfer kernel at ``tokens``, in a graph and eagerly; the all-reduce checked once."""
        mine, expected = self.contribution(tokens, tuple(range(self.spec.world)))
        for impl, kernel in kernels.items():
            if impl == "flashinfer_twoshot" and tokens <= self.spec.world:
                note = "two-shot needs more tokens than ranks (FlashInfer asserts token_num > world_size)"
                self.result.cells.append(
                    RankSample(impl, WORLD, Mode.GRAPH, tokens, self.cfg.message_bytes(tokens), note=note)
                )
                continue
            try:
                err = self._flashinfer_error(impl, kernel, mine, expected)
            except Exception as exc:  # a size the kernel refuses is a row saying so, not a lost phase
                note = f"refused: {type(exc).__name__}: {str(exc)[:200]}"
                self.result.cells.append(
                    RankSample(impl, WORLD, Mode.GRAPH, tokens, self.cfg.message_bytes(tokens), note=note)
                )
                continue
            if not self._checked(impl, err, tokens, WORLD):
                continue
            for mode in (Mode.GRAPH, Mode.EAGER):
                buffers = [mine.clone() for _ in range(self.cfg.calls)]
                try:
                    samples = self._timed(kernel, buffers, mode, None)
                    note = ""
                except Exception as exc:  # one size the kernel refuses is a row saying so, not a lost phase
                    samples, note = [], f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                cell = RankSample(
                    impl, WORLD, mode, tokens, self.cfg.message_bytes(tokens), samples, err, note, err is not None
                )
                self.result.cells.append(cell)

    def _flashinfer_error(self, impl: str, kernel: Callable, mine, expected) -> float:
        """One call of the kernel exactly as it is timed, checked against the exact result: the all-reduce against
        the exact sum, the fused kernel's residual output against it too and its normalised output against RMSNorm
        of it (float64)."""
        from verifylab.synth.verify_pass import EPS

        torch = self.torch
        outputs = kernel(mine.clone())
        torch.cuda.synchronize()
        if impl == "fused":
            residual, norm = outputs
            summed = expected.double()
            normed = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + EPS) * self._fused_gamma.double()
            return max(relative_error(residual, expected), relative_error(norm, normed))
        return relative_error(outputs[0], expected)

    # -------------------------------------------------------------------------------------------- phases
    def run(self) -> None:
        cfg, world = self.cfg, self.spec.world
        everyone = tuple(range(world))
        self.result.unavailable["custom_allreduce"] = _custom_allreduce_refusal(world)
        self.phases.enter("allreduce")
        for tokens in cfg.tokens:
            self.measure_nccl(WORLD, everyone, None, tokens)
            self.result.write(self.out)
            self.phases.step("allreduce")
        self.phases.enter("flashinfer")
        kernels = self.flashinfer_kernels()
        for tokens in cfg.tokens:
            if kernels is not None:
                self.measure_flashinfer(kernels, tokens)
                self.result.write(self.out)
            self.phases.step("flashinfer")
        self.phases.enter("subgroups")
        if cfg.subgroups:
            for kind, ranks in subgroups(world):
                group = self.dist.new_group(list(ranks))  # every rank creates every group
                if self.rank in ranks:
                    for tokens in cfg.subgroup_tokens:
                        self.measure_nccl(f"{kind}:{group_name(ranks)}", ranks, group, tokens)
                self._barrier(None)()
                self.result.write(self.out)
                self.phases.step("subgroups")
        self.result.write(self.out)
        self.phases.enter("teardown")
        workspace = getattr(self, "_workspace", None)
        if workspace is not None and hasattr(workspace, "destroy"):
            workspace.destroy()  # its IPC buffers go before the process group does
        if self.cuda:
            self.torch.cuda.synchronize()
        self._barrier(None)()
        self.dist.destroy_process_group()
        self.phases.enter("done")


def _custom_allreduce_refusal(world: int) -> str:
    """Why SGLang's own custom all-reduce is not measured by the probe."""
    try:
        import sglang  # noqa: F401
    except Exception:
        return "sglang not importable here"
    return (
        "not driven by the probe: SGLang's custom all-reduce needs SGLang's own process groups (a live TP run "
        f"shows it); SGLang turns it off on more than two PCIe-only GPUs (this probe: {world})"
    )


def steps_per_rank(cfg: ProbeConfig, world: int) -> int:
    """How many progress steps a rank reports (sizes x phases, subgroups): the parent's progress total."""
    return 2 * len(cfg.tokens) + (len(subgroups(world)) if cfg.subgroups else 0)


def main(argv: list[str] | None = None) -> int:
    spec_path, rank = (argv or sys.argv[1:])[:2]
    spec = RankSpec.read(Path(spec_path))
    try:
        Prober(spec, int(rank)).run()
    except BaseException:
        atomic_write_text(Path(spec.out) / f"rank{rank}.error", traceback.format_exc())
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
