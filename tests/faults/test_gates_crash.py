"""kill -9 at every write of `gates apply` and of `gates revert` (the deterministic fault point
``verifylab.testing.faults --after-writes N`` ends the process right after its N-th file write): whatever the
point, `gates status` names the state, `gates revert` gets back to the wheel's files byte for byte (modes too, no stray
temporary file) and a new apply works."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

import verifylab.gates as gates

from ..test_gates import copy_of, pristine, tree_digest  # noqa: F401  (fixtures and helpers)

pytestmark = pytest.mark.slow
CRASHED = 137


def run_until_crash(code: str, root: Path, n: int) -> int:
    """Run ``code`` (with ``root`` bound) in a fresh interpreter that dies after its ``n``-th file write."""
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "verifylab.testing.faults", "--after-writes", str(n)),  # dies after write n
            "-c",
            f"from pathlib import Path; import verifylab.gates as g; root = Path({str(root)!r}); {code}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (0, CRASHED), proc.stderr
    return proc.returncode


def tree_with_modes(root: Path) -> dict[str, tuple[str, int]]:
    digest = tree_digest(root)
    return {rel: (h, stat.S_IMODE((root / rel).stat().st_mode)) for rel, h in digest.items()}


def assert_back_to_the_wheel(root: Path, before: dict) -> None:
    assert tree_with_modes(root) == before  # byte for byte and mode for mode; no state folder, no .tmp left


def test_kill_at_every_write_of_apply_is_recovered_by_revert(copy_of):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    before = tree_with_modes(root)
    states = []
    for n in range(1, 40):
        if run_until_crash("g.apply(root, 'sm120')", root, n) == 0:
            break
        state = gates.tree_state(root)
        states.append(state.state)
        assert state.state in ("clean", "interrupted", "applied"), (n, state)
        if (root / gates.STATE_DIR).exists():
            assert state.way_out == "verifylab gates revert" or state.state == "clean"
            gates.revert(root)
        assert_back_to_the_wheel(root, before)
    else:
        raise AssertionError("apply never finished")
    assert n > 8 and "interrupted" in states  # the walk went through the file writes
    gates.revert(root)
    assert_back_to_the_wheel(root, before)


def test_kill_at_every_write_of_apply_then_apply_again_recovers_first(copy_of):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    before = tree_with_modes(root)
    expected = set(gates.apply(root, "sm120", dry_run=True).changed)
    for n in (2, 7):  # among the backups; among the patched files
        assert run_until_crash("g.apply(root, 'sm120')", root, n) == CRASHED
        assert set(gates.apply(root, "sm120").changed) == expected  # rolls the partial apply back, applies
        assert gates.tree_state(root).state == "applied"
        gates.revert(root)
        assert_back_to_the_wheel(root, before)


def test_kill_at_every_write_of_revert_is_recovered_by_revert(copy_of):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    before = tree_with_modes(root)
    for n in range(1, 40):
        gates.apply(root, "sm120")
        if run_until_crash("g.revert(root)", root, n) == 0:
            assert_back_to_the_wheel(root, before)
            break
        assert gates.tree_state(root).state in ("interrupted", "reinstalled", "applied")
        gates.revert(root)
        assert_back_to_the_wheel(root, before)
    else:
        raise AssertionError("revert never finished")


def test_a_reinstall_over_an_applied_tree_and_an_upgrade_have_a_way_out(copy_of):  # noqa: F811
    root = copy_of("sglang", "0.5.9")
    before = tree_with_modes(root)
    gates.apply(root, "sm120")
    for rel in gates.tree_state(root).files:  # pip reinstalls the same wheel: the originals are back
        (root / rel).write_bytes((pristine("sglang", "0.5.9") / rel).read_bytes())
    state = gates.tree_state(root)
    assert (state.state, state.way_out) == ("reinstalled", "verifylab gates revert")
    gates.revert(root)
    assert_back_to_the_wheel(root, before)

    gates.apply(root, "sm120")
    edited = root / "sglang/srt/server_args.py"
    edited.write_text(edited.read_text() + "\n# upgraded\n")
    state = gates.tree_state(root)
    assert (state.state, state.way_out) == ("changed", "verifylab gates revert --forget")
    with pytest.raises(gates.GateError, match=r"changed after apply.*--forget"):
        gates.apply(root, "sm120")
    gates.revert(root, forget=True)
    assert gates.tree_state(root).state == "clean"
    (root / gates.STATE_DIR / "manifest.json").parent.mkdir()
    (root / gates.STATE_DIR / "manifest.json").write_text("{not json")
    assert gates.tree_state(root).state == "unreadable"
