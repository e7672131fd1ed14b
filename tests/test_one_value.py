"""One quantity, one value: every number with a unit in the prose of chapters 04 and 05 and the decision page is one
the code computes — the cycle account, the modelled options, a reported figure, or a measured finding — never
a number typed into a page (#15)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from verifylab.analysis import box_verify
from verifylab.chapters import ch04_fusion_vs_elimination as ch04
from verifylab.model.answers.decision import decision_table
from verifylab.model.case.cycle import cycle_account
from verifylab.model.case.whatif import whatif_table
from verifylab.model.inputs.stored import stored_inputs
from verifylab.publish.findings import key_findings
from verifylab.publish.pages import book_pages
from verifylab.span import Span

REPO = Path(__file__).resolve().parents[1]
NUMBER_WITH_UNIT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)\s?(ms|µs|us|tok/s)(?![\w])")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)")
SKIPPED = {"table", "pre", "svg", "script", "style", "code"}
VOID = ("br", "img", "input", "meta", "hr", "col", "link", "wbr", "source", "area", "base", "embed", "track")


class Prose(HTMLParser):
    """The text of a page outside tables, code and charts (``keep_tables``: tables too)."""

    def __init__(self, keep_tables: bool = False) -> None:
        super().__init__()
        self.skipped = SKIPPED - ({"table"} if keep_tables else set())
        self.depth, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class") or ""
        if tag in self.skipped or "cell_input" in classes or self.depth:
            self.depth += tag not in VOID  # a void element (a run id's <wbr>) opens nothing to close

    def handle_endtag(self, tag):
        if self.depth and tag not in VOID:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def prose(path: Path, keep_tables: bool = False) -> str:
    parser = Prose(keep_tables)
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join(parser.parts)


def _span_texts(span: Span, digits: int) -> set[str]:
    ends = {f"{span.low:.{digits}f}", f"{span.high:.{digits}f}"}
    return ends | {span.text(digits)}


@pytest.fixture(scope="module")
def computed(shipped) -> set[str]:
    """Every number the code puts into these pages, as the pages format it."""
    ev = shipped
    a = cycle_account(stored_inputs(ev))
    allowed: set[str] = set()
    for span, _, digits in a.quantities().values():
        allowed |= _span_texts(span, digits)
    for streams in ch04.LOADS:
        for r in whatif_table(stored_inputs(ev), streams).dropna(subset=["verify_ms_low"]).itertuples():
            allowed |= _span_texts(Span(r.verify_ms_low, r.verify_ms_high), 1)
            allowed |= _span_texts(Span(r.tokens_per_s_low, r.tokens_per_s_high), 0)
            allowed |= _span_texts(Span(r.floor_ms_low, r.floor_ms_high), 1)
    for cell in decision_table(ev).astype(str).to_numpy().ravel():  # the decision table's own cells
        allowed |= {m.group(1) for m in NUMBER.finditer(cell)}
    checks = box_verify.checked(ev.measured)  # chapter 5's measured check of a recommendation
    for run in sorted(set(checks["run"])) if not checks.empty else []:
        v = box_verify.verdict(ev.measured, run, checks[checks["run"] == run])
        allowed |= {f"{g:.0f}" for g in (v.chosen_goodput, v.runner_up_goodput, v.winner_goodput)}
    for found in key_findings(ev):  # the edition's findings, as the summary shows them
        allowed |= {m.group(1) for m in NUMBER.finditer(found.shown)}
    figures = ev.figures.dropna(subset=["value"]).set_index("figure_id")["value"]
    allowed |= {f"{v:g}" for v in figures} | {f"{v:.1f}" for v in figures}
    public = pd.to_numeric(ev.public["value"], errors="coerce").dropna()  # public figures, quoted in notes
    allowed |= {f"{v:g}" for v in public} | {f"{v:.1f}" for v in public}
    runs = figures[figures.index.str.startswith("fusion_run_")]
    allowed |= {f"{runs.min():.1f}-{runs.max():.1f}"}
    for low in figures.index[figures.index.str.endswith("_estimate_low")]:  # reported ranges, e.g. "2-8 ms"
        allowed.add(f"{figures[low]:g}-{figures[low.replace('_low', '_high')]:g}")
    params = ch04.Params(data_dir=ev.data_dir)
    computed_prose = (  # each finding chapter 4's pages print, formatted by the code
        ch04.finding(ev, params),
        *(
            finding(ev)
            for finding in (
                ch04.measured_finding, ch04.prediction_finding, ch04.engine_attention_finding,
                ch04.engine_experts_finding, ch04.verify_kernels_finding, ch04.verify_kernel_refit_finding,
                ch04.verify_growth_finding,
                ch04.context_finding, ch04.options_finding, ch04.reconciliation_finding,
                ch04.compute_check_finding, ch04.public_evidence_finding, ch04.public_speculation_finding,
                ch04.hypotheses_order,
            )
        ),
    )  # fmt: skip
    for measured in computed_prose:  # formatted by the code from measured runs and the model
        allowed |= {m.group(1) for m in NUMBER_WITH_UNIT.finditer(str(measured))}
    from verifylab.publish.decision import regime_rules

    rows = {row["regime_key"]: row for row in decision_table(ev).to_dict("records")}
    rules = regime_rules(ev, rows["healthy P2P"], rows["host-memory fallback"])  # the probe's limits, from the bands
    allowed |= {m.group(1) for m in NUMBER_WITH_UNIT.finditer(rules)}
    return allowed


TABLES_READ = {"04_fusion_vs_elimination-options"}  # no number with a unit in its prose: its tables are read
QUOTES_ONLY = {"04_fusion_vs_elimination-public"}  # its numbers are sources' verbatim quotes (test_book_sources)
PAGES = [
    *(
        (f"book/_generated/{page}.html", page in TABLES_READ)
        for page in book_pages(REPO)
        if page.startswith("04_") and page not in QUOTES_ONLY
    ),
    ("book/_generated/05_recommendations.html", True),
    ("book/_generated/decision.html", True),
]


@pytest.mark.parametrize(("page", "keep_tables"), PAGES, ids=[Path(p).stem for p, _ in PAGES])
def test_every_number_with_a_unit_is_a_computed_value(built_book, computed, page, keep_tables):
    text = prose(built_book / page, keep_tables)
    found = [(m.group(1), m.group(2)) for m in NUMBER_WITH_UNIT.finditer(text)]
    assert found, f"{page}: no number with a unit found: the scan is not reading the page"
    typed = sorted({f"{n} {u}" for n, u in found if n not in computed})
    assert typed == [], f"{page}: numbers not computed from the account, the options or a figure: {typed}"


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_the_scan_catches_a_typed_number(computed):
    decimal = next(f"{x / 10:.1f}" for x in range(11, 1000) if f"{x / 10:.1f}" not in computed)
    whole = next(str(x) for x in range(11, 1000) if str(x) not in computed)
    text = f"Kernel fusion saves about {decimal} ms of the ~{whole} ms."  # two numbers nothing computed
    typed = [m.group(1) for m in NUMBER_WITH_UNIT.finditer(text) if m.group(1) not in computed]
    assert typed == [decimal, whole]
