"""`box --verify` serves what the plan launches, whatever the owner's YAML holds: on generated extra arguments (the
engine flags with any value, either spelling, repeated, beside any other words) and any backend and KV dtype the plan
priced, the settings the check serves give each flag the plan's value, or the check is refused naming the file's
value against the plan's; nothing else is raised (``bench.box_verify.served_as_priced``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifylab.bench.box_verify import DEFAULT_KV, ENGINE_SETTINGS, VerifySettings, _named, served_as_priced
from verifylab.errors import ParameterError
from verifylab.model.answers.box_plan import BoxPlan

NAMES = st.sampled_from(["triton", "fa3", "flashinfer", "fp8_e4m3", "auto", "bf16", "x"])
FLAGS = [flag for _, flag in ENGINE_SETTINGS]
WORD = st.one_of(NAMES, st.text(max_size=12), st.sampled_from(FLAGS))
ARGS = st.lists(st.one_of(WORD, st.builds(lambda f, v: f"{f}={v}", st.sampled_from(FLAGS), NAMES)), max_size=8)


@pytest.fixture(scope="module")
def plan() -> BoxPlan:
    from tests.test_box_plan import DATA
    from verifylab.model.answers.box_plan import Slo, choose
    from verifylab.model.fits.grid import first_grid_fit
    from verifylab.model.inputs.stored import stored_runs
    from verifylab.store.evidence import Evidence

    fit = first_grid_fit(stored_runs(Evidence(DATA).measured))
    assert fit is not None
    return choose(fit.box, fit.overheads, 2, Slo(2000, 50), accept=2.0, stated_for=4)


@given(args=ARGS, backend=NAMES, kv=st.one_of(st.none(), NAMES), field_backend=st.one_of(st.none(), NAMES))
def test_the_check_serves_the_plans_engine_or_is_refused_naming_both(plan, args, backend, kv, field_backend):
    priced = replace(plan, attention_backend=backend, kv_cache_dtype=kv)
    settings = VerifySettings.model_validate(
        {"base": {"model_path": "m", "extra_args": args, "attention_backend": field_backend}}
    )
    try:
        served = served_as_priced(priced, settings, "verify.yaml").base
    except ParameterError as exc:
        said = str(exc)
        assert said.startswith("--verify verify.yaml: --") and "against the plan's" in said
        return
    assert _named(served, "attention_backend", FLAGS[0]) == backend
    named_kv = _named(served, "kv_cache_dtype", FLAGS[1])
    assert named_kv == kv if kv is not None else (named_kv is None or named_kv in DEFAULT_KV)
