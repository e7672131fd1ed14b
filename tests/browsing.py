"""Opening the built book in Debian's headless Chromium with every non-local request blocked: helpers shared by
the browser tests (their fixtures are in conftest.py: one browser, one visit of every page, per session)."""

from __future__ import annotations

import json
import shutil
import socket
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

from verifylab.publish.pages import book_pages
from verifylab.report.table_fit import PLAIN_WORD

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PHONE_WIDTH = 390  # a phone held upright: no page may scroll sideways (a wide table scrolls inside its own box)
SIDEWAYS = """() => {
  const root = document.documentElement;
  const past = [...document.querySelectorAll('article *')]
    .filter(e => e.getBoundingClientRect().right > root.clientWidth + 1 && !e.closest('table, .highlight, pre'))
    .slice(0, 3).map(e => e.tagName + '.' + String(e.className).slice(0, 30));
  return {scroll: root.scrollWidth, client: root.clientWidth, past};
}"""
LONGEST = (1400, 800, 15)  # no page longer than 15 screens of 1400 x 800 with every fold open (issue 71)
UNFOLDED_SCREENS = """screen => {
  const closed = [...document.querySelectorAll('details:not([open])')];
  closed.forEach(d => d.open = true);
  const screens = document.documentElement.scrollHeight / screen;
  closed.forEach(d => d.open = false);
  return {screens, folds: closed.length};
}"""
SCREEN_WIDTHS = (1400, 800)  # a laptop, and a narrow window (the text column is 736 px there)
SCREEN_HEIGHT = 900  # "taller than 1.5 screens" is measured against this
FIRST_SCREENS = ((1400, 800), (800, 1000))  # the decision page's first screen: a laptop, a narrow tall window
# The pages read as a reader reads them (layout at each width, first screen, reading, glossary links): every page
# of every chapter of the registry, the decision page, the changes page and the methods appendix. Every other page
# of the book (a run's page, the indexes) is opened for its console errors, its requests and its charts only.
READ_PAGES = (
    *(f"book/_generated/{page}.html" for page in book_pages(Path(__file__).resolve().parents[1])),
    "book/_generated/decision.html",
    "book/_generated/changes.html",
    "book/methods.html",
)
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


LOCAL = ("http://127.0.0.1", "data:", "about:")  # what a page may load: the book's server, inline data


class Tab:
    """One page of the browser that opens URL after URL, noting the console errors of each visit and the requests
    that tried to leave the machine (the browser is started offline: :func:`offline_proxy`). One page for every
    visit: a new page per URL cost the browser twice the CPU."""

    def __init__(self, browser) -> None:
        self.page = browser.new_page()
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("requestfailed", self._failed)

    def _console(self, msg) -> None:
        if msg.type == "error" and not msg.location.get("url", "").endswith("/favicon.ico"):
            self.errors.append(msg.text)  # the browser's own probe for /favicon.ico is not the page's request

    def _failed(self, request) -> None:
        if not request.url.startswith(LOCAL):
            self.blocked.append(request.url)

    def open(self, url: str):
        """Load ``url``; returns (page, console errors, blocked urls) of this visit."""
        self.errors, self.blocked = [], []
        self.page.goto(url, wait_until="load")  # the pages load nothing after "load": charts are inline SVG
        # widths are measured in the page's own fonts: on a busy machine they may still be loading at "load"
        self.page.wait_for_function("() => document.fonts.status === 'loaded'")  # survives a redirect page
        return self.page, self.errors, self.blocked


@contextmanager
def offline_proxy():
    """Playwright's proxy setting that keeps a browser offline: every request but a loopback one goes to a local
    port that refuses it (bound, never listening, for as long as the block runs), so it fails at once. Routing
    each request through playwright did the same at twice the browser's CPU, and turned its cache off."""
    with socket.socket() as refusing:
        refusing.bind(("127.0.0.1", 0))
        yield {"server": f"http://127.0.0.1:{refusing.getsockname()[1]}", "bypass": "127.0.0.1"}


def open_page(browser, url: str):
    """Load ``url`` in a page of its own; returns (page, console errors, blocked urls)."""
    return Tab(browser).open(url)


def pages(built_book: Path) -> list[Path]:
    return sorted(p for p in built_book.rglob("*.html") if "_static" not in p.parts)


CHART_MARKS = """() => [...document.querySelectorAll('figure.verifylab-chart')]
  .map(f => f.querySelectorAll("svg [class^='mark-'] path, svg [class^='mark-'] line").length)"""
READING = """() => {
  const article = document.querySelector('article.bd-article');
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const all = [...article.querySelectorAll('*')];
  const wide = [...article.querySelectorAll('table, pre')]
    .filter(e => e.getBoundingClientRect().width > column + 1)
    .map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().width) + ' > ' + Math.round(column));
  const scrollers = all.filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX)
    && e.scrollWidth > e.clientWidth + 1).map(e => e.tagName + '.' + e.className);
  const cells = [...article.querySelectorAll('td')].map(td => td.innerText.trim());
  const unnumbered = [...article.querySelectorAll('table, figure.verifylab-chart')].filter(e => {
    const outer = e.parentElement.closest('figure[id]');
    return !outer || !outer.querySelector('.caption-number') || !outer.querySelector('figcaption');
  }).map(e => e.tagName + ' ' + (e.innerText || '').slice(0, 60));
  const stderr = article.querySelectorAll('.output.stderr, .output.traceback').length;
  return {column, wide, scrollers, cells, unnumbered, stderr, inputs: document.querySelectorAll('.cell_input').length,
          text: article.innerText};
}"""


