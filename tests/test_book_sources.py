"""A reviewer can follow every number to its source and reproduce every exhibit (#42): each public row the book
reads is a link on a page, each measured run has a page every caption links, each exhibit says how to reproduce it
and links its data as CSV, and the decision page, chapter 4 and chapter 5 tell one story."""

from __future__ import annotations

import csv
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from verifylab.model.pricing.regimes import REGIME_TITLE
from verifylab.publish.pages import book_pages
from verifylab.vocab import Regime

REPO = Path(__file__).resolve().parents[1]
GENERATED = Path("book") / "_generated"


class _Links(HTMLParser):
    """Every link's target, and each numbered exhibit (a ``figure`` with an id) as (id, its HTML)."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.hrefs.append(dict(attrs)["href"])


def _links(page: Path) -> list[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.hrefs


def _figures(page: Path) -> dict[str, str]:
    """Each numbered exhibit's HTML by id, up to the end of its caption (a chart nests a figure of its own)."""
    text = page.read_text(encoding="utf-8")
    found = {}
    for start in re.finditer(r'<figure[^>]*\bid="([^"]+)"[^>]*>', text):
        end = text.find("</figcaption>", start.end())
        found[start.group(1)] = text[start.end() : end if end >= 0 else len(text)]
    return found


def _text(fragment: str) -> str:
    """What a reader reads: cells and blocks apart, inline markup (links, code, a wrapped identifier) joined."""
    spaced = re.sub(r"</?(?:td|th|tr|li|p|div|br|table|pre|h\d)\b[^>]*>", " ", fragment.replace("<wbr>", ""))
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", spaced)))  # as the browser shows entities


def _page(book: Path, name: str) -> Path:
    return book / GENERATED / f"{name}.html"


def test_every_public_row_the_book_reads_is_a_link_with_its_quote(built_book, repo_root):
    with open(repo_root / "data" / "reference" / "public_measurements.csv", encoding="utf-8") as fh:
        public = list(csv.DictReader(fh))
    page = _page(built_book, "04_fusion_vs_elimination-public")
    table = _figures(page)["tbl-public-evidence"]
    hrefs = set(_links(page))
    assert {row["url"] for row in public} <= hrefs  # every source is clickable
    shown = _text(table)
    for row in public:
        assert row["id"] in shown and row["quote"].split("|")[-2 if "|" in row["quote"] else 0].strip()[:20] in shown


def test_every_measured_run_has_a_page_and_every_caption_links_the_runs_it_shows(built_book):
    edition = json.loads((built_book.parent.parent / GENERATED / "edition.json").read_text())
    for run in edition["runs"]:
        page = built_book / GENERATED / "runs" / f"{run}.html"
        assert page.is_file(), run
        text = _text(page.read_text(encoding="utf-8"))
        assert f"Run {run}" in text and "Tables it holds" in text and "Parameters and environment" in text
    linked = 0
    for name in book_pages(REPO):
        page = _page(built_book, name)
        for href in _links(page):
            if "/runs/" in href or href.startswith("runs/"):
                assert (page.parent / href.split("#")[0]).resolve().is_file(), href
                linked += 1
    assert linked >= len(edition["runs"])


