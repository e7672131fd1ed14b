"""#50, #64: one pricer, one comparison. A pass's time — plain decoding's step, a verify pass, a speculative cycle, a
prefill, a floor — is priced in :mod:`verifylab.model.pricing.pricer` only, as a
:class:`~verifylab.model.pricing.pass_cost.PassCost` record of named terms: its functions are defined nowhere else,
a model's bytes and arithmetic per pass are read there (and, as bytes without a time, by the floors' tables), and no
other module turns bytes over a bandwidth into time. And every saving, loss or speedup is
:func:`~verifylab.model.pricing.pass_cost.compare` of two records: no module subtracts a priced time (a record's
term, a collective's price, a pricing call's result) but those named in :data:`NOT_A_SAVING`, each a residual of a
measurement against the pricer, with why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "verifylab"
PRICER = "model/pricing/pricer.py"
RECORD = "model/pricing/pass_cost.py"
PRICING = {
    "price_pass", "price_step", "price_verify", "price_cycle", "price_prefill", "floor_ms", "busiest_bytes",
    "physics_ms", "comm_ms", "host0_ms", "step_ms", "verify_ms", "cycle_ms",
}  # fmt: skip
BYTES_READERS = {"pass_parts", "pass_flops"}  # ModelCosts' bytes and arithmetic of one pass
READ_BY = {PRICER, "model/inputs/model_costs.py", "model/pricing/floors.py"}  # floors: bytes per part for tables
BYTES_OVER_BANDWIDTH = re.compile(r"/\s*\(\s*[\w.]*(gbs|bandwidth)[\w.]*\s*\*\s*1e9\s*\)", re.I)

# What a priced value is, read from the code: a call of a pricing function, a term of a PassCost record, a
# collective's price (in a module that imports the pricing package), or a name bound to one of them.
PRICING_PACKAGE = "verifylab.model.pricing"
PRICED_CALLS = {"price_pass", "price_step", "price_verify", "price_cycle", "price_prefill", "measured_passes"}
RECORD_TERMS = {
    "total_ms", "physics_ms", "memory_ms", "arithmetic_ms", "measured_ms", "collectives_ms", "host_pass_ms",
    "host_streams_ms", "host_ms", "draft_steps_ms", "drafter_cycle_ms", "drafter_streams_ms", "weights_ms",
    "experts_ms", "kv_ms",
}  # fmt: skip
PRICE_ENDS = {"low_us", "high_us"}  # a collective's Price (regimes.Price)
NOT_A_SAVING = {  # module:function -> why its subtraction of a priced value is no saving
    "model/pricing/pricer.py:_host0_ms": "calibration: a measured step less what the pricer puts beside the host",
    "model/pricing/boxes.py:calibrate_decode": "calibration: a measured step less the pricer's physics and comm",
    "model/pricing/boxes.py:__call__": "a collective's curve: the fused kernel less the norm kernel it does (one term)",
    "model/case/hypotheses.py:_decode_with_fusion_pct": "a record built: the reported step less its priced all-reduces",
    "model/fits/overheads.py:fit_host": "a fit's residual: a measured step less the pricer's physics and comm",
    "model/fits/overheads.py:fit_cycle": "a fit's residual: a measured cycle less the pricer's",
    "model/case/options.py:reported_allreduce_range": "calibration: the reported pass less the priced terms",
}


def _modules(src: Path = SRC) -> dict[str, ast.Module]:
    return {p.relative_to(src).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(src.rglob("*.py"))}


def pricing_outside_the_pricer(src: Path = SRC) -> list[str]:
    """Every place that prices a pass outside the pricer: a pricing function defined again, a model's pass bytes
    read where no floor table needs them, bytes divided by a bandwidth."""
    found = []
    for name, tree in _modules(src).items():
        if name in (PRICER, RECORD):
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


def _imports_pricing(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PRICING_PACKAGE) for node in ast.walk(tree)
    )


class _Priced:
    """Which expressions of one function hold a priced value (names bound to one, to a fixed point)."""

    def __init__(self, function: ast.AST, with_prices: bool) -> None:
        self.with_prices = with_prices
        self.names: set[str] = set()
        for _ in range(4):
            for node in ast.walk(function):
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
                    if self.holds(node.value):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        self.names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                elif isinstance(node, ast.For | ast.comprehension) and self.holds(node.iter):
                    self.names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}

    def holds(self, expr: ast.AST) -> bool:
        for node in _outside_comparisons(expr):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in PRICED_CALLS or (self.with_prices and name == "price"):
                    return True
            if isinstance(node, ast.Attribute) and (
                node.attr in RECORD_TERMS or (self.with_prices and node.attr in PRICE_ENDS)
            ):
                return True
            if isinstance(node, ast.Name) and node.id in self.names:
                return True
        return False


def _outside_comparisons(expr: ast.AST):
    """The nodes of ``expr``, a call of ``compare`` taken whole: its result is the one blessed saving."""
    todo = [expr]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "compare":
            continue
        todo.extend(ast.iter_child_nodes(node))


def _own_nodes(function: ast.AST):
    """The nodes of ``function`` outside the functions defined in it (each is scanned as its own)."""
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def subtractions_of_priced_values(src: Path = SRC) -> set[str]:
    """``module:function`` for every subtraction outside the comparison itself with a priced value on either side."""
    found = set()
    for name, tree in _modules(src).items():
        if name == RECORD:
            continue
        with_prices = _imports_pricing(tree)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            priced = _Priced(function, with_prices)
            for node in _own_nodes(function):
                sub = (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)) or (
                    isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Sub)
                )
                if not sub:
                    continue
                sides = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
                if any(priced.holds(side) for side in sides):
                    found.add(f"{name}:{getattr(function, 'name', '<lambda>')}")
    return found


def test_a_pass_is_priced_in_the_pricer_only():
    assert pricing_outside_the_pricer() == []


def test_the_scan_finds_a_second_pricer(tmp_path):
    """The scan is not blind: a module that prices a pass its own way is named, each way it does."""
    package = tmp_path / "verifylab"
    (package / "model" / "pricing").mkdir(parents=True)
    (package / "model" / "pricing" / "pricer.py").write_text("def price_verify():\n    return 1.0\n")
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


def test_every_saving_is_one_comparison_of_two_records():
    """Fusion's saving (the book's and a box's), a collective swapped (the hypotheses), kernel fusion, the pass model's
    savings and speculation's gain all go through ``compare``: the only subtractions of priced values left are the
    residuals and calibrations named with why."""
    found = subtractions_of_priced_values()
    assert found - set(NOT_A_SAVING) == set(), "compute it as compare(before, after), or say why it is no saving"
    assert set(NOT_A_SAVING) - found == set(), "gone: remove it from NOT_A_SAVING"


PLANTED = {  # a second computation of a saving, whatever its names
    "by record terms": (
        "from verifylab.model.pricing.pricer import price_verify\n"
        "def what_fusion_buys(box, fused, ov, s):\n"
        "    return price_verify(box, ov, 4, 1, s).total_ms - price_verify(fused, ov, 4, 1, s).total_ms\n"
    ),
    "through names": (
        "from verifylab.model.pricing import pricer as p\n"
        "def delta(a, b, ov, s):\n"
        "    before = p.price_step(a, ov, 8, s)\n"
        "    after = p.price_step(b, ov, 8, s)\n"
        "    gap = before.collectives_ms\n"
        "    return gap - after.collectives_ms\n"
    ),
    "by a collective's price": (
        "from verifylab.model.pricing.regimes import Collective\n"
        "def swap(curves, regime, message):\n"
        "    nccl = curves.price(regime, Collective.NCCL, 8, message)\n"
        "    fused = curves.price(regime, Collective.FUSED, 8, message)\n"
        "    return 122 * (nccl.low_us - fused.high_us) / 1e3\n"
    ),
    "a record's total, in a module that imports nothing of the pricer": (
        "def saved(rows):\n    return [r.before.total_ms - r.after.total_ms for r in rows]\n"
    ),
}


def test_a_planted_second_saving_is_found(tmp_path):
    """The scan fails on a second computation of a saving, wherever and however it is written."""
    package = tmp_path / "verifylab"
    (package / "analysis").mkdir(parents=True)
    for n, text in enumerate(PLANTED.values()):
        (package / "analysis" / f"x{n}.py").write_text(text)
    found = subtractions_of_priced_values(package)
    assert found == {
        "analysis/x0.py:what_fusion_buys",
        "analysis/x1.py:delta",
        "analysis/x2.py:swap",
        "analysis/x3.py:saved",
    }


def test_the_comparison_is_the_difference_of_the_totals():
    """compare() is the difference of the two totals, term by term, and the speedup of their rates."""
    from dataclasses import fields

    from verifylab.model.pricing.pass_cost import TERMS, PassCost, compare

    before = PassCost(4, 1, memory_ms=10.0, arithmetic_ms=1.0, collectives_ms=5.0, host_pass_ms=2.0)
    after = before.with_collectives(1.5, "fused")
    result = compare(before, after, yield_ratio=2.0)
    assert result.saved_ms == before.total_ms - after.total_ms == 3.5
    assert result.by_term["collectives_ms"] == 3.5 and result.by_term["memory_ms"] == 0.0
    assert result.speedup == 2.0 * 18.0 / 14.5
    # every term total_ms adds, by name, in the record's own order of them
    assert list(result.by_term) == [f.name for f in fields(PassCost) if f.name in TERMS] == list(TERMS)
