"""Direct tests of four modules the book reaches only end to end: the server-log reader, the trace reader, the
gate scanner and the chart kit — each on small inputs written here, one behaviour per test."""

from __future__ import annotations

import gzip
import json
import re

import pandas as pd
import pytest

from verifylab.errors import TraceError
from verifylab.server.server_log import (
    classify_failure,
    effective_state,
    fusion_in_effect,
    last_error_line,
    last_log_line,
)
from verifylab.server.variants import DEFAULT_VARIANTS
from verifylab.trace import reader


# --- server_log ---------------------------------------------------------------------------------------------------
def test_the_last_failure_counts_and_ignored_import_errors_do_not():
    log = (
        "Ignore import error when loading sglang.srt.models.foo: No module named 'foo'\n"
        "NCCL WARN something\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n"
    )
    assert classify_failure(log)[0] == "cuda_oom"  # signatures are tried in order (out of memory before NCCL)
    assert classify_failure("Ignore import error when loading x: No module named 'x'\n")[0] == "unknown"
    name, advice = classify_failure('ImportError: sgl_kernel requires "deep_gemm" to be installed')
    assert name == "missing_package" and "'deep_gemm'" in advice
    assert last_error_line("a\nValueError: first\nb\nRuntimeError: second one\n") == "RuntimeError: second one"
    assert last_error_line("all good\n") is None


def test_a_skip_after_an_enable_means_fusion_is_not_in_effect():
    enabled = "AllReduce Fusion enabled and workspace initialized\n"
    assert fusion_in_effect(enabled) == "enabled"
    assert fusion_in_effect(enabled + "Skipping allreduce fusion: no multicast\n") == "skipped"
    assert fusion_in_effect("Auto-enabling FlashInfer allreduce fusion\n") is None  # requested, not in effect


def test_the_state_in_effect_decides_whether_a_variant_counts():
    fusion = DEFAULT_VARIANTS["fusion"]
    args = {"server_args": {"tp_size": 2, "flashinfer_allreduce_fusion": True}}
    fused = effective_state(
        fusion, args, "AllReduce Fusion enabled and workspace initialized\nverifylab multicast guard loaded"
    )
    assert fused.active and fused.fusion == "enabled" and fused.multicast_guard
    unverified = effective_state(fusion, args, "")
    assert not unverified.active and unverified.fusion == "unverified"
    tp1 = effective_state(fusion, {"tp_size": 1, "flashinfer_allreduce_fusion": False}, "")
    assert not tp1.active and "TP 1" in tp1.inactive_reasons[0]
    baseline = effective_state(DEFAULT_VARIANTS["baseline"], args, "AllReduce Fusion enabled and workspace initialized")
    assert not baseline.active and "auto-enabled" in baseline.inactive_reasons[0]
    eagle = effective_state(DEFAULT_VARIANTS["eagle3"], {"tp_size": 2}, "")
    assert "speculation is off" in "; ".join(eagle.inactive_reasons)
    assert set(fused.as_row()) == {
        "fusion",
        "speculative_algorithm",
        "tp_size",
        "active",
        "inactive_reasons",
        "multicast_guard",
        "pcie_ipc",
        "failure",
    }


def test_the_last_log_line_is_redacted_and_a_missing_log_is_empty(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("loading\nconnecting to https://user:hunter2@host/x\n\n")
    assert "hunter2" not in last_log_line(log) and last_log_line(log).startswith("connecting to")
    assert last_log_line(tmp_path / "none.log") == "" and last_log_line(None) == ""


# --- trace.reader -------------------------------------------------------------------------------------------------
EVENTS = [{"name": "k", "ph": "X", "ts": 1.5, "dur": 2, "pid": 0, "tid": 7, "args": {"correlation": 3}}] * 3


def view(events) -> list[tuple]:
    """What the analysis reads of each event (a record from the reader, or a dict as written)."""
    records = [e if isinstance(e, reader.RawEvent) else reader._record(e) for e in events]
    return [(e.name, e.ph, e.ts, e.dur, e.tid, e.args.correlation if e.args else None) for e in records]


@pytest.mark.parametrize("compressed", [False, True])
def test_events_stream_from_plain_and_gzip_traces_in_either_shape(tmp_path, compressed):
    for shape in ({"traceEvents": EVENTS, "meta": 1}, EVENTS):
        text = json.dumps(shape).encode()
        path = tmp_path / ("t.json.gz" if compressed else "t.json")
        path.write_bytes(gzip.compress(text) if compressed else text)
        assert view(reader.iter_raw(path)) == view(EVENTS)


def test_an_event_split_across_chunks_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "CHUNK", 16)  # every event straddles chunks
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    assert view(reader.iter_raw(path)) == view(EVENTS)


