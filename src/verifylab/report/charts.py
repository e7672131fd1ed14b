"""Altair charts rendered to inline SVG with vl-convert: they draw with no network and no JavaScript.

Every chart carries its provenance in the caption (measured run ids / reported seeds / modelled), and
tooltips survive as SVG ``<title>`` elements, which browsers show on hover.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import pandas as pd

from verifylab.iorw import atomic_write_bytes, atomic_write_text

FIGURE_MIME = "application/vnd.verifylab.figure+json"
PROVENANCE_COLORS = {
    "measured": "#1b7837",
    "reported": "#762a83",
    "reported (public)": "#2166ac",
    "modelled": "#e08214",
}
PROVENANCE_SCALE = alt.Scale(domain=list(PROVENANCE_COLORS), range=list(PROVENANCE_COLORS.values()))
MAX_WIDTH_PX = 720  # the narrowest text column (800 px screens) is 736 px: a chart never shrinks its type there
READABLE = {  # every chart's type at 12 px or more, legends never cut (the book's one chart style)
    "axis": {"labelFontSize": 12, "titleFontSize": 12},
    "legend": {"labelFontSize": 12, "titleFontSize": 12, "labelLimit": 0},
    "header": {"labelFontSize": 12, "titleFontSize": 12},
    "title": {"fontSize": 13},
    "text": {"fontSize": 12},
}


def readable(spec: dict) -> dict:
    """A Vega-Lite spec in the book's chart style (:data:`READABLE` over whatever the chart configured)."""
    config = dict(spec.get("config", {}))
    for part, values in READABLE.items():
        config[part] = {**config.get(part, {}), **values}
    return {**spec, "config": config}


@dataclass
class Figure:
    """A chart plus what the reader must see with it: a caption and where the numbers come from."""

    chart: alt.TopLevelMixin
    caption: str
    provenance: list[str] = field(default_factory=list)
    name: str = "figure"

    def spec(self) -> dict:
        """The chart's Vega-Lite dict, whatever its rows: a store with thousands of sweeps draws a dense chart,
        never an error (Altair's default refuses more than 5,000 rows)."""
        with alt.data_transformers.enable("default", max_rows=None):
            return self.chart.to_dict()

    def to_svg(self, spec: dict | None = None) -> str:
        """Static SVG of the chart (vl-convert, offline); ``spec``: the chart's Vega-Lite dict when already made."""
        import vl_convert as vlc

        made = spec if spec is not None else self.spec()
        svg = vlc.vegalite_to_svg(readable(made), vl_version=_vl_version())
        return add_svg_tooltips(_strip_xml_header(svg))

    def _repr_html_(self, spec: dict | None = None) -> str:
        sources = html.escape("; ".join(self.provenance)) if self.provenance else "see caption"
        caption = self.caption if self.caption.rstrip().endswith((".", "!", "?")) else f"{self.caption.rstrip()}."
        return (
            f'<figure class="verifylab-chart" data-name="{html.escape(self.name)}">'
            f"{self.to_svg(spec)}"
            f'<p class="verifylab-chart-note">{html.escape(caption)} Data: {sources}.</p>'
            "</figure>"
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The page's HTML, plus the chart spec the exports render from (a MIME type the page ignores). The chart
        becomes a dict once (altair checks it against the Vega-Lite schema each time)."""
        spec = self.spec()
        shown = {"name": self.name, "caption": self.caption, "provenance": self.provenance, "spec": spec}
        return {"text/html": self._repr_html_(spec), FIGURE_MIME: json_safe(shown)}


def save_spec(spec: dict, name: str, title: str, folder: Path) -> dict[str, Path]:
    """Write a Vega-Lite spec as ``<name>.svg`` and ``<name>.png`` (titled) into ``folder``, atomically."""
    import vl_convert as vlc

    titled = dict(readable(spec), title={"text": title, "fontSize": 13, "anchor": "start"})
    svg_path, png_path = folder / f"{name}.svg", folder / f"{name}.png"
    svg = vlc.vegalite_to_svg(titled, vl_version=_vl_version())
    atomic_write_text(svg_path, svg)
    # the PNG rasterised from that SVG: the same bytes as vegalite_to_png, which would run Vega a second time
    atomic_write_bytes(png_path, vlc.svg_to_png(svg, scale=2))
    return {"svg": svg_path, "png": png_path}


def json_safe(value):
    """``value`` with NaN and infinities as None: notebook messages must be strict JSON (else jupyter_client
    prints a warning onto the page)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _vl_version() -> str:
    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return f"v{major_minor.replace('.', '_')}"


def _strip_xml_header(svg: str) -> str:
    return re.sub(r"^<\?xml[^>]*>\s*", "", svg)


_SYMBOL = re.compile(r'<(path|circle|rect|line)(\s[^>]*?aria-label="([^"]*)"[^>]*?)/>')


def add_svg_tooltips(svg: str) -> str:
    """Give every data mark a ``<title>`` from its ARIA label, so hovering shows the tooltip offline."""
    return _SYMBOL.sub(lambda m: f"<{m[1]}{m[2]}><title>{m[3]}</title></{m[1]}>", svg)


def provenance_color(present: Iterable[str] | None = None) -> alt.Color:
    """The shared colour encoding for the ``provenance`` column (measured / reported / modelled, always the same
    colours); the legend lists only the kinds ``present``."""
    kinds = [k for k in PROVENANCE_COLORS if present is None or k in set(present)]
    scale = alt.Scale(domain=kinds, range=[PROVENANCE_COLORS[k] for k in kinds])
    return alt.Color("provenance:N", scale=scale, title="provenance")


def reported_throughput_chart(tput: pd.DataFrame) -> Figure:
    """Bar chart of reported decode throughput per configuration and stack (introduction)."""
    chart = (
        alt.Chart(tput)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=0)),
            x=alt.X("value:Q", title="decode throughput, one stream (tok/s)"),
            color=provenance_color(tput["provenance"]),
            tooltip=["figure_id", "configuration", "stack", "value", "seed_file", "quote"],
        )
        .properties(width=260, height=alt.Step(20))
    )
    seeds = sorted(set(tput["seed_file"]))
    return Figure(
        chart,
        caption="Decode throughput reported by the case study (8x RTX PRO 6000 Blackwell, PCIe, TP 8, "
        "Kimi-K2.5 INT4). Reported, not measured here: the stacks differ between bars.",
        provenance=[f"reported: {s}" for s in seeds],
        name="reported_throughput",
    )


