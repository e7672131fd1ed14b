"""The book as its readers see it (#19): pages open with their finding, show no code, tables and code fit the
text column at 1400 px with no scrolling wrapper, no NaN / None / [] / repr / traceback, every table and chart
numbered, captioned and anchored, the landing page states the decision with links that resolve, and the
exports hold exactly what the pages show."""

from __future__ import annotations

import csv
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from verifylab.csv_cells import neutral_cell
from verifylab.publish.pages import book_pages

from .browsing import CHROMIUM

CHAPTERS = book_pages(Path(__file__).resolve().parents[1])  # every page of every chapter
PAGES = [*CHAPTERS, "decision"]


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")
@pytest.mark.parametrize("name", PAGES)
def test_a_page_reads_as_a_report(visited, name):
    seen = visited[f"book/_generated/{name}.html"]["reading"]
    assert seen["wide"] == [], f"{name}: wider than the text column: {seen['wide']}"
    assert seen["scrollers"] == [], f"{name}: a scrolling wrapper: {seen['scrollers']}"
    assert seen["inputs"] == 0, f"{name}: input cells are visible"
    assert not re.search(r"\b(NaN|nan)\b", seen["text"]), f"{name}: NaN in the page"
    assert "Traceback" not in seen["text"] and "Warning:" not in seen["text"], f"{name}: a warning on the page"
    assert seen["stderr"] == 0, f"{name}: a cell's stderr or traceback is shown"
    odd = [c for c in seen["cells"] if c in ("None", "[]") or re.fullmatch(r"\[.*\]|-?\d+\.\d{6,}", c)]
    assert odd == [], f"{name}: raw values in table cells: {odd[:5]}"
    assert seen["unnumbered"] == [], f"{name}: tables or charts without number, caption and anchor"


def test_every_chapter_opens_with_its_finding(built_book):
    """The first thing after a chapter's title is prose (its finding), not a table, a chart or code."""
    for name in CHAPTERS[1:]:
        text = (built_book / "book" / "_generated" / f"{name}.html").read_text(encoding="utf-8")
        body = text.split("</h1>", 1)[1]
        first = re.search(r"<(p|table|figure|pre|ul)\b", body)
        assert first and first.group(1) in ("p", "ul"), f"{name} opens with <{first and first.group(1)}>"


REPEATED_PHRASE = re.compile(r"\b([A-Za-z]+(?: [A-Za-z]+)+) \1\b")  # "stops paying stops paying"


def test_no_sentence_says_a_phrase_twice_in_a_row(built_book):
    """Sentences built from typed answers read once: no phrase of two words or more repeated back to back in the
    prose of any page (#50: "it stops paying pays up to ...")."""
    for name in PAGES:
        html = (built_book / "book" / "_generated" / f"{name}.html").read_text(encoding="utf-8")
        for paragraph in re.findall(r"<p>(.*?)</p>", html, flags=re.S):
            text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", paragraph))
            repeated = REPEATED_PHRASE.search(text)
            assert repeated is None, f"{name}: '{repeated and repeated.group(0)}' in: {text[:200]}"


class Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def _parse(path: Path) -> Anchors:
    parser = Anchors()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_the_landing_page_states_the_decision_with_links_that_resolve(built_book):
    index = (built_book / "index.html").read_text(encoding="utf-8")
    assert "book/_generated/decision.html" in index  # the book opens on the decision
    page = built_book / "book" / "_generated" / "decision.html"
    text = page.read_text(encoding="utf-8")
    assert "<h1>The decision" in text and "Each answer in full" in text and "Caveats" in text
    assert text.index("The answers, for a box with healthy PCIe P2P") < text.index("Each answer in full")
    assert text.index("Each answer in full") < text.index("Caveats")
    links = [link for link in _parse(page).links if "#" in link and not link.startswith("#")]
    assert len(links) >= 6
    for link in links:
        target, anchor = link.split("#", 1)
        assert anchor in _parse((page.parent / target).resolve()).ids, f"{link} does not resolve"


