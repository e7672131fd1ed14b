"""Run a communication probe on the GPUs of this host: peer access and copies per pair, then one process per
rank (``rank.py``) timing every all-reduce it can run at every size, with NCCL's INFO log kept per rank.

The parent never touches a GPU itself (children are fresh processes with NVLink multicast off); it watches each
rank's phase file, ends every rank when one fails or when a phase makes no progress within ``timeout`` seconds,
and raises one :class:`CommProbeError` naming the rank and the phase. What was measured stays in the work folder.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verifylab.comm.config import ProbeConfig
from verifylab.comm.gpu_map import read_gpu_map
from verifylab.comm.host import HostP2P, read_host_p2p
from verifylab.comm.nccl_log import compact_nccl_log
from verifylab.comm.rank import RankSpec, steps_per_rank
from verifylab.comm.rank_state import GROUP_NAME
from verifylab.errors import CommProbeError
from verifylab.guard import guarded_env
from verifylab.iorw import atomic_write_json
from verifylab.rendezvous import RENDEZVOUS_TIMEOUT, fresh_rendezvous

NCCL_SUBSYS = "INIT,ENV,P2P,SHM,NET,GRAPH,TUNING"
Progress = Callable[[int, int, str], None]  # (steps done, steps in all, what is running)


@dataclass
class RawProbe:
    """What the processes wrote, before any table is made: per-rank results, NCCL logs, peer copies."""

    config: ProbeConfig
    world: int
    devices: list[int]
    ranks: list[dict]
    nccl_logs: list[str]
    peers: list[dict]
    host: HostP2P
    environment: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)
    work_dir: Path | None = None
    gpu_map: list[dict] = field(default_factory=list)  # per rank: which physical GPU (comm.gpu_map)
    gpu_pairs: list[dict] = field(default_factory=list)  # per ordered pair of ranks: NVML's P2P status and path

    def to_json(self) -> dict:
        out = asdict(self)
        out["config"] = self.config.model_dump(mode="json")
        out["work_dir"] = str(self.work_dir) if self.work_dir else None
        return out

    @classmethod
    def from_json(cls, data: dict) -> RawProbe:
        """A raw record as stored; refused (``ValueError`` naming the field) when its world size is not 1..1024 or
        not its number of ranks, or a number in what the ranks measured is infinite or negative (a NaN is a cell
        not timed, as the ranks write it)."""
        data = dict(data)
        world = data.get("world")
        if not isinstance(world, int) or not 1 <= world <= 1024 or len(data.get("ranks") or []) != world:
            raise ValueError(f"world = {str(world)[:20]}: 1 to 1024, one entry in 'ranks' per rank")
        for where, value in _numbers({"ranks": data["ranks"], "peers": data.get("peers") or []}):
            if math.isinf(value) or value < 0:
                raise ValueError(f"{where} = {value!r}: a measured count, size or time is finite and not negative")
        _check_cells(data["ranks"])
        data["config"] = ProbeConfig.model_validate(data["config"])
        data["host"] = HostP2P(**data["host"])
        data["work_dir"] = Path(data["work_dir"]) if data.get("work_dir") else None
        return cls(**data)


def _check_cells(ranks: list) -> None:
    """Each rank's cells: a group named as the ranks name one, times as a list of numbers (``ValueError`` naming
    the cell)."""
    for r, rank in enumerate(ranks):
        cells = rank.get("cells", []) if isinstance(rank, dict) else None
        if not isinstance(cells, list):
            raise ValueError(f"ranks[{r}]: not a rank's record with a list of cells")
        for c, cell in enumerate(cells):
            where = f"ranks[{r}].cells[{c}]"
            if not isinstance(cell, dict):
                raise ValueError(f"{where}: not a cell")
            group = cell.get("group", "all")
            if not isinstance(group, str) or not GROUP_NAME.fullmatch(group):
                raise ValueError(f"{where}.group = {str(group)[:30]!r}: 'all', 'pair:0-1' or 'half:0-1-2-3'")
            samples = cell.get("samples_us", [])
            if not isinstance(samples, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in samples
            ):
                raise ValueError(f"{where}.samples_us: a list of times in µs (numbers), not {type(samples).__name__}")


def _numbers(obj: object, where: str = "") -> Iterator[tuple[str, float]]:
    """Every number inside ``obj`` (dicts and lists walked) with where it is, e.g. ``ranks[0].cells[3].median_us``."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _numbers(value, f"{where}.{key}" if where else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _numbers(value, f"{where}[{i}]")
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        yield where, float(obj)


