"""Sphinx extension: on every page, the first use of each glossary term links to its definition.

A reader who meets "one-shot", "goodput" or "span" on any page, the decision page included, is one click from
what it means, whichever notebook or prose page the word came from. Headings, captions, code, tables and links
are left as they are; a term already linked by ``{term}`` counts as its first use.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes

GLOSSARY_DOC = "book/glossary"
SKIPPED = (
    nodes.FixedTextElement,  # literal blocks, code
    nodes.literal,
    nodes.title,
    nodes.caption,
    nodes.raw,
    nodes.reference,
    nodes.term,
    nodes.table,
    nodes.comment,
    nodes.math,
)


def term_pattern(term: str) -> re.Pattern[str]:
    """A term as a whole word or words, any case, plural allowed (``gate`` matches ``Gates``)."""
    return re.compile(rf"(?<![\w-]){re.escape(term)}(?:s|es)?(?![\w-])", re.IGNORECASE)


def _terms(env: Any) -> list[tuple[str, str]]:
    """(term text, anchor) longest first, read from the glossary document's term nodes."""
    doctree = env.get_doctree(GLOSSARY_DOC)
    out = [(t.astext(), t.get("ids", [""])[0]) for t in doctree.findall(nodes.term) if t.get("ids")]
    return sorted(out, key=lambda pair: -len(pair[0]))


def _skipped(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, SKIPPED):
            return True
        parent = parent.parent
    return False


def link_first_uses(app: Any, doctree: nodes.document, docname: str) -> None:
    """``doctree-resolved``: link the first use of each glossary term on the page ``docname``."""
    if docname == GLOSSARY_DOC or GLOSSARY_DOC not in app.env.all_docs:
        return
    terms = [(text, anchor, term_pattern(text)) for text, anchor in _terms(app.env)]
    uri = app.builder.get_relative_uri(docname, GLOSSARY_DOC)
    done: set[str] = set()
    page = [n for n in doctree.findall(lambda n: isinstance(n, nodes.Text | nodes.reference))]  # reading order
    for node in page:
        if isinstance(node, nodes.reference):  # a {term} link: the term's first use if nothing came before it
            if "#term-" in node.get("refuri", "") and "glossary" in node.get("refuri", ""):
                done.add(node["refuri"].split("#", 1)[1])
        elif node.parent is not None and not _skipped(node):
            _link_in(node, terms, done, uri)


def _link_in(text_node: nodes.Text, terms: list, done: set[str], uri: str) -> None:
    """Split ``text_node`` at the earliest first use of a not-yet-linked term, link it, and go on after it."""
    current = text_node
    while True:
        text = str(current)
        hits = [
            (m.start(), -len(m.group(0)), m, anchor)
            for _, anchor, rx in terms
            if anchor not in done
            for m in [rx.search(text)]
            if m
        ]
        if not hits:
            return
        start, _, match, anchor = min(hits, key=lambda h: (h[0], h[1]))
        done.add(anchor)
        before, word, after = text[:start], match.group(0), text[match.end() :]
        link = nodes.reference(
            "", "", nodes.Text(word), internal=True, refuri=f"{uri}#{anchor}", classes=["verifylab-term"]
        )
        rest = nodes.Text(after)
        parent = current.parent
        at = parent.index(current)
        parent.remove(current)
        for offset, node in enumerate([nodes.Text(before), link, rest] if before else [link, rest]):
            parent.insert(at + offset, node)
        current = rest


def setup(app: Any) -> dict[str, Any]:
    app.connect("doctree-resolved", link_first_uses)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
