"""The decision page for one box (`verifylab box`): a self-contained HTML page that opens with the answers, then the
numbered tables that carry them (speculation per stream count, fusion per verify pass, the rank map), the launch
command and every input with its provenance; and the same answers as JSON. Every text that reaches the page is
escaped here, by construction (``html.escape`` on each value), never pasted."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

from verifylab.iorw import atomic_write_json, atomic_write_text
from verifylab.model.answers.box_decision import BoxDecision
from verifylab.span import Span

STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;width:100%}th,td{border:1px solid #ccc;padding:.3rem .5rem;
text-align:left;vertical-align:top}th{background:#f3f3f3}caption{text-align:left;font-weight:600;padding:.3rem 0}
pre{background:#f6f6f6;padding:.8rem;overflow-x:auto;white-space:pre-wrap}.finding{font-size:1.1rem}
.prov{color:#555;font-size:.9rem}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _table(number: int, caption: str, header: Sequence[str], rows: Sequence[Sequence[object]], prov: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return (
        f'<table id="tbl-{number}"><caption>Table {number}. {_e(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f'<p class="prov">Provenance: {_e(prov)}</p>'
    )


def answers_rows(d: BoxDecision) -> list[tuple[str, str]]:
    """(question, answer) in the order the page and the JSON give them."""
    return [
        ("Which regime is this box in?", f"{d.regime.value}: {d.reason}"),
        ("What to fix first?", d.fix_first + (f" (evidence: {d.fix_evidence})" if d.fix_evidence else "")),
        ("Deploy all-reduce fusion?", d.fusion_answer),
        ("Keep EAGLE-3, up to how many streams?", d.speculation_answer),
        *((("Which all-reduce?", d.all_reduce_answer),) if d.all_reduce_answer else ()),
        ("What may run here (policy)?", "; ".join(d.policy.reasons) or "everything the regime allows"),
    ]


def _answers_from(d: BoxDecision) -> str:
    """Where the answers come from, in a sentence: the box's numbers, and the public band where EAGLE-3's is one."""
    if d.speculation_band is None:
        return "every answer below is modelled from it and from the inputs in Table 5."
    return (
        "every answer below but EAGLE-3's is modelled from it and from the inputs in Table 5; EAGLE-3's is the "
        f"decision page's band ({d.speculation_band.rung.value}), the model's beside it (Table 2)."
    )


def _answers_provenance(d: BoxDecision) -> str:
    band = d.speculation_band
    own = f"modelled from run {d.run_id}"
    return own if band is None else f"{own}; EAGLE-3: {band.rung.value}, {band.source}"


def box_page_html(d: BoxDecision) -> str:
    """The page's HTML, every value escaped."""
    spec = d.speculation
    spec_rows = [
        (r.streams, r.plain_tokens_per_s.text(0), r.spec_tokens_per_s.text(0), r.gain.text(2)) for r in spec.rows
    ]
    fusion_rows = [
        (f.streams, f.tokens, f.saving_ms.text(2) if f.saving_ms is not None else "not priced", f.note)
        for f in d.fusion
    ]
    rank_rows = [
        (
            r.get("rank"),
            r.get("cuda_device"),
            r.get("name"),
            r.get("pci_bus_id"),
            r.get("numa_node"),
            r.get("pcie_link"),
            r.get("source"),
        )
        for r in d.rank_map
    ]
    inputs_rows = sorted(d.inputs.items())
    finding = d.finding()
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>The decision for this box: {_e(d.label)}</title><style>{STYLE}</style></head><body>",
        f"<h1>The decision for this box</h1><p class='finding'>{_e(finding)}</p>",
        f"<p class='prov'>Probe run {_e(d.run_id)} ({_e(d.label)}), measured; {_e(_answers_from(d))}</p>",
        _table(1, "The answers", ("question", "answer"), answers_rows(d), _answers_provenance(d)),
        _table(
            2,
            f"{d.model}: plain decoding vs EAGLE-3 per stream count (ranges over the model's inputs)",
            ("streams", "plain tok/s, all streams", "EAGLE-3 tok/s, all streams", "gain"),
            spec_rows,
            "modelled: the box's all-reduce curve and decode rate, the overheads fitted on the stored H200 grid",
        ),
        _table(
            3,
            "What fusion saves on one verify pass (ms; negative: it costs)",
            ("streams", "verify tokens", "saving ms", "note"),
            fusion_rows,
            "modelled: the box's NCCL and fused curves, the measured norm kernel, the fused kernel's in-pass factor",
        ),
        _table(
            4,
            "Which physical GPU each rank is",
            ("rank", "CUDA device", "GPU", "PCI bus id", "NUMA node", "PCIe link", "source"),
            rank_rows or [("—", "—", "—", "—", "—", "—", "this probe predates the rank map")],
            f"measured: run {d.run_id}",
        ),
        "<h2>Launch command</h2>",
        f"<pre>{_e(d.launch_command)}</pre>",
        _table(5, "Every input", ("input", "value"), inputs_rows, "as named in each row"),
        "</body></html>",
    ]
    return "\n".join(parts)


def _span(value: Span | None) -> dict[str, float] | None:
    return None if value is None else {"low": value.low, "high": value.high}


def box_json(d: BoxDecision) -> dict:
    """The same answers as values, for scripts and design reviews."""
    low, high = d.speculation.crossover
    band = d.speculation_band
    stops = {"low": low, "high": high} if band is None else {"low": band.stops[0], "high": band.stops[1]}
    return {
        "run_id": d.run_id,
        "label": d.label,
        "world": d.world,
        "regime": d.regime.value,
        "allreduce_us": d.allreduce_us,
        "answers": dict(answers_rows(d)),
        "speculation": d.speculation_setting.value,
        "speculation_evidence": "modelled" if band is None else f"{band.rung.value}: {band.source}",
        "speculation_off_from_streams": stops,  # the answer's: the band's where one answers, else the model's
        **({} if band is None else {"modelled_speculation_off_from_streams": {"low": low, "high": high}}),
        "gain_one_stream": _span(d.gain_one_stream if band is None else band.gain_one),
        **({} if band is None else {"modelled_gain_one_stream": _span(d.gain_one_stream)}),
        "fusion_saving_ms": {str(f.streams): _span(f.saving_ms) for f in d.fusion},
        "policy": d.policy.to_json(),
        "launch_command": d.launch_command,
        "inputs": d.inputs,
        "provenance": _answers_provenance(d),
    }


def write_box_page(d: BoxDecision, out: Path) -> Path:
    """``decision.html`` and ``decision.json`` under ``out`` (each written whole or not at all); the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    page = out / "decision.html"
    atomic_write_text(page, box_page_html(d))
    atomic_write_json(out / "decision.json", json.loads(json.dumps(box_json(d), default=str)))
    return page