def verify_components_chart(components: pd.DataFrame, title_note: str = "") -> Figure:
    """Stacked bars: verify time by component (compute, all-reduce or all-to-all, norm) per what-if scenario."""
    chart = (
        alt.Chart(components)
        .mark_bar()
        .encode(
            y=alt.Y("name:N", sort=None, title=None, axis=alt.Axis(labelLimit=0)),
            x=alt.X("sum(ms):Q", title="verify pass (ms), modelled"),
            color=alt.Color("component:N", title="component"),
            tooltip=["name", "component", alt.Tooltip("ms:Q", format=".2f")],
        )
        .properties(width=320, height=alt.Step(24))
    )
    return Figure(
        chart,
        caption="Verify pass by component under each what-if (modelled from reported figures "
        "and the measured add+RMSNorm cost)" + title_note,
        provenance=["modelled"],
        name="verify_components",
    )


def legend_colour(field: str, title: str, columns: int = 1) -> alt.Color:
    """A colour channel whose legend sits under the chart, its labels whole (never cut to a width)."""
    return alt.Color(field, title=title, legend=alt.Legend(orient="bottom", columns=columns, labelLimit=0))


def tooltips(*fields: str, **formatted: str) -> list:
    """A tooltip list: ``fields`` as they are, then each of ``formatted`` (field = number format) as a number."""
    return [*fields, *(alt.Tooltip(f"{name}:Q", format=fmt) for name, fmt in formatted.items())]


def tokens_axis(tokens: pd.Series, title: str) -> alt.X:
    """A log2 token axis with a labelled tick at every measured token count: slanted when there are many, so that
    none is dropped for overlapping its neighbour (512 had lost its label)."""
    values = sorted({int(t) for t in tokens.dropna()})
    axis = alt.Axis(values=values, labelAngle=-45 if len(values) > 7 else 0, labelOverlap=False)
    return alt.X("tokens:Q", scale=alt.Scale(type="log", base=2), axis=axis, title=title)


def step_breakdown_chart(breakdown: pd.DataFrame) -> Figure:
    """Per-step time by class (communication, compute classes, idle), one bar per source, one panel per
    provenance (reported 8-GPU PCIe pass, measured H200 passes: each on its own time scale)."""
    chart = (
        alt.Chart(breakdown)
        .mark_bar()
        .encode(
            y=alt.Y("source:N", title=None, axis=alt.Axis(labelLimit=0, labelExpr="split(datum.label, '\\n')")),
            x=alt.X("sum(ms):Q", title="time per step (ms)"),
            color=alt.Color("part:N", title="part", legend=alt.Legend(orient="bottom", columns=3)),
            row=alt.Row("provenance:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=["source", "part", alt.Tooltip("ms:Q", format=".2f"), "provenance"],
        )
        .properties(width=380, height=alt.Step(30))
        .resolve_scale(x="independent", y="independent")
    )
    return Figure(
        chart,
        caption="Where a verify pass spends its time: reported (case study, 8x RTX PRO 6000, TP 8) next to what "
        "was measured here (H200 runs, SM90, not Blackwell: compare shapes, not numbers; each panel has its own "
        "time scale)",
        provenance=sorted(set(breakdown["provenance"])),
        name="step_breakdown",
    )