class Tables(HTMLParser):
    """The cells of every table inside each numbered figure (a shortened name counts as its full title; a table's
    folded rows, ``v-more``, continue it, their repeated header skipped)."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, list[list[list[str]]]] = {}
        self.stack: list[str | None] = []
        self.row: list[str] | None = None
        self.cell: str | None = None
        self.continued = self.in_head = False
        self.constants: list[tuple[str, str]] = []  # "Every row: run id …" read before its table
        self.lifted: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure":
            self.stack.append(a.get("id"))
        current = next((f for f in reversed(self.stack) if f), None)
        if tag == "span" and "v-constant" in (a.get("class") or "") and current:
            self.constants.append((a["data-column"], a["data-value"]))  # a column lifted above the table
        if tag == "table" and current:
            self.continued = "v-more" in (a.get("class") or "")
            if not self.continued:
                self.figures.setdefault(current, []).append([])
                self.lifted, self.constants = self.constants, []
        elif tag == "thead":
            self.in_head = True
        elif tag == "tr" and current and self.continued and self.in_head:
            self.row = None
        elif tag == "tr" and current and "v-under" in (a.get("class") or ""):
            self.row = self.figures[current][-1].pop()  # a spanned line continues its row: read as its last cell
            self.row_new = False
        elif tag == "tr" and current:
            self.row, self.row_new = [], True
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ""
        elif tag == "span" and self.cell is not None and a.get("title"):
            self.cell = a["title"]
            self.cell_fixed = True
        elif tag == "code" and self.cell is not None and not getattr(self, "cell_fixed", False):
            self.cell += "`"  # the export writes a code span as the rule's text has it

    def handle_endtag(self, tag):
        current = next((f for f in reversed(self.stack) if f), None)
        if tag == "figure" and self.stack:
            self.stack.pop()
        elif tag == "thead":
            self.in_head = False
        elif tag == "code" and self.cell is not None and not getattr(self, "cell_fixed", False):
            self.cell += "`"
        elif tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.append(self.cell.strip())
            self.cell = None
            self.cell_fixed = False
        elif tag == "tr" and self.row is not None and current:
            lifted = [c if self.in_head else v for c, v in self.lifted] if self.row_new else []
            self.figures[current][-1].append(self.row + lifted)
            self.row = None

    def handle_data(self, data):
        if self.cell is not None and not getattr(self, "cell_fixed", False):
            self.cell += data


def test_exports_hold_exactly_what_the_pages_show(smoke_run):
    import json

    root, _ = smoke_run
    (folder,) = [p / "exports" for p in (root / "_build" / "editions").iterdir() if (p / "exports").is_dir()]
    edition_id = folder.parent.name
    pages = {}
    for name in CHAPTERS:
        parser = Tables()
        parser.feed((root / "_build" / "html" / "book" / "_generated" / f"{name}.html").read_text(encoding="utf-8"))
        pages.update(parser.figures)
    index = json.loads((folder / "exports.json").read_text(encoding="utf-8"))
    assert {e["name"] for e in index} == set(pages) | {e["name"] for e in index if e["kind"] == "figure"}
    compared = numbers = units = 0
    for entry in index:
        assert entry["edition"] == edition_id
        slug = entry["number"].lower().replace(". ", "-").replace(".", "-")
        assert entry["number"] and entry["files"][0].startswith(slug), entry  # "fig-4-1-..."
        assert entry["caption"].startswith(entry["number"] + ": ")
        csvs = [f for f in entry["files"] if f.endswith(".csv") and not f.endswith(".data.csv")]
        if entry["kind"] == "figure":  # a chart's data: the rows it draws, edition first
            assert csvs, entry
            for file in csvs:
                rows = list(csv.reader((folder / file).open(encoding="utf-8")))
                assert rows[0][0] == "edition" and len(rows) > 1 and all(r[0] == edition_id for r in rows[1:])
            continue
        for number, file in enumerate(csvs):
            rows = list(csv.reader((folder / file).open(encoding="utf-8")))
            assert rows[0][0] == "edition" and all(r[0] == edition_id for r in rows[1:]), file
            shown = pages[entry["name"]][number]
            order = [shown[0].index(c) for c in rows[0][1:]]  # a spanned column is shown last, under its row
            # the page's text as a spreadsheet may read it: a cell starting a formula leaves with a leading '
            expected = [[neutral_cell(r[i]) for i in order] for r in shown]
            assert [r[1:] for r in rows] == expected, f"{file} differs from its page"
            data = list(csv.DictReader((folder / file.replace(".csv", ".data.csv")).open(encoding="utf-8")))
            assert len(data) == (len(rows) - 1) * (len(rows[0]) - 1), file  # one row per cell
            for cell in data:
                if cell["value"]:
                    assert float(cell["value"]) == float(cell["shown"].lstrip("~<>≈").rstrip("%").replace(",", ""))
                if cell["low"]:
                    assert float(cell["low"]) <= float(cell["high"]), f"{file}: {cell}"
                numbers += bool(cell["value"] or cell["low"])
                units += bool(cell["unit"])
            compared += 1
        for file in (f for f in entry["files"] if f.endswith(".svg")):
            assert edition_id in (folder / file).read_text(encoding="utf-8"), file
    assert compared >= 30 and numbers > 1000 and units > 500


class _Elements(HTMLParser):
    """The text of each list item and paragraph of a page, with the links inside it; every element's text by id
    (a numbered figure or table), and its visible text: what shows before "Show the other N rows" is unfolded."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, list[str]]] = []
        self.by_id: dict[str, str] = {}
        self.visible_by_id: dict[str, str] = {}
        self._open: list[tuple[str, str | None, list[str], list[str], list[str]]] = []

    def feed(self, data: str) -> None:
        super().feed(data.replace("<wbr>", ""))  # a wrapped identifier reads as one word

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._open.append((tag, a.get("id"), [], [], []))
        if tag == "a" and a.get("href") and "#" in a["href"]:
            for _, _, _, links, _ in self._open:
                links.append(a["href"])

    def handle_endtag(self, tag):
        while self._open:
            name, ident, text, links, visible = self._open.pop()
            joined, seen = " ".join(text), " ".join(visible)
            if ident:
                self.by_id[ident] = joined
                self.visible_by_id[ident] = seen
            if name in ("li", "p") and not any(n == "li" for n, *_ in self._open):
                self.blocks.append((joined, links))
            if self._open:
                self._open[-1][2].append(joined)
                self._open[-1][3].extend(links)
                if name != "details":  # folded rows are not what a reader sees on arriving
                    self._open[-1][4].append(seen)
            if name == tag:
                break

    def handle_data(self, data):
        if self._open:
            self._open[-1][2].append(data)
            self._open[-1][4].append(data)


