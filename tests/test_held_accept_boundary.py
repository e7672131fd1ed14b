"""#77, `box --verify`: the accept length is checked on every request of a held server, by one boundary function
(``analysis/box_verify.held_accept_problem``), on generated requests: an honest server's (its verify passes its
tokens over the held length, rounded either way) always passes; a request that reported no verify count, or whose
count misses by more than one pass and the tolerance, is always named."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from verifylab.analysis.box_verify import ACCEPT_TOLERANCE, held_accept_problem

TARGET = st.floats(1.5, 4.0)
TOKENS = st.lists(st.integers(2, 4096), min_size=1, max_size=20)


@given(target=TARGET, tokens=TOKENS, data=st.data())
def test_an_honest_servers_requests_pass(target, tokens, data):
    rounding = data.draw(st.lists(st.sampled_from([math.floor, math.ceil]), min_size=len(tokens), max_size=len(tokens)))
    verifies = [max(1, r(t / target)) for t, r in zip(tokens, rounding, strict=True)]
    assert held_accept_problem(tokens, verifies, target) == ""


@given(target=TARGET, tokens=TOKENS, verifies=st.lists(st.one_of(st.none(), st.integers(-3, 5000)), min_size=20))
def test_a_request_off_by_more_than_a_pass_or_without_a_count_is_named(target, tokens, verifies):
    verifies = verifies[: len(tokens)]
    problem = held_accept_problem(tokens, verifies, target)
    missing = [v for v in verifies if v is None or v <= 0]
    off = [
        (t, v) for t, v in zip(tokens, verifies, strict=True)
        if v is not None and v > 0 and abs(v - t / target) > 1.0 + ACCEPT_TOLERANCE * t / target
    ]  # fmt: skip
    if missing:
        assert problem == f"{len(missing)} request(s) reported no accept length"
    elif off:
        assert problem.startswith(f"{len(off)} request(s) accepted ") and f"against the {target:.2f} held" in problem
    else:
        assert problem == ""


def test_a_liar_that_accepts_one_token_per_verify_is_named():
    assert held_accept_problem([128, 128], [128, 43], 3.0).startswith("1 request(s) accepted 1.00 tokens per verify")