def test_a_chunk_decoded_at_once_and_one_event_at_a_time_agree(tmp_path, monkeypatch):
    """A "}," inside a string makes the batch decode fail: the reader goes on one event at a time, same events."""
    one_at_a_time = []
    record = reader._record
    monkeypatch.setattr(reader, "_record", lambda obj: one_at_a_time.append(1) or record(obj))
    tricky = [{**EVENTS[0], "name": 'odd "},{" name'}, *EVENTS, {**EVENTS[0], "ts": 9, "args": {"x": [1, {"y": 2}]}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": tricky * 50}))
    events = list(reader.iter_raw(path))
    assert view(events) == view(tricky * 50) and one_at_a_time  # the fallback ran, with the same result
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"traceEvents": EVENTS * 100}))
    expected = view(EVENTS * 100)
    one_at_a_time.clear()
    assert view(reader.iter_raw(plain)) == expected and len(one_at_a_time) == 1  # the last only


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ('{"other": []}', "without a 'traceEvents' list"),
        ("hello", "not JSON"),
        ('{"traceEvents": [{"name": "k"}, ', "truncated at byte"),
        ('{"traceEvents": [{"name": "k"}, {"name": x}]}', "invalid JSON at byte 41"),
    ],
)
def test_a_bad_trace_is_one_line_naming_the_file_and_the_byte(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceError, match=message) as err:
        list(reader.iter_raw(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_the_byte_of_an_error_counts_bytes_and_a_byte_that_is_not_utf8_is_replaced(tmp_path):
    """Offsets are bytes of the file (a name in Greek is two bytes a letter), and an invalid UTF-8 byte in a name
    becomes U+FFFD in the event instead of stopping the read."""
    path = tmp_path / "greek.json"
    path.write_bytes('{"traceEvents": [{"name": "αβγ"}, {"name": x}]}'.encode())
    with pytest.raises(TraceError, match="invalid JSON at byte 46"):  # 43 characters before the x, 46 bytes
        list(reader.iter_raw(path))
    path.write_bytes(b'{"traceEvents": [{"name": "k\xff"}, {"name": "after"}]}')
    assert [e.name for e in reader.iter_raw(path)] == ["k\ufffd", "after"]


def test_an_event_keeps_only_what_the_analysis_reads():
    record = reader._record
    event = reader.to_event(record({**EVENTS[0], "args": {"correlation": 3, "huge": "x" * 1000}}))
    assert event.end == 3.5 and dict(event.args) == {"correlation": 3}
    assert reader.correlation_of(record({"args": {"correlation": "12"}})) == 12
    assert reader.correlation_of(record({"args": {}})) == reader.correlation_of(record({"args": {"correlation": "x"}}))
    assert reader.correlation_of(record({"args": {}})) == -1
    with pytest.raises(TraceError):
        reader.event_time(record({"name": "k", "ts": "abc"}), "ts")


# --- gates.scan ---------------------------------------------------------------------------------------------------
def test_the_scanner_finds_an_arch_gate_of_a_fusion_function_and_its_state(tmp_path):
    from verifylab.gates.scan import scan_file

    def scan_source(source: str, rel: str, target: int):
        path = tmp_path / rel.replace("/", "_")
        path.write_text(source)
        return scan_file(path, rel, target)

    source = (
        "from sglang.srt.utils import is_sm90_supported, is_sm100_supported\n"
        "def _flashinfer_allreduce_fusion_auto_enable():\n"
        "    return is_sm90_supported() or is_sm100_supported()\n"
    )
    findings = scan_source(source, "arg_groups/overrides.py", target=120)
    (gate,) = [f for f in findings if f.kind == "boolean_gate"]
    assert gate.status == "closed" and gate.function == "_flashinfer_allreduce_fusion_auto_enable"
    assert sorted(gate.archs) == [90, 100] and gate.line == 3
    opened = source.replace("is_sm100_supported()", "is_sm100_supported() or is_sm120_supported()")
    assert all(f.status == "open" for f in scan_source(opened, "x.py", target=120) if f.kind == "boolean_gate")


def test_a_capability_table_is_parsed_however_its_assignment_is_laid_out():
    from verifylab.gates.prefilter import worth_parsing

    for layout in ["X_SYMM_SIZES = {", "X_SYMM_SIZES={", "_ALLREDUCE_MAX = (\n  {", "MULTIMEM_WS = \\\n{",
                   "ALL_REDUCE_T = (  # by major\n    {"]:  # fmt: skip
        assert worth_parsing(f"{layout}9: 1, 10: 2}}" + (")" if "(" in layout else "") + "\n"), layout
    assert not worth_parsing("if is_sm100_supported() or is_sm90_supported():\n    use_fa3 = True\n")
    assert worth_parsing("if is_sm100_supported() or is_sm90_supported():\n    enable_allreduce_fusion = True\n")


# --- report.charts ------------------------------------------------------------------------------------------------
def test_a_figure_renders_offline_svg_with_its_caption_escaped():
    import altair as alt

    from verifylab.report.charts import Figure

    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_line().encode(x="x:Q", y="y:Q")
    figure = Figure(chart, "a <b>caption</b> & more", provenance=["run <x>"], name='tbl-"q"')
    html = figure._repr_html_()
    assert "<svg" in html and "<script" not in html.lower()  # inline SVG: opens offline, runs nothing
    assert "<b>caption</b>" not in html and "a &lt;b&gt;caption&lt;/b&gt; &amp; more" in html
    assert "run &lt;x&gt;" in html and 'data-name="tbl-&quot;q&quot;"' in html


def test_a_figure_note_ends_its_caption_before_naming_the_data():
    """A caption that ends without a stop ("..., midpoints", "... left out)") gets one before "Data:"; one that has
    a stop keeps it alone."""
    import altair as alt

    from verifylab.report.charts import Figure

    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_line().encode(x="x:Q", y="y:Q")
    notes = {
        caption: re.search(r'chart-note">(.*?)</p>', Figure(chart, caption, ["modelled"])._repr_html_()).group(1)
        for caption in ("at 1 stream, midpoints", "(forced rows left out)", "the middle of each range.")
    }
    assert notes == {
        "at 1 stream, midpoints": "at 1 stream, midpoints. Data: modelled.",
        "(forced rows left out)": "(forced rows left out). Data: modelled.",
        "the middle of each range.": "the middle of each range. Data: modelled.",
    }


def test_an_exported_chart_is_titled_and_its_png_is_what_vega_draws(tmp_path):
    """The export's PNG is rasterised from its SVG: the same image (byte for byte) as vl-convert draws from the
    titled spec itself, at twice the scale."""
    import altair as alt
    import vl_convert as vlc

    from verifylab.report.charts import _vl_version, readable, save_spec

    chart = alt.Chart(pd.DataFrame({"x": [1, 2, 3], "y": [3, 1, 4]})).mark_line().encode(x="x:Q", y="y:Q")
    files = save_spec(chart.to_dict(), "fig-1-line", "Figure 1: a line — edition e1", tmp_path)
    assert "Figure 1: a line — edition e1" in files["svg"].read_text(encoding="utf-8")
    titled = dict(
        readable(chart.to_dict()), title={"text": "Figure 1: a line — edition e1", "fontSize": 13, "anchor": "start"}
    )
    assert files["png"].read_bytes() == vlc.vegalite_to_png(titled, vl_version=_vl_version(), scale=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig-1-line.png", "fig-1-line.svg"]  # no temp file left


def test_gate_versions_read_as_ranges_of_the_audited_versions():
    from verifylab.analysis.gates import version_ranges

    statuses = {"0.5.6": "—", "0.5.8": "closed", "0.5.9": "closed", "0.5.20": "closed", "0.5.23": "—"}
    assert version_ranges(statuses) == "closed 0.5.8–0.5.20; absent 0.5.6, 0.5.23"
    assert version_ranges({"0.5.10": "info", "0.5.9": "info"}) == "present (no gate) 0.5.9–0.5.10"  # by version


def test_a_chart_of_thousands_of_rows_draws_instead_of_failing():
    """A store with thousands of sweeps gives a dense chart, never Altair's 5,000-row error."""
    import altair as alt

    from verifylab.report.charts import Figure

    frame = pd.DataFrame({"streams": range(6000), "tokens_per_s": range(6000)})
    figure = Figure(alt.Chart(frame).mark_point().encode(x="streams", y="tokens_per_s"), "dense")
    assert "<svg" in figure.to_svg() and len(next(iter(figure.spec()["datasets"].values()))) == 6000
