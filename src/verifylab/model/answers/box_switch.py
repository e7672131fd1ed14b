"""A box's answers as settings (:class:`Switch`): EAGLE-3's from the model on the box's own numbers, or from the
decision page's band where a public matrix ran the box, the model's beside it. The words only say the setting."""

from __future__ import annotations

from enum import Enum

from verifylab.model.answers.evidence_ladder import BandAnswer, Setting
from verifylab.model.answers.words import crossover_words, recrossing_words
from verifylab.model.pricing.speculation import SpeculationAnswer


class Switch(Enum):
    """What one answer of a box sets, as a value (the words beside it only say it): on, off, not resolved by the
    price's range (measure it), or not priced at all."""

    ON = "on"
    ON_UNDER_LOAD = "on under load"  # it loses at one stream and pays from a load on
    OFF = "off"
    MEASURE = "not resolved"
    NOT_PRICED = "not priced"


SPECULATION_SUMMARY = {  # EAGLE-3's setting in the page's one-line finding
    Switch.ON: "on at light load",
    Switch.ON_UNDER_LOAD: "on under load (it loses at one stream)",
    Switch.OFF: "off",
    Switch.MEASURE: "not resolved at one stream",
    Switch.NOT_PRICED: "not priced",
}


def modelled_speculation(spec: SpeculationAnswer, consistent: bool, decode_tok_s: float) -> tuple[Switch, str]:
    """EAGLE-3's setting from its gain at one stream, and its words (where it stops paying, from the crossover)."""
    one = spec.rows[0].gain
    words = crossover_words(spec.crossover) + recrossing_words(spec.rows)
    if not consistent:
        why = "is faster than this model's bytes and this box's all-reduces allow"
        why += " (check --decode-tok-s, --config and --gpu)"
        return Switch.NOT_PRICED, f"not priced: {decode_tok_s:g} tok/s {why}"
    if one.high < 1:
        return Switch.OFF, f"off: EAGLE-3 loses even at one stream (gain {one.text(2)})"
    if one.low < 1:
        return (
            Switch.MEASURE,
            f"not resolved at one stream (gain {one.text(2)}): measure EAGLE-3 here; at best it {words}",
        )
    return Switch.ON, f"on at light load (gain {one.text(2)} at one stream); it {words}"


BAND_SWITCH = {  # a public band's setting as this box's
    Setting.OFF: Switch.OFF,
    Setting.ON: Switch.ON,
    Setting.ON_UP_TO: Switch.ON,
    Setting.ON_BETWEEN: Switch.ON_UNDER_LOAD,
    Setting.MEASURE: Switch.MEASURE,
}


def banded_speculation(band: BandAnswer, modelled: str) -> tuple[Switch, str]:
    """The public band as this box's EAGLE-3 answer, the model on the box's own numbers beside it, labelled."""
    widened = f", widened by the transfers' out-of-sample miss {band.widened:.0%}" if band.widened else ""
    return BAND_SWITCH[band.kind], (
        f"{band.setting} at {band.context:,} tokens of context ({band.rung.value}: {band.source}; the decision "
        f"page's band{widened}); beside it, modelled on this box's own curve and decode rate: {modelled}"
    )
