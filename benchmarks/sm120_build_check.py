"""Does FlashInfer's TRT-LLM all-reduce fusion module compile for SM120? (No Blackwell needed: compile only.)

    PYTHONPATH=src python benchmarks/sm120_build_check.py --wheels .whl --out OUT   # on a machine with nvcc

Three builds with FLASHINFER_CUDA_ARCH_LIST=12.0a, each in a fresh process and JIT cache:
1. FlashInfer 0.6.4 as published: expected to fail with the case study's error
   ("No supported CUDA architectures found for major versions [9, 10]");
2. FlashInfer 0.6.4 after `verifylab gates apply` on a copy (JIT arch list opened): compiles?
3. FlashInfer >= 0.6.17 as published (SM12x admitted upstream).
For each: success, seconds, the last error line, and the SASS architectures of the built library
(cuobjdump --list-elf). The kernels cannot run here; that they compile is all this shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

BUILD = r"""
import sys, types, importlib
root = sys.argv[1]
try:
    import flashinfer  # the whole package when its dependencies are present
except Exception as exc:  # newer FlashInfer needs packages not carried here: load only flashinfer.jit
    print("full import failed, loading flashinfer.jit only:", type(exc).__name__, str(exc)[:200], flush=True)
    for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
        del sys.modules[name]
    pkg = types.ModuleType("flashinfer")
    pkg.__path__ = [root + "/flashinfer"]
    sys.modules["flashinfer"] = pkg
    version = importlib.import_module("flashinfer.version")
    pkg.__version__ = version.__version__
from flashinfer.jit import comm
spec = comm.gen_trtllm_comm_module()
spec.build(verbose=False)
print("BUILT", spec.get_library_path(), flush=True)
"""


def unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(into)
    return into


def sass_archs(library: Path) -> list[str]:
    tool = shutil.which("cuobjdump")
    if not tool or not library.is_file():
        return []
    out = subprocess.run([tool, "--list-elf", str(library)], capture_output=True, text=True, check=False).stdout
    return sorted(
        {part for line in out.splitlines() for part in line.replace(".", " ").split() if part.startswith("sm_")}
    )


def build(name: str, site: Path, deps: str, out: Path) -> dict:
    cache = out / f"jit-{name}"
    env = {
        **os.environ,
        "FLASHINFER_CUDA_ARCH_LIST": "12.0a",
        "FLASHINFER_WORKSPACE_BASE": str(cache),
        "PYTHONPATH": f"{site}:{deps}",
    }
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", BUILD, str(site)], capture_output=True, text=True, env=env, check=False
    )
    seconds = time.time() - start
    (out / f"build-{name}.log").write_text(proc.stdout + proc.stderr)
    built = next((line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("BUILT ")), None)
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return {
        "variant": name,
        "ok": proc.returncode == 0 and built is not None,
        "seconds": round(seconds, 1),
        "error": None if proc.returncode == 0 else (errors[-1] if errors else "unknown"),
        "sass": sass_archs(Path(built)) if built else [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, required=True, help="folder with flashinfer_python-*.whl")
    parser.add_argument("--deps", default=os.environ.get("PYTHONPATH", ""), help="PYTHONPATH of the dependencies")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from verifylab import gates
    from verifylab.host import capture_host

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host.json").write_text(capture_host(ROOT).model_dump_json(indent=2))
    work = Path("/tmp/sm120-build")
    shutil.rmtree(work, ignore_errors=True)
    wheels = sorted(args.wheels.glob("flashinfer_python-*.whl"))
    old = next(w for w in wheels if "-0.6.4-" in w.name)
    results = []
    published = unpack(old, work / "fi-0.6.4")
    results.append(build("0.6.4-published", published, args.deps, args.out))
    patched = unpack(old, work / "fi-0.6.4-patched")
    applied = gates.apply(patched, "sm120")
    results.append(build("0.6.4-gate-opened", patched, args.deps, args.out) | {"patch": applied.notes})
    for newer in (w for w in wheels if w is not old):
        site = unpack(newer, work / newer.stem)
        version = newer.name.split("-")[1]
        results.append(build(f"{version}-published", site, args.deps, args.out))
    (args.out / "sm120_build.json").write_text(json.dumps(results, indent=2))
    print(f"\n{'variant':<24} {'ok':<6} {'seconds':>8}  sass / error")
    for r in results:
        print(f"{r['variant']:<24} {r['ok']!s:<6} {r['seconds']:>8.1f}  {', '.join(r['sass']) or r['error']}")


if __name__ == "__main__":
    main()
