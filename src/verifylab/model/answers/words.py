"""The answers' verdicts in words, each from the value that computes it: keep speculation or not, the fastest option by
load, where a gain curve stops paying (and pays again), a range that may be negative."""

from __future__ import annotations

from collections.abc import Sequence

from verifylab.model.case.options import OPTIONS, Option
from verifylab.model.case.speculation import SpeculationCase
from verifylab.model.pricing.pricer import Box
from verifylab.model.pricing.speculation import DEFAULT_STREAMS, GainRow, answer, combined_crossover, crossings
from verifylab.span import Span
from verifylab.vocab import Drafter


def signed_text(span: Span, digits: int) -> str:
    """A range that may hold negative values, readable: ``0.11-0.45``, ``-1.45 to -1.20``."""
    if span.low >= 0:
        return span.text(digits)
    low, high = f"{span.low:.{digits}f}", f"{span.high:.{digits}f}"
    return low if low == high else f"{low} to {high}"


def keep_speculation_words(gain: Span) -> str:
    """Keep EAGLE-3 at one stream, from its gain's range: ``yes``, ``no``, or measure first."""
    if gain.low >= 1:
        return "yes"
    if gain.high < 1:
        return "no"
    return "measure it on the box first (its gain straddles 1)"


def fastest_words(best_by_load: dict[int, str], caveats: dict[int, str] | None = None, why: bool = True) -> str:
    """The fastest option by streams in words: one title when it wins at every load priced and is decided at each;
    where it is not decided (a tie, an extrapolated price: ``caveats``), it is named as ahead on its midpoint only,
    with why (``why=False``: "not decided", the reasons given elsewhere on the page)."""
    caveats = caveats or {}
    titles = {c: OPTIONS[Option(k)].title for c, k in best_by_load.items()}
    if len(set(titles.values())) == 1 and not caveats:
        return f"{next(iter(titles.values()))} at every load priced ({', '.join(map(str, titles))} streams)"

    def at(c: int, title: str) -> str:
        where = f"{c} stream{'' if c == 1 else 's'}"
        if c not in caveats:
            return f"{where}: {title}"
        return f"{where}: {title} ahead on its midpoint only, " + (caveats[c] if why else "not decided")

    return "; ".join(at(c, t) for c, t in titles.items())


def crossover_words(crossover: tuple[float | None, float | None], consistent: bool = True) -> str:
    """A crossover range (pessimistic, optimistic; None: beyond the streams priced) as a verb phrase: ``pays up to
    128 streams``, ``never pays``, ``stops paying at about 12 streams``, ``stops paying between 4.5 and 30
    streams``."""
    last = max(DEFAULT_STREAMS)
    low, high = crossover
    if low is None and high is None:
        return f"pays up to {last} streams"

    def streams(value: float | None) -> str:
        if value is None:
            return f"beyond {last}"
        return "1" if value <= 1 else (f"{value:.0f}" if value >= 10 else f"{value:.1f}")

    if high is not None and high <= 1:
        text = "never pays"
    elif low is not None and high is not None and streams(low) == streams(high):
        text = f"stops paying at about {streams(low)} streams"
    elif high is None:
        first = streams(low)
        text = f"stops paying somewhere from {first} stream{'' if first == '1' else 's'} to beyond {last}"
    else:
        text = f"stops paying between {streams(low)} and {streams(high)} streams"
    if not consistent:
        text += " (not the case study's regime: it decodes faster than this regime allows)"
    return text


def stop_range_words(crossover: tuple[float | None, float | None], first: int, last: int) -> str:
    """Where speculation stops paying over the stream counts ``first``..``last`` priced, pessimistic and optimistic
    (None: beyond ``last``), as a verb phrase; one phrase where both ends read alike."""

    def end(value: float | None) -> str:
        if value is None:
            return f"still pays at {last} streams"
        return "never pays" if value <= first else f"stops paying at {value:.1f} streams"

    low, high = (end(v) for v in crossover)
    return low if low == high else f"pessimistically {low}, optimistically {high}"


def case_recrossing(case: SpeculationCase) -> str:
    """Where the case's gain pays again after it stopped, over its draft-token range (the first chain that does)."""
    return next((w for a in case.by_draft_tokens.values() if (w := recrossing_words(a.rows))), "")


def case_off_words(case: SpeculationCase) -> str:
    """Where speculation stops paying on the case's box and where it pays again: the decision page's Table 4.1 cell
    and ``model whatif``'s, one sentence."""
    return crossover_words(case.crossover, case.consistent) + case_recrossing(case)


def recrossing_words(rows: Sequence[GainRow]) -> str:
    """Where a gain that fell below 1 comes back to 1 or above at more streams, as a clause to follow
    :func:`crossover_words`: ``", and pays again from about 90 streams"`` when both ends of its range come back,
    ``", and may pay again from about 18 streams (its optimistic end)"`` when one does; empty when none does."""
    again: dict[str, float] = {}
    for end in ("low", "high"):
        stopped = False
        for at, direction in crossings([(r.streams, r.gain.low if end == "low" else r.gain.high) for r in rows]):
            stopped = stopped or direction == "stops"
            if stopped and direction == "pays":
                again[end] = at
                break
    if not again:
        return ""
    first = min(again.values())
    where = f"about {first:.0f}" if first >= 10 else f"{first:.1f}"
    if len(again) == 2:
        return f", and pays again from {where} streams"
    which = "optimistic" if "high" in again else "pessimistic"
    return f", and may pay again from {where} streams (its {which} end)"


def speculation_in_words(case: SpeculationCase, box: Box, accept: float) -> tuple[str, str]:
    """EAGLE-3 on ``box`` (the case's box, or it with one input changed) at ``accept``, calibrated as ``case``, over
    its draft-token range: the gain at one stream as text, and where speculation stops paying in words."""
    results = [answer(box, case.calibrated, Drafter.EAGLE3, accept, k) for k in case.by_draft_tokens]
    ones = [r.rows[0].gain for r in results]
    gain = Span(min(g.low for g in ones), max(g.high for g in ones))
    return gain.text(2), crossover_words(combined_crossover(results), case.consistent)