def probe_environment() -> dict[str, str]:
    """The variables that decide which path NCCL takes, as this process sees them (the ranks inherit them)."""
    names = (
        "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_PROTO",
        "NCCL_ALGO",
        "NCCL_IB_DISABLE",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_NET",
        "NCCL_SOCKET_IFNAME",
        "NCCL_CUMEM_ENABLE",
        "NCCL_NVLS_ENABLE",
        "NCCL_TOPO_FILE",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
    )
    return {n: os.environ[n] for n in names if n in os.environ}


def no_gpu_reason(dev: Path = Path("/dev"), env: dict[str, str] | None = None) -> str | None:
    """Why this machine certainly has no CUDA GPU for the probe, read in microseconds (no torch import, which takes
    seconds): no NVIDIA device node, or CUDA_VISIBLE_DEVICES hiding every GPU; None when GPUs may be there."""
    env = dict(os.environ) if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if dev.is_dir() and not any(p.name[len("nvidia") :].isdigit() for p in dev.glob("nvidia[0-9]*")):
        return f"no NVIDIA GPU device ({dev}/nvidia0, ...) on this machine"
    return None


def require_gpu_devices() -> None:
    """:class:`CommProbeError` in one line when :func:`no_gpu_reason` finds this machine has no GPU for the probe."""
    reason = no_gpu_reason()
    if reason is not None:
        raise CommProbeError(f"comm probe needs CUDA GPUs: {reason} (--backend gloo runs the mechanics on CPUs)")


def resolve_devices(cfg: ProbeConfig) -> tuple[int, list[int]]:
    """(world size, CUDA device per rank); one line naming what is missing when the probe cannot run here."""
    if cfg.backend == "gloo":
        return cfg.ranks or 2, []
    require_gpu_devices()
    try:
        import torch
    except Exception as exc:
        raise CommProbeError(f"comm probe needs PyTorch with CUDA: import torch failed ({exc})") from None
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no device usable"
        raise CommProbeError(f"comm probe needs CUDA GPUs: torch {torch.__version__} sees none ({build})")
    count = torch.cuda.device_count()
    gpus = cfg.gpus if cfg.gpus is not None else list(range(count))
    missing = [g for g in gpus if g >= count]
    if missing:
        raise CommProbeError(f"--gpus {','.join(map(str, gpus))}: GPU(s) {missing} not visible ({count} visible)")
    if not gpus:
        raise CommProbeError("comm probe needs a CUDA GPU: none is visible")
    return len(gpus), gpus  # one GPU: its identity, NCCL's version and the checks; TP 1 has no all-reduce to judge


def _kill(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


def _phase(work: Path, rank: int) -> tuple[str, int]:
    try:
        phase, done = (work / f"rank{rank}.phase").read_text().split("\n")[:2]
        return phase, int(done or 0)
    except (OSError, ValueError):
        return "start-up", 0


def _last_error(work: Path, rank: int) -> str:
    """The last meaningful line of a rank's traceback or stderr."""
    for name in (f"rank{rank}.error", f"rank{rank}.stderr"):
        path = work / name
        if path.exists():
            lines = [x.strip() for x in path.read_text(errors="replace").splitlines() if x.strip()]
            lines = [x for x in lines if not x.startswith(("File ", "Traceback", "^", "~"))]
            if lines:
                return lines[-1][:300]
    return "no error output"


def _measure_peers(gpus: list[int], work: Path, env: dict[str, str], timeout: float) -> list[dict]:
    out = work / "peers.json"
    cmd = [sys.executable, "-m", "verifylab.comm.peers", str(out), *map(str, gpus)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise CommProbeError(f"peer copies between GPUs {gpus} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CommProbeError(f"peer copies between GPUs {gpus} failed: {last[:300]}")
    return json.loads(out.read_text())["pairs"]


def run_probe(cfg: ProbeConfig, work: Path, progress: Progress | None = None) -> RawProbe:
    """Measure on this host; ``work`` receives every process's output (kept after a failure)."""
    world, devices = resolve_devices(cfg)
    work.mkdir(parents=True, exist_ok=True)
    env = guarded_env()
    env["PYTHONUNBUFFERED"] = "1"
    src = str(Path(__file__).resolve().parents[2])  # verifylab importable in the children however it was found
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], src])
    seconds: dict[str, float] = {}
    began = time.monotonic()
    host, peers = HostP2P(), []
    if cfg.backend == "nccl":
        host = read_host_p2p(devices)
        if cfg.peer_copies:
            peers = _measure_peers(devices, work, env, cfg.timeout)
        seconds["host_and_peers"] = round(time.monotonic() - began, 2)
    p2p_everywhere = all(p["can_access_peer"] for p in peers) if peers else cfg.backend == "nccl"
    rendezvous = str(fresh_rendezvous(work, "rendezvous"))
    spec = RankSpec(cfg.model_dump(mode="json"), world, devices, rendezvous, str(work), p2p_everywhere)
    spec_path = work / "spec.json"
    atomic_write_json(spec_path, asdict(spec))
    started = time.monotonic()
    ranks = _run_ranks(spec, spec_path, env, cfg, progress)
    seconds["ranks"] = round(time.monotonic() - started, 2)
    gpu_map, gpu_pairs = read_gpu_map([r.get("identity", {}) for r in ranks]) if cfg.backend == "nccl" else ([], [])
    seconds["total"] = round(time.monotonic() - began, 2)
    logs = [compact_nccl_log(p.read_text(errors="replace")) for p in sorted(work.glob("nccl.rank*.log"))]
    return RawProbe(
        cfg, world, devices, ranks, logs, peers, host, probe_environment(), seconds, work, gpu_map, gpu_pairs
    )


