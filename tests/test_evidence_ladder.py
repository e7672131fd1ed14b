"""#67: answers from the nearest evidence — per context band, the box's own measurement, else a public matrix on the
same GPUs and model family, else the model; each answer names which, and is a setting where its band decides."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from verifylab.model.answers.evidence_ladder import (
    BANDS,
    CASE_BOX_OPTIONS,
    BandAnswer,
    BoxSpec,
    Rung,
    Setting,
    band_answers,
    bands_words,
)
from verifylab.model.inputs.configs import kimi_k25_costs
from verifylab.model.pricing.speculation import GainRow, SpeculationAnswer
from verifylab.sources import MeasuredRuns, SourcesInMemory
from verifylab.span import Span
from verifylab.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[1]
EMPTY = pd.DataFrame()


def _sources(public_context: pd.DataFrame, runs: MeasuredRuns | None = None) -> SourcesInMemory:
    return SourcesInMemory(EMPTY, EMPTY, runs or MeasuredRuns([]), public_context=public_context)


def _spec(name: str = "") -> BoxSpec:
    return BoxSpec(kimi_k25_costs(), "rtx-pro-6000", 8, "healthy-p2p", 4, None, name)


def _modelled(context: float) -> SpeculationAnswer:
    """A constructed model answer whose crossover falls with context (12 streams at 1k, 3 at 64k)."""
    stop = 12.0 * (1024 / context) ** 0.33
    rows = [GainRow(c, Span(1, 1), Span(1, 1), Span(1.3 / c**0.2, 1.35 / c**0.2)) for c in (1, 2, 4, 8, 16, 32)]
    return SpeculationAnswer(rows, (stop, stop * 1.2), {})


def _box_verify(context: int, eagle: list[float]) -> pd.DataFrame:
    rows = []
    for streams, rate in zip((8, 16, 32), eagle, strict=True):
        rows.append({"role": "plain", "configuration": "plain decoding", "streams": streams,
                     "measured_tokens_per_s": 100.0 * streams ** 0.5})  # fmt: skip
        rows.append({"role": "chosen", "configuration": "EAGLE-3, 4 draft tokens", "streams": streams,
                     "measured_tokens_per_s": rate * 100.0 * streams ** 0.5})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_box_with_its_own_measurement_answers_from_it_at_its_context_and_from_public_evidence_elsewhere():
    public = Evidence(ROOT / "data").public_context
    runs = MeasuredRuns.of_frames(
        {"box-run": {"box_verify": _box_verify(16384, [1.2, 1.1, 0.9])}},
        parameters={"box": "my-box", "context": 16384},
    )
    answers = {a.band: a for a in band_answers(_sources(public, runs), _spec("my-box"), _modelled)}
    assert answers["16k"].rung is Rung.BOX and "box-run" in answers["16k"].source
    assert answers["16k"].stops[0] is not None and 16 < answers["16k"].stops[0] < 32
    assert {answers[b].rung for b in ("short", "32k", "64k+")} == {Rung.PUBLIC}
    words = bands_words(list(answers.values()))
    assert Rung.BOX.value in words and Rung.PUBLIC.value in words


def test_a_box_with_only_public_evidence_answers_every_band_from_it_and_the_limit_falls_with_context():
    answers = band_answers(_sources(Evidence(ROOT / "data").public_context), _spec(), _modelled)
    assert [a.band for a in answers] == [b for b, _ in BANDS]
    assert {a.rung for a in answers} == {Rung.PUBLIC}
    assert all(a.decisive and a.setting.startswith("EAGLE-3 on up to") for a in answers)
    highs = [a.stops[1] for a in answers]
    assert all(h is not None for h in highs) and highs == sorted(highs, reverse=True)


def test_a_box_with_neither_answers_from_the_model_and_says_so():
    answers = band_answers(_sources(EMPTY), _spec(), _modelled)
    assert {a.rung for a in answers} == {Rung.MODEL}
    assert Rung.MODEL.value in bands_words(answers)


def test_a_band_that_does_not_decide_names_the_one_command_that_settles_it():
    wide = BandAnswer("32k", 32768, Rung.MODEL, "m", Span(1.1, 1.3), (2.0, 40.0), 128)
    assert not wide.decisive
    assert wide.setting.startswith(
        f"measure first: `verifylab box --plan {CASE_BOX_OPTIONS} --context 32768 --verify FILE`"
    )
    assert "GPU minutes" in wide.setting
    off = BandAnswer("64k+", 65536, Rung.MODEL, "m", Span(0.7, 0.9), (1.0, 1.0), 128)
    assert off.decisive and off.setting == "EAGLE-3 off (it loses from one stream)"
    always = BandAnswer("short", 1024, Rung.PUBLIC, "p", Span(1.2, 1.3), (None, None), 128)
    assert always.setting == "EAGLE-3 on at every load to 128 streams"


def _gains(ends: list[tuple[float, float]], crossover=(20.0, 25.0)):
    """A constructed model answer with these gains at 1, 2, 4, 8, 16 and 32 streams."""
    rows = [GainRow(c, Span(1, 1), Span(1, 1), Span(*g)) for c, g in zip((1, 2, 4, 8, 16, 32), ends, strict=True)]
    return lambda context: SpeculationAnswer(rows, crossover, {})


def test_a_gain_that_loses_at_one_stream_and_pays_under_load_is_on_between_not_off():
    """#78: the decision page said "off (it loses from one stream)" for a band whose own evidence paid 1.2x at 16
    streams; it is off below where both ends of the gain reach 1, on from there to where they stop."""
    pays_between = [(0.8, 0.85), (0.9, 0.95), (1.05, 1.1), (1.2, 1.25), (1.1, 1.15), (0.9, 0.95)]
    (short, *_) = band_answers(_sources(EMPTY), _spec(), _gains(pays_between))
    assert short.kind is Setting.ON_BETWEEN and short.pays
    assert (
        short.setting == "EAGLE-3 off below 3 streams (it loses at one), on from there up to 20-25 streams, off beyond"
    )
    optimistic_only = [(0.8, 0.85), (0.9, 0.95), (0.95, 1.1), (0.98, 1.25), (0.9, 1.15), (0.8, 0.95)]
    (short, *_) = band_answers(_sources(EMPTY), _spec(), _gains(optimistic_only))
    assert short.kind is Setting.MEASURE and short.setting.startswith("measure first")
    never = [(0.8, 0.85), (0.8, 0.9), (0.7, 0.9), (0.6, 0.8), (0.5, 0.7), (0.4, 0.6)]
    (short, *_) = band_answers(_sources(EMPTY), _spec(), _gains(never, (1.0, 1.0)))
    assert short.kind is Setting.OFF and short.setting == "EAGLE-3 off (it loses from one stream)"
