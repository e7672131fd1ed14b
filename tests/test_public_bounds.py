"""#77: public rows bounded by physics a reviewer would accept: a PCIe all-reduce no faster than a round trip over
PCIe nor its bytes faster than the link, none slower than any transport; speculation's speedup never past the accept
length the row states. Hostile rows generated; the shipped tables pass."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifylab.errors import ReferenceDataError
from verifylab.store.public import (
    PCIE_ONE_WAY_US,
    latency_bounds_us,
    refuse_speedup_past_accept,
    refuse_unphysical,
)


def _row(value: float, unit: str = "us", size: float | None = 1024, world: int = 8, transport: str = "P2P") -> dict:
    return {"value": value, "unit": unit, "message_bytes": size, "world_size": world, "transport": transport,
            "hardware": "8 x RTX PRO 6000 (PCIe)", "implementation": "nccl"}  # fmt: skip


def test_the_issues_rows_are_refused():
    with pytest.raises(ReferenceDataError, match="below the wire's floor"):
        refuse_unphysical(_row(0.1), "pub-x")  # 0.1 us for a PCIe all-reduce
    with pytest.raises(ReferenceDataError, match="above the slowest transport"):
        refuse_unphysical(_row(900_000.0, size=1024), "pub-y")  # 0.9 s for 1 KB
    with pytest.raises(ReferenceDataError, match=r"accept length 2\.29"):
        refuse_speedup_past_accept(100.0, 240.0, 2.29, "ctx-1")
    refuse_speedup_past_accept(100.0, 148.0, 2.29, "ctx-2")


@given(
    world=st.sampled_from([2, 4, 8]),
    size=st.floats(min_value=1, max_value=1 << 30),
    factor=st.floats(min_value=1e-3, max_value=1e3),
)
def test_a_latency_is_accepted_exactly_inside_its_bounds(world, size, factor):
    low, high = latency_bounds_us(world, size, pcie=True, round_trip=True)
    assert low >= 2 * PCIE_ONE_WAY_US
    value = low * factor
    inside = low <= value <= high
    try:
        refuse_unphysical(_row(value, size=size, world=world), "generated")
    except ReferenceDataError:
        assert not inside
    else:
        assert inside
