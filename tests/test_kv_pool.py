"""#80, KV capacity: one pool function (GPU memory, weights per GPU, the memory fraction, the KV's width, the draft and
its KV, a collective's workspace, pipeline stages). Hypothesis varies the fraction and the KV width: the pool grows
with the fraction, an fp8 KV holds twice the tokens of a bf16 one in the same room, the streams held at a context are
the pool over that context's KV (0 where none fits), and weights that do not fit are refused naming the shortfall —
never a pool of 0 read as one stream."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifylab.errors import ModelInputError
from verifylab.model.inputs.configs import kimi_k25_costs
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.pricing.attention import kv_pool_tokens, stream_context_bytes, streams_held

KIMI, RTX = kimi_k25_costs(), gpu_named("rtx-pro-6000")


@settings(max_examples=60, deadline=None)
@given(fraction=st.floats(min_value=0.8, max_value=0.95), more=st.floats(min_value=0.001, max_value=0.04))
def test_the_pool_grows_with_the_memory_fraction_and_fp8_holds_twice_bf16(fraction, more):
    bf16 = kv_pool_tokens(KIMI, None, RTX, 8, fraction)
    assert kv_pool_tokens(KIMI, None, RTX, 8, fraction + more) > bf16
    assert abs(kv_pool_tokens(KIMI, None, RTX, 8, fraction, kv_bytes=1.0) - 2 * bf16) <= 2
    room = fraction * RTX.memory_bytes - KIMI.weights_bytes(8)
    assert bf16 == math.floor(room / stream_context_bytes(KIMI, 1.0, 8))


@given(pool=st.integers(min_value=0, max_value=10**8), context=st.sampled_from([1024, 16384, 32768, 65536]))
def test_streams_held_are_the_pool_over_a_streams_context(pool, context):
    assert streams_held(pool, context) == pool // context  # 0 where not even one fits: never rounded up to 1


def test_weights_that_do_not_fit_are_refused_naming_the_shortfall():
    with pytest.raises(ModelInputError, match=r"does not fit rtx-pro-6000 at TP 4: .* short by \d+\.\d GB"):
        kv_pool_tokens(KIMI, None, RTX, 4, 0.9)
    assert kv_pool_tokens(KIMI, None, RTX, 4, 0.9, stages=2) > 0  # two stages: each holds half the layers


def test_a_collective_workspace_comes_out_of_the_pool():
    plain = kv_pool_tokens(KIMI, None, RTX, 8, 0.9)
    less = kv_pool_tokens(KIMI, None, RTX, 8, 0.9, workspace_bytes=1e9)
    assert less == math.floor((0.9 * RTX.memory_bytes - KIMI.weights_bytes(8) - 1e9) / stream_context_bytes(KIMI, 1, 8))
    assert less < plain
