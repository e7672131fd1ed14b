"""#66: context length in the model — a public per-context matrix stored quoted, the context terms fitted on its
plain cells and checked on every cell they never saw, the answers (`model speculation --context`, `box --plan
--context`) moved to the owner's context where the matrix ran the box, attention and the KV pool as terms of a pass,
and no gain above its accept length printed unflagged."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from verifylab.analysis.grid_agreement import before_run_view
from verifylab.cli import app
from verifylab.errors import ReferenceDataError
from verifylab.model.fits.context import context_check, crossover_check, fit_attention, fitted_matrix
from verifylab.model.inputs.configs import eagle3_draft_for, kimi_k25_costs
from verifylab.model.inputs.context_matrix import context_matrices
from verifylab.model.inputs.gpus import gpu_named
from verifylab.model.inputs.stored import stored_inputs
from verifylab.model.pricing.attention import AttentionTerms, streams_held
from verifylab.model.pricing.pricer import Box, Overheads, constant_curve, price_step, price_verify, scenarios
from verifylab.model.pricing.speculation import UNPHYSICAL, gain_flag, gains
from verifylab.span import Span
from verifylab.store.evidence import Evidence
from verifylab.store.public_context import PUBLIC_CONTEXT_FILE, load_public_context
from verifylab.vocab import Drafter

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "examples" / "configs" / "kimi-k2.5-int4"
CONTEXTS = {1024: None, 16384: "16k", 32768: "32k", 65536: "64k"}


@pytest.fixture(scope="module")
def ev() -> Evidence:
    return Evidence(ROOT / "data")


def _copy_with(tmp_path: Path, edit) -> Path:
    source = ROOT / "data" / PUBLIC_CONTEXT_FILE
    frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    edit(frame)
    (tmp_path / "reference").mkdir(parents=True)
    frame.to_csv(tmp_path / PUBLIC_CONTEXT_FILE, index=False)
    return tmp_path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.loc.__setitem__((3, "plain_tok_s"), "999.9"), "quote_plain does not carry"),
        (lambda f: f.loc.__setitem__((0, "url"), "https://github.com/voipmonitor/rtx6kpro/blob/main/x.md"), "pinned"),
        (lambda f: f.loc.__setitem__((5, "streams"), "1"), "twice"),
        (lambda f: f.loc.__setitem__((7, "accept_high"), "9"), "accept_low <= accept_high"),
    ],
)
def test_a_bad_public_row_is_refused_with_its_line(tmp_path, edit, message):
    with pytest.raises(ReferenceDataError, match=message):
        load_public_context(_copy_with(tmp_path, edit))


def test_the_fit_recovers_planted_terms():
    """A matrix made from known terms (per pass 0.04, per stream 0.02 ms per 1,000 tokens) gives them back."""
    rows = []
    for context in (256, 16384, 32768, 65536):
        for streams in (1, 2, 4, 8):
            step = 10 + streams * 0.5 + (context - 256) / 1000 * (0.04 + 0.02 * streams)
            rows.append({"matrix": "m", "context": context, "streams": streams, "plain_tok_s": streams * 1e3 / step,
                         "spec_tok_s": 2 * streams * 1e3 / (3 * step)})  # fmt: skip
    frame = pd.DataFrame(rows).assign(
        model="Kimi", config="kimi-k2.5", gpu="rtx-pro-6000", gpus=8, interconnect="healthy P2P", engine="e",
        attention="a", kv_dtype="fp8", dcp=1, verify_tokens=4, accept_low=2.0, accept_high=2.0, accept_note="n",
        kv_pool_plain_tokens=1e6, kv_pool_spec_tokens=1e6, context_label=lambda f: f["context"].astype(str),
        url="u", published="p",
    )  # fmt: skip
    fit = fit_attention(context_matrices(frame)[0])
    assert fit.per_pass == pytest.approx(0.04) and fit.per_stream == pytest.approx(0.02)
    assert fit.fit_rms == pytest.approx(0.0, abs=1e-9)
    assert fit.reads_per_cycle == pytest.approx(4 + 4 / 61)  # once per verified token, the draft's passes: named


def test_every_held_out_crossover_to_64k_lies_in_a_range_no_wider_than_3x_and_falls_with_context(ev):
    check = crossover_check(stored_inputs(ev))
    fitted = fitted_matrix(stored_inputs(ev))[0].name
    for matrix, part in check.groupby("matrix"):
        held = part[part["role"] == "held out"].set_index("context_label").loc[["16k", "32k", "64k"]]
        assert held["inside"].tolist() == [True, True, True], (matrix, held)
        assert (held["width"] <= 3).all()
        assert held["predicted_high"].is_monotonic_decreasing and held["reported_stops"].is_monotonic_decreasing
    cells = context_check(stored_inputs(ev))
    held_cells = cells[cells["role"] == "held out"]
    misses = pd.concat([held_cells["plain_miss"], held_cells["spec_miss"].dropna()]).astype(float).abs()
    assert misses.median() <= 0.15
    assert set(cells.loc[cells["role"] == "plain fitted", "matrix"]) == {fitted}  # the other matrix never fits


def test_model_speculation_answers_from_the_matrix_at_the_owners_context(ev):
    check = crossover_check(stored_inputs(ev))
    reported = check[check["matrix"] == fitted_matrix(stored_inputs(ev))[0].name].set_index("context")
    previous = math.inf
    for context, label in CONTEXTS.items():
        result = CliRunner().invoke(
            app,
            ["model", "speculation", "--config", str(FIXTURE), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
             "healthy-p2p", "--context", str(context), "--data-dir", str(ROOT / "data"), "--json",
             "--engine", "vllm", "--shared-prefix"],  # the page's own engine, its prompts sharing one prefix
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        payload = json.loads(result.output)
        assert payload["provenance"].startswith("reported (public)")
        low, high = payload["crossover_streams_low"], payload["crossover_streams_high"]
        assert low is not None and high is not None and high / low <= 3
        assert high <= previous * 1.05  # falls with context
        previous = high
        if label is not None:
            assert low <= reported.loc[context, "reported_stops"] <= high


MATRIX_BOX = ["model", "speculation", "--config", str(FIXTURE), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
              "healthy-p2p", "--context", "16384", "--data-dir", str(ROOT / "data")]  # fmt: skip


@pytest.mark.parametrize("accept", ["0.5", "9"])
def test_an_accept_length_no_chain_yields_is_refused_where_a_matrix_answers_too(accept):
    """The matrix's transfer takes the owner's accept length as the model does: outside 1 to the chain's draft
    tokens it is refused in one line, as `box --plan` and the model refuse it (it printed a table before)."""
    result = CliRunner().invoke(app, [*MATRIX_BOX, "--accept", accept])
    assert result.exit_code == 2 and result.output.strip().splitlines() == [
        f"error: accept length {accept} must lie in 1..4 (the chain's draft tokens)"
    ], result.output


@pytest.mark.parametrize(
    ("asked", "named"),
    [(["--fusion"], "--fusion"), (["--pcie-ipc"], "--pcie-ipc"), (["--decode-tok-s", "80"], "--decode-tok-s"),
     (["--routing", "collapsed"], "--routing collapsed")],
)  # fmt: skip
def test_accept_asked_where_a_matrix_ran_the_box_says_what_put_the_answer_on_the_model(asked, named):
    """Without --accept, an ask that leaves the matrix names the option that did, not "no matrix ran this box"."""
    result = CliRunner().invoke(app, [*MATRIX_BOX, *asked])
    output = " ".join(result.output.split())
    assert result.exit_code == 2 and "no stored public matrix ran this box" not in output, output
    assert f"a public matrix ran this box, but {named} asks the model" in output
    assert "leave it out for the matrix's own answer" in output
    alone = CliRunner().invoke(app, MATRIX_BOX)
    assert alone.exit_code == 0 and "reported (public)" in " ".join(alone.output.split())


def test_a_load_past_the_matrixs_streams_names_the_streams_it_ran():
    """A plan answered by a public matrix at a load it never ran is refused naming the matrix's stream span (it said
    "no rate at 250, 256 running (beyond the evidence's streams)" for --load 500)."""
    argv = ["box", "--plan", "--config", str(FIXTURE), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime",
            "healthy-p2p", "--data-dir", str(ROOT / "data")]  # fmt: skip
    refused = CliRunner().invoke(app, [*argv, "--load", "500"])
    assert refused.exit_code == 2, refused.output
    assert re.search(
        r"no rate at 250, 256 running: \S+ ran 1 to 128 streams; give a --load within them", refused.output
    )
    assert CliRunner().invoke(app, [*argv, "--load", "128"]).exit_code == 0


def test_the_all_reduce_choice_says_a_matrixs_rates_cannot_tell_the_all_reduces_apart():
    """Where a public matrix gives the table's rates, the all-reduce line's modelled goodputs (272-321 beside the
    table's 311-314 for the same configuration) say the table's are the matrix's, which ran one all-reduce; a plan
    on the model's own rates has no such clause."""
    from verifylab.model.answers.plan_answer import MATRIX_RATES

    def all_reduce_line(*argv: str) -> str:
        result = CliRunner().invoke(app, ["box", "--plan", *argv, "--data-dir", str(ROOT / "data")])
        assert result.exit_code == 0, result.output
        text = " ".join(result.output.split())
        return text[text.index("all-reduce: ") : text.index(" weights: ")]

    kimi = all_reduce_line("--config", str(FIXTURE), "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p",
                           "--context", "32768")  # fmt: skip
    assert "(modelled, the best configuration on each)" in kimi and kimi.endswith(MATRIX_RATES)
    qwen = all_reduce_line("--config", str(ROOT / "examples" / "configs" / "qwen3-30b-a3b"), "--gpu", "rtx-pro-6000",
                           "--tp", "8", "--regime", "healthy-p2p", "--accept", "2.4")  # fmt: skip
    assert "(modelled, the best configuration on each)" in qwen and MATRIX_RATES not in qwen


def test_box_plan_follows_the_context_and_its_crossovers_hold_the_held_out_ones(ev):
    check = crossover_check(stored_inputs(ev))
    reported = check[check["matrix"] == fitted_matrix(stored_inputs(ev))[0].name].set_index("context")["reported_stops"]

    def plan(context: int) -> str:
        result = CliRunner().invoke(
            app,
            ["box", "--plan", "--config", str(FIXTURE), "--gpu", "rtx-pro-6000", "--gpus", "8", "--tp", "8",
             "--regime", "healthy P2P", "--context", str(context), "--load", "16", "--data-dir", str(ROOT / "data"),
             "--engine", "vllm"],  # the page's own engine: its crossovers are vLLM's
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    outputs = {context: plan(context) for context in CONTEXTS}
    assert "choice │ EAGLE-3" in outputs[16384] and "choice │ plain decoding" in outputs[65536]
    assert "evidence: public" in outputs[16384] and "no launch command: vLLM answers" in outputs[16384]
    previous = math.inf
    for context, label in CONTEXTS.items():  # the decision page's band (#78): widened by the transfers' miss, and
        # capped by the distinct streams the page's pool holds (its own cells shared one prefix, so ran past it)
        capped = re.search(
            r"speculation: EAGLE-3 on at every load the KV pool holds \((\d+) distinct", outputs[context]
        )
        if capped:
            cap = int(capped.group(1))
            assert cap <= previous * 1.05 and (label is None or reported.loc[context] >= cap), outputs[context]
            previous = cap
            continue
        found = re.search(r"speculation: EAGLE-3 on up to (\d+)(?:-(\d+))? streams, off beyond", outputs[context])
        assert found, outputs[context]
        low, high = float(found.group(1)), float(found.group(2) or found.group(1))
        assert high / low <= 3 and high <= previous * 1.05
        previous = high
        if label is not None:
            assert low <= reported.loc[context] <= high


def _box(terms: AttentionTerms | None = None, fraction: float | None = None, context: float = 32768) -> Box:
    target = kimi_k25_costs()
    fields = {"attention": terms} if terms is not None else {}
    return Box(target, gpu_named("rtx-pro-6000"), tp=8, draft=eagle3_draft_for(target), context=context,
               mem_fraction=fraction, allreduce_us=constant_curve(10.0), **fields)  # fmt: skip


def test_attention_read_once_per_verified_token_costs_a_verify_k_times_the_plain_step():
    ov = Overheads(Span(0.0, 0.0), 0.0, {Drafter.EAGLE3: (0.0, 0.0)})
    s = scenarios(_box())[0]
    per_token = _box(AttentionTerms(0.0, 1.0, "token", "test"))
    step, verify = price_step(per_token, ov, 4, s), price_verify(per_token, ov, 4, 4, s)
    assert verify.kv_ms == pytest.approx(4 * step.kv_ms)
    bytes_once = _box()
    assert price_verify(bytes_once, ov, 4, 4, s).kv_ms == pytest.approx(price_step(bytes_once, ov, 4, s).kv_ms)
    assert price_step(_box(AttentionTerms(0.0, 1.0, "pass", "same as bytes")), ov, 4, s).kv_ms == pytest.approx(
        price_step(bytes_once, ov, 4, s).kv_ms
    )


def test_streams_beyond_the_kv_pool_queue():
    ov = Overheads(Span(1.0, 1.0), 0.01, {Drafter.EAGLE3: (0.5, 0.01)})
    box = _box(fraction=0.95, context=131072)
    plain_pool, spec_pool = box.pools()
    held = streams_held(plain_pool, box.context)
    rows = {r.streams: r for r in gains(box, ov, Drafter.EAGLE3, 2.0, 4, [held, held * 4])}
    assert 0 < spec_pool < plain_pool
    assert rows[held * 4].plain_tokens_per_s == rows[held].plain_tokens_per_s  # the rest wait


def test_a_gain_above_its_accept_length_is_flagged_with_what_to_check():
    assert gain_flag(3.11, 2.98) == UNPHYSICAL and gain_flag(2.5, 2.98) == ""
    table = pd.DataFrame(
        {"accept_length": [2.98, 2.98], "streams": [8, 16], "gain": [3.11, 2.5], "gain_low": [3.0, 2.4],
         "gain_high": [3.2, 2.6], "before_low": [1, 1], "before_high": [2, 2], "before_miss": [0.5, 0.2],
         "after_low": [1, 1], "after_high": [2, 2], "after_role": ["fit", "predicted"], "plain_ms": [1, 1],
         "plain_before_miss": [0, 0], "spread_floor_ms": [1, 1], "run": ["r", "r"], "provenance": ["m", "m"]}
    )  # fmt: skip
    assert before_run_view(table)["check"].tolist() == [UNPHYSICAL, ""]


def test_no_exported_gain_above_its_accept_length_goes_unflagged(built_book):
    """Every export of the built book with an accept length and a gain flags each row whose gain (or its range's
    top) exceeds the accept length."""
    pages = " ".join(p.read_text(encoding="utf-8") for p in built_book.rglob("*.html") if "_static" not in p.parts)
    editions = [d for d in (built_book.parent / "editions").iterdir() if d.is_dir() and d.name in pages]
    exports = sorted(p for d in editions for p in (d / "exports").glob("*.csv"))
    assert exports
    checked = 0
    for path in exports:
        if path.name.endswith(".data.csv"):
            continue
        frame = pd.read_csv(path)
        accepts = [c for c in frame.columns if "accept" in c.lower()]
        gains_ = [c for c in frame.columns if c.lower().startswith("gain") and "interval" not in c.lower()]
        if not accepts or not gains_:
            continue
        accept = pd.to_numeric(frame[accepts[0]], errors="coerce")
        top = pd.concat([pd.to_numeric(frame[g], errors="coerce") for g in gains_], axis=1).max(axis=1)
        above = frame[top > accept + 1e-9]
        checked += 1
        if above.empty:
            continue
        assert "check" in frame.columns, path.name
        assert above["check"].fillna("").str.startswith("unphysical").all(), (path.name, above)
    assert checked


def test_the_stored_fixture_is_the_case_studys_shape():
    from verifylab.model.answers.context_answer import same_shape
    from verifylab.model.inputs.configs import read_config

    assert same_shape(read_config(FIXTURE, None), kimi_k25_costs())


def test_model_whatif_prices_every_option_at_the_context_given():
    def crossover(context: int) -> list[str]:
        result = CliRunner().invoke(
            app, ["model", "whatif", "--batch", "8", "--context", str(context), "--data-dir", str(ROOT / "data"),
                  "--json"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        rows = json.loads(result.output)
        return [
            r["eagle3_gain_high"]
            for r in rows
            if r["eagle3_gain_high"] is not None and r["regime_key"] == "healthy P2P"
        ]

    short, long = crossover(2048), crossover(65536)
    assert len(short) == len(long) == 1
    assert long[0] < short[0]  # on the healthy box, speculation gains less at 64k than at 2k