LAYOUT = """() => {
  const article = document.querySelector('article.bd-article');
  if (!article) return null;
  const canvas = document.createElement('canvas').getContext('2d');
  const width = (text, el) => {
    canvas.font = getComputedStyle(el).font;
    return canvas.measureText(text).width;
  };
  const visible = e => e.getClientRects().length > 0;
  const PLAIN_WORD = new RegExp('^(?:' + PLAIN_WORD_SOURCE + ')$');
  const broken = [];
  let cells = 0, chartTexts = 0;
  for (const cell of article.querySelectorAll('td, th')) {
    if (!visible(cell)) continue;
    cells += 1;
    const s = getComputedStyle(cell);
    const room = cell.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
    // a hyphenated word of prose (host-memory, all-to-all) may break after its hyphens, as the renderer allows;
    // an identifier too wide for its column (a run id) wraps where the renderer put <wbr>, each piece whole
    const copy = cell.cloneNode(true);
    for (const point of copy.querySelectorAll('.v-wrap wbr')) point.replaceWith(' ');
    const words = copy.textContent.split(/\\s+/).filter(w => w)
      .flatMap(w => PLAIN_WORD.test(w) ? w.split(/(?<=-)/) : [w]);
    const longest = words.reduce((a, w) => width(w, cell) > width(a, cell) ? w : a, '');
    if (longest && width(longest, cell) > room + 1)
      broken.push(longest + ' (' + Math.round(width(longest, cell)) + ' px in ' + Math.round(room) + ')');
  }
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const wide = [...article.querySelectorAll('table, pre, figure.verifylab-chart svg')].filter(visible)
    .filter(e => e.getBoundingClientRect().width > column + 1)
    .map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().width) + ' px > ' + Math.round(column)
      + ': ' + (e.innerText || '').slice(0, 60));
  const screen = window.innerHeight;
  const tall = [...article.querySelectorAll('table')].filter(t => visible(t)
      && t.getBoundingClientRect().height > 1.5 * screen && !t.closest('details'))
    .map(t => Math.round(t.getBoundingClientRect().height) + ' px: ' + t.innerText.slice(0, 60));
  const index = [...article.querySelectorAll('table')].filter(t => {
    const first = t.querySelector('thead th');
    if (!first) return false;
    const name = first.textContent.trim().toLowerCase();
    return ['', 'index', 'unnamed: 0', 'level_0'].includes(name);
  }).map(t => t.textContent.slice(0, 60));
  const ci95 = [...article.querySelectorAll('th')].map(th => th.textContent).filter(t => /ci ?95/i.test(t));
  const small = [], truncated = [];
  for (const svg of article.querySelectorAll('figure.verifylab-chart svg')) {
    const box = svg.getBoundingClientRect();
    const scale = box.width / (svg.width.baseVal.value || box.width);
    for (const text of svg.querySelectorAll('text')) {
      const size = parseFloat(text.getAttribute('font-size') || getComputedStyle(text).fontSize) * scale;
      const shown = text.textContent.trim();
      chartTexts += shown ? 1 : 0;
      if (shown && size < 11) small.push(shown.slice(0, 30) + ' ' + size.toFixed(1) + ' px');
      if (text.textContent.includes('…')) truncated.push(text.textContent);
    }
  }
  return {broken, wide, tall, index, ci95, small: [...new Set(small)], truncated: [...new Set(truncated)], screen,
          cells, chart_texts: chartTexts};
}""".replace("PLAIN_WORD_SOURCE", json.dumps(PLAIN_WORD.pattern))  # the renderer's own pattern


FIRST_SCREEN = """() => {
  // the article's text a reader sees without scrolling: every paragraph and list item wholly above the fold
  window.scrollTo(0, 0);
  const seen = [];
  for (const el of document.querySelectorAll('article.bd-article p, article.bd-article li, article.bd-article h2')) {
    const r = el.getBoundingClientRect();
    if (r.height > 0 && r.bottom <= window.innerHeight) seen.push(el.innerText);
  }
  return seen.join('\\n');
}"""

GLOSSARY_TERMS = """() => [...document.querySelectorAll('dl.glossary dt[id]')]
  .map(dt => [[...dt.childNodes].filter(n => !(n.matches && n.matches('a.headerlink')))
    .map(n => n.textContent).join('').trim(), dt.id])"""
FIRST_USES = """(terms) => {
  const article = document.querySelector('article.bd-article');
  if (!article) return [];
  const SKIP = 'code, pre, h1, h2, h3, h4, h5, h6, table, svg, script, style, figcaption, .caption, dt, summary, '
    + '.verifylab-section > p, .verifylab-table-note, .verifylab-listing-title, .verifylab-edition, a, '
    + '.verifylab-chart-note';
  const escape = s => s.replace(/[.*+?^${}()|[\\]\\\\]/g, '\\\\$&');
  const pending = new Map(terms.map(([term, id]) =>
    [id, {term, rx: new RegExp('(?<![\\\\w-])' + escape(term) + '(?:s|es)?(?![\\\\w-])', 'i')}]));
  const unlinked = [];
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node && pending.size; node = walker.nextNode()) {
    const element = node.parentElement;
    const link = element.closest('a');
    if (link && (link.getAttribute('href') || '').includes('glossary.html#')) {
      pending.delete(link.getAttribute('href').split('#')[1]);
      continue;
    }
    if (element.closest(SKIP)) continue;
    for (const [id, {term, rx}] of [...pending]) {
      if (rx.test(node.textContent)) {
        unlinked.push(term + ': "' + node.textContent.trim().slice(0, 70) + '"');
        pending.delete(id);
      }
    }
  }
  return unlinked;
}"""