NUMBER_WITH_UNIT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?)\s?(ms|µs|us|tok/s|%)")


def test_every_number_on_the_decision_page_is_in_the_exhibit_it_links(built_book):
    """Each number with a unit in a bullet or paragraph of the decision page appears in the visible part of one of
    the exhibits that bullet links to, before any "Show the other N rows" (#25, #42: a link lands on its number)."""
    page = built_book / "book" / "_generated" / "decision.html"
    parsed = _Elements()
    parsed.feed(page.read_text(encoding="utf-8"))
    targets: dict[str, str] = {}
    checked = 0
    for text, links in parsed.blocks:
        numbers = [m.group(1) for m in NUMBER_WITH_UNIT.finditer(text)]
        exhibits = [link for link in links if not link.startswith("#") and "glossary.html" not in link]
        if not numbers or not exhibits:
            continue
        shown = []
        for link in exhibits:
            target, anchor = link.split("#", 1)
            if target not in targets:
                other = _Elements()
                other.feed((page.parent / target).resolve().read_text(encoding="utf-8"))
                targets[target] = other
            shown.append(targets[target].visible_by_id.get(anchor, ""))
        for number in numbers:
            checked += 1
            assert any(number in exhibit for exhibit in shown), f"{number} not visible in {exhibits}: {text[:120]}"
    assert checked >= 10, "the scan found too few numbers: it is not reading the page"


def test_the_banner_counts_the_runs_and_links_to_their_hardware_table_which_lists_each(built_book, repo_root):
    import json

    edition = json.loads((built_book.parent.parent / "book" / "_generated" / "edition.json").read_text())
    runs = edition["runs"]
    page = built_book / "book" / "_generated" / "decision.html"
    text = page.read_text(encoding="utf-8")
    assert f"{len(runs)} measured runs: their hardware and software" in text
    link = next(x for x in _parse(page).links if x.endswith("#tbl-run-hardware"))
    target = (page.parent / link.split("#")[0]).resolve()
    assert "tbl-run-hardware" in _parse(target).ids
    source = target.read_text(encoding="utf-8")
    figure = source[source.index('id="tbl-run-hardware"') :].split("</figure>", 1)[0]
    text = re.sub(r"<[^>]+>", "", figure)
    assert all(run in text for run in runs)  # every run has its row, its id whole
    assert "NVIDIA H200" in text and "580.159.04" in text
