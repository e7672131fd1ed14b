"""Copy a wheel without some of its members (and with a RECORD that matches what is left).

The live smoke uses it to ship `sglang-kernel` without the kernels a TP-1, Triton-attention run on an SM90
GPU never loads (FA3's 1.1 GB `flash_ops`, the SM100 build, FlashMLA, InfLLM):

    python benchmarks/live_smoke/prune_wheel.py IN.whl OUT_DIR 'sgl_kernel/flash_ops.abi3.so' ...
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import os
import tempfile
import zipfile
from pathlib import Path


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def prune_wheel(source: Path, out_dir: Path, drop: list[str]) -> tuple[Path, list[str]]:
    """Write ``out_dir/<same name>`` without the members matching any ``drop`` glob; returns (path, dropped)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / source.name
    dropped: list[str] = []
    with zipfile.ZipFile(source) as zin:
        names = zin.namelist()
        record = next((n for n in names if n.endswith(".dist-info/RECORD")), None)
        if record is None:
            raise SystemExit(f"{source}: not a wheel (no .dist-info/RECORD)")
        fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".whl.part")
        os.close(fd)
        try:
            lines = []
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zout:
                for name in names:
                    if name == record:
                        continue
                    if any(fnmatch.fnmatch(name, pattern) for pattern in drop):
                        dropped.append(name)
                        continue
                    data = zin.read(name)
                    zout.writestr(zin.getinfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
                    lines.append(_record_line(name, data))
                lines.append(f"{record},,")
                zout.writestr(record, "\n".join(lines) + "\n")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target, dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("drop", nargs="+", help="glob patterns of members to leave out")
    args = parser.parse_args()
    target, dropped = prune_wheel(args.wheel, args.out_dir, args.drop)
    if not dropped:
        raise SystemExit(f"nothing in {args.wheel.name} matched {args.drop}")
    print(f"{target} ({target.stat().st_size / 2**20:.1f} MiB, {args.wheel.stat().st_size / 2**20:.1f} MiB before)")
    for name in dropped:
        print(f"  dropped {name}")


if __name__ == "__main__":
    main()