# A rank whose rendezvous timed out waiting for the others (torch's store): initialisation that never completed
STORE_TIMEOUT = re.compile(
    rf"DistStoreError|{RENDEZVOUS_TIMEOUT}|Timed out after .* waiting for clients|timed out .* rendezvous", re.I
)


def _run_ranks(
    spec: RankSpec, spec_path: Path, env: dict[str, str], cfg: ProbeConfig, progress: Progress | None
) -> list[dict]:
    work = Path(spec.out)
    procs = []
    for rank in range(spec.world):
        rank_env = dict(env)
        if cfg.backend == "nccl":
            rank_env.update(
                NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS=NCCL_SUBSYS, NCCL_DEBUG_FILE=str(work / f"nccl.rank{rank}.log")
            )
        with open(work / f"rank{rank}.stderr", "w") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "verifylab.comm.rank", str(spec_path), str(rank)],
                    env=rank_env,
                    stdout=err,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # the whole rank (and anything it starts) can be ended at once
                )
            )
    total = spec.world * steps_per_rank(cfg, spec.world)
    seen, deadline = None, time.monotonic() + cfg.timeout
    try:
        while True:
            states = [_phase(work, r) for r in range(spec.world)]
            codes = [p.poll() for p in procs]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                r = failed[0]
                error = _last_error(work, r)
                if states[r][0] in ("init", "start-up") and STORE_TIMEOUT.search(error):
                    raise CommProbeError(  # its rendezvous gave up first: the same answer as the probe's clock
                        f"comm probe: NCCL initialisation did not complete within --timeout {cfg.timeout:g} s (rank "
                        f"{r} in phase '{states[r][0]}': {error}); all ranks ended (NCCL's log: {work}/nccl.rank*.log)"
                    )
                raise CommProbeError(
                    f"comm probe: rank {r} failed in phase '{states[r][0]}' (exit {codes[r]}): "
                    f"{error}; all ranks ended (output in {work})"
                )
            if all(c == 0 for c in codes):
                break
            if progress is not None:
                phase = min(states, key=lambda s: s[1])[0]
                progress(sum(s[1] for s in states), total, phase)
            if states != seen:
                seen, deadline = states, time.monotonic() + cfg.timeout
            elif time.monotonic() > deadline:
                stuck = [(r, s[0]) for r, s in enumerate(states) if s[0] != "done"]
                where = ", ".join(f"rank {r} in phase '{p}'" for r, p in stuck)
                what = (
                    "NCCL initialisation did not complete"
                    if any(p in ("init", "start-up") for _, p in stuck)
                    else "no progress"
                )
                raise CommProbeError(
                    f"comm probe: {what} within --timeout {cfg.timeout:g} s ({where}); all ranks ended "
                    f"(NCCL's log: {work}/nccl.rank*.log)"
                )
            time.sleep(0.1)
    finally:
        _kill(procs)
    return [json.loads((work / f"rank{r}.json").read_text()) for r in range(spec.world)]
