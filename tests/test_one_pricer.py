"""#50: one pricing function. A pass's time — plain decoding's step, a verify pass, a speculative cycle, a floor — is
computed in :mod:`verifylab.model.pricer` only: its functions are defined nowhere else, a model's bytes and
arithmetic per pass are read there (and, as bytes without a time, by the floors' tables), no other module turns bytes
over a bandwidth into time, and the option tables and the decision show the same numbers (tests/test_decision_model)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"
PRICER = "model/pricing/pricer.py"
PRICING = {"physics_ms", "comm_ms", "host0_ms", "step_ms", "verify_ms", "cycle_ms", "floor_ms", "busiest_bytes"}
BYTES_READERS = {"pass_parts", "pass_flops"}  # ModelCosts' bytes and arithmetic of one pass
READ_BY = {
    PRICER,
    "model/inputs/model_costs.py",
    "model/pricing/floors.py",
}  # floors: bytes per part for its tables, no time
BYTES_OVER_BANDWIDTH = re.compile(r"/\s*\(\s*[\w.]*(gbs|bandwidth)[\w.]*\s*\*\s*1e9\s*\)", re.I)


def _modules(src: Path = SRC) -> dict[str, ast.Module]:
    return {p.relative_to(src).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(src.rglob("*.py"))}


def pricing_outside_the_pricer(src: Path = SRC) -> list[str]:
    """Every place that prices a pass outside the pricer: a pricing function defined again, a model's pass bytes
    read where no floor table needs them, bytes divided by a bandwidth."""
    found = []
    for name, tree in _modules(src).items():
        if name == PRICER:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name in PRICING:
                found.append(f"{name}: defines {node.name}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in BYTES_READERS
                and name not in READ_BY
            ):
                found.append(f"{name}:{node.lineno}: reads .{node.func.attr}()")
        text = (src / name).read_text(encoding="utf-8")
        found += [f"{name}: bytes over a bandwidth" for _ in BYTES_OVER_BANDWIDTH.finditer(text)]
    return found


def test_a_pass_is_priced_in_the_pricer_only():
    assert pricing_outside_the_pricer() == []


def test_the_scan_finds_a_second_pricer(tmp_path):
    """The scan is not blind: a module that prices a pass its own way is named, each way it does."""
    package = tmp_path / "verifylab"
    (package / "model" / "pricing").mkdir(parents=True)
    (package / "model" / "pricing" / "pricer.py").write_text("def verify_ms():\n    return 1.0\n")
    (package / "analysis.py").write_text(
        "def verify_ms(box):\n"
        "    read = box.target.pass_parts(4, 1, 2048, 8).total\n"
        "    return read / (box.gpu.bandwidth_gbs * 1e9) * 1e3\n"
    )
    assert pricing_outside_the_pricer(package) == [
        "analysis.py: defines verify_ms",
        "analysis.py:2: reads .pass_parts()",
        "analysis.py: bytes over a bandwidth",
    ]