def test_every_exhibit_says_how_to_reproduce_it_and_links_its_data(built_book):
    from verifylab.chapters.exhibits import book_exhibits

    edition = json.loads((built_book.parent.parent / GENERATED / "edition.json").read_text())
    known = book_exhibits(built_book.parent.parent)
    exhibits = 0
    for name in book_pages(REPO):
        page = _page(built_book, name)
        for anchor, figure in _figures(page).items():
            caption = _text(figure.rsplit("<figcaption", 1)[-1])
            assert f"Reproduce: verifylab exhibit {anchor} rebuilds this exhibit alone" in caption, anchor
            assert "verifylab book the whole chapter" in caption and f"edition {edition['id']}" in caption, anchor
            assert anchor in known, anchor  # the command resolves the name the caption gives
            data = [
                h for h in re.findall(r'href="([^"]+\.csv)"', figure) if "/exports/" in h or h.startswith("exports")
            ]
            assert len(data) == 1, anchor
            target = (page.parent / data[0]).resolve()
            with open(target, encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
            assert rows and rows[0]["edition"] == edition["id"], target
            exhibits += 1
    assert exhibits >= 40


def test_an_exhibit_with_measured_rows_names_its_runs(built_book):
    """A table whose provenance says measured, or a chart labelled measured, never says 'no measured run'."""
    for name in book_pages(REPO):
        for anchor, figure in _figures(_page(built_book, name)).items():
            body, caption = figure.rsplit("<figcaption", 1) if "<figcaption" in figure else (figure, "")
            says_measured = re.search(r"<td[^>]*>measured(: run [^<]+)?</td>", body.replace("<wbr>", ""))
            if says_measured:
                assert "no measured run" not in _text(caption), f"{name} {anchor}"


def test_the_decision_chapter_4_and_chapter_5_tell_one_story(built_book):
    """The key claims read the same on the three pages: the case study's regime by one name, fusion on or off by
    load with the same numbers, the same upgrade pair, and the audited list holding it."""
    decision, ch4, ch5, ch1 = (  # a chapter: all its pages
        " ".join(_text(_page(built_book, page).read_text(encoding="utf-8")) for page in pages if page.startswith(name))
        for pages in [["decision", *book_pages(REPO)]]
        for name in ("decision", "04_fusion_vs_elimination", "05_recommendations", "01_environment_and_gates")
    )
    case = REGIME_TITLE[Regime.DEGRADED]
    for page in (decision, ch4, ch5):
        assert case in page
    assert "as the case study ran it" not in decision + ch4 + ch5

    by_load = re.search(r"By load \(Fig\. [\d.]+\): (.*?)\. Past the public crossover", decision)
    assert by_load, "the decision states fusion on or off by load"
    for phrase in by_load.group(1).split("; "):
        assert phrase in ch5, phrase  # chapter 5 says the same, number for number
        numbers = re.findall(r"\d+\.\d\d", phrase)
        assert all(n in ch4 for n in numbers), phrase  # and chapter 4's table shows them

    upgrade = re.search(r"upgrade to SGLang ([\d.]+) with its pinned FlashInfer ([\w.]+)", decision)
    assert upgrade, "the decision names its upgrade pair"
    sglang, flashinfer = upgrade.groups()
    assert f"SGLang {sglang} with its pinned FlashInfer {flashinfer}" in ch5
    assert f"{sglang} (FlashInfer {flashinfer})" in ch5
    audited = re.search(r"Audited: SGLang (.*?)\. A range.*?also read FlashInfer (.*?) \(", ch1)
    assert audited and sglang in audited.group(1) and flashinfer in audited.group(2)

    gates = re.search(r"what keeps fusion off on a PCIe SM120 box is (\d+) SGLang arch gate", ch5)
    row = re.search(rf"{re.escape(sglang)} {re.escape(flashinfer)} .*?(\d+) SGLang arch gate", ch1)
    assert gates and row and gates.group(1) == row.group(1)  # chapter 5 counts what chapter 1's table counts


def test_the_reported_liability_is_shown_where_the_decision_page_links_it(shipped):
    """#71: the decision page's 'a liability from about N requests' is the case study's reported figure, formatted
    from its table, and the exhibit it links (the reported comparisons, Fig. 2.10) shows the same N."""
    from verifylab.analysis.benchmarks import reported_comparisons, reported_liability_concurrency
    from verifylab.publish.decision import liability_words

    value = reported_liability_concurrency(shipped)
    assert value == 30 and liability_words(shipped) == "30"
    rows = reported_comparisons(shipped)
    assert rows["comparison"].str.contains(f"a liability from {value:g} concurrent requests").any()
