"""The book's one table renderer: units in headers, rounding by quantity, "—" with its footnote, lists joined,
yes/no, prose kept whole, kernel names cut with the full name on hover, and the cells the exports hold."""

from __future__ import annotations

import math
import re

import pandas as pd

from verifylab.report.table_fit import (
    CELL_PAD_CHARS,
    CHAR_PX,
    COLUMN_PX,
    MIN_ROWS,
    MIN_WORD,
    word_limits,
    word_width,
)
from verifylab.report.tables import (
    EMPTY,
    EMPTY_NOTE,
    TABLE_MIME,
    Table,
    cell_text,
    header,
)

KERNEL = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::Functor<float>>>"


def test_headers_carry_units_and_lose_underscores():
    assert header("verify_ms") == "verify (ms)"
    assert header("verify_ms_low") == "verify low (ms)"
    assert header("tokens_per_s") == "tok/s" and header("median_output_tokens_per_s") == "median output (tok/s)"
    assert header("allreduce_us") == "allreduce (µs)"
    assert header("run_id") == "run id"


def test_cells_are_rounded_by_quantity_and_never_raw():
    assert cell_text("verify_ms", 29.70412) == "29.70"
    assert cell_text("ratio", 1.000123) == "1.00"
    assert cell_text("x", math.nan) == EMPTY and cell_text("x", None) == EMPTY and cell_text("x", []) == EMPTY
    assert cell_text("x", [585.4875116591818, 718.9888166459787]) == "585, 719"
    assert cell_text("active", True) == "yes" and cell_text("n", 122.0) == "122"


def test_html_keeps_words_whole_cuts_kernels_and_explains_the_dash():
    frame = pd.DataFrame(
        {"kernel": [KERNEL, "nccl"], "note": ["different stacks (CUDA 12.8 vs 13): not comparable", None]}
    )
    html = Table(frame)._repr_html_()
    assert '<span class="v-word">(CUDA</span>' in html and '<span class="v-word">13):</span>' in html  # kept whole
    assert 'title="void at::native::elementwise_kernel&lt;128' in html and "at::native::elementwise_kernel" in html
    assert EMPTY_NOTE in html and "<th>kernel</th>" in html
    bundle = Table(frame)._repr_mimebundle_()
    assert bundle[TABLE_MIME]["rows"][0][0] == KERNEL  # the export holds the full name


def test_identifiers_too_long_for_the_narrowest_column_wrap_after_their_separators_and_are_never_cut():
    run_id = "20261201-091704-2xh200-probe-socket"
    path = "sglang/srt/arg_groups/overrides.py"
    frame = pd.DataFrame({c: [f"{run_id} {path}"] for c in ("a", "b", "c", "d")})
    cells = Table(frame).cells()
    limits = word_limits(cells)
    assert sum(limits) + CELL_PAD_CHARS * 4 <= COLUMN_PX / CHAR_PX and min(limits) >= MIN_WORD
    html = Table(frame)._repr_html_()
    assert "…" not in html and "title=" not in html
    assert '<span class="v-wrap">20261201-<wbr>091704-<wbr>2xh200-<wbr>probe-<wbr>socket</span>' in html
    assert "sglang/<wbr>srt/<wbr>arg_<wbr>groups/<wbr>overrides.<wbr>py" in html
    shown = re.sub(r"<[^>]+>", "", html)
    assert shown.count(run_id) == 4 and shown.count(path) == 4  # what the reader reads and copies is whole
    narrow = pd.DataFrame({"run": [run_id], "n": [1]})
    assert word_limits(Table(narrow).cells())[0] == len(run_id)  # room enough: nothing shortened


def test_words_of_prose_stay_whole_while_identifiers_make_room():
    run_id = "20261201-091704-2xh200-probe-socket"
    frame = pd.DataFrame({c: [f"{run_id} approximately"] for c in ("a", "b", "c", "d", "e")})
    limits = word_limits(Table(frame).cells())
    assert all(n >= len("approximately") for n in limits)  # the identifier wraps instead
    html = Table(frame)._repr_html_()
    assert "approximately" in html.replace('title="', "").split(">", 3)[-1] and f">{run_id}" not in html


def test_noted_columns_move_long_texts_into_lettered_notes_and_the_export_keeps_them():
    long_a = "yes, where the gates are open and the workspace needs no multicast"
    long_b = "needs working P2P: fix P2P first, see https://example.org/p2p"
    frame = pd.DataFrame({"option": ["x", "y", "z"], "runs": ["yes", long_a, long_a], "why": ["—", "—", long_b]})
    table = Table(frame, noted=("runs", "why"))
    html = table._repr_html_()
    assert html.count(">note a</span></td>") == 2
    text = re.sub(r"<(?!/?b>)[^>]+>", "", html)  # what a reader reads (the notes' labels kept bold)
    assert "<b>note a</b>: yes, where" in text and "<b>note b</b>: needs" in text
    assert '<a class="reference external" href="https://example.org/p2p">' in html  # #71: a note's URL is a link
    assert "<td>yes</td>" in html  # short cells stay in the table
    assert table._repr_mimebundle_()[TABLE_MIME]["rows"][1][1] == long_a


def test_a_table_taller_than_a_screen_folds_its_other_rows_with_the_header_repeated():
    frame = pd.DataFrame({"step": range(60), "note": ["a sentence of prose that takes a line or two"] * 60})
    html = Table(frame)._repr_html_()
    shown = html.split("<details")[0].count("<tr>") - 1
    assert 1 <= shown < 60 and f"Show the other {60 - shown} rows" in html
    assert html.count("<thead>") == 2 and "v-more" in html
    assert "<details" not in Table(frame.head(MIN_ROWS))._repr_html_()


def test_listed_columns_become_listings_below_the_table_and_stay_whole_in_the_export():
    command = "python -m sglang.launch_server --model-path /m --tp-size 8"
    table = Table(pd.DataFrame({"topic": ["launch"], "command": [command]}), listed=("command",))
    html = table._repr_html_()
    assert f'<span title="{command}">listing 1</span>' in html
    assert "Listing 1 (command, launch)" in html and "--model-path /m \\\n  --tp-size 8" in html
    assert table._repr_mimebundle_()[TABLE_MIME]["rows"] == [["launch", command]]


def test_whole_floats_keep_their_column_decimals_and_counts_stay_integers():
    frame = pd.DataFrame({"tokens_per_s": [2050.0, 2005.123], "allreduces": [122.0, 1.0]})
    cells = Table(frame).cells()
    assert cells["tok/s"].tolist() == ["2,050.0", "2,005.1"] and cells["allreduces"].tolist() == ["122", "1"]


def test_a_meaningful_index_is_kept_as_a_column_and_a_plain_one_dropped():
    pivot = pd.DataFrame({"ms": [1.0, 2.0]}, index=pd.Index(["reported", "measured"], name="source"))
    assert list(Table(pivot).cells().columns) == ["source", "ms"]
    by_variant = pd.DataFrame({"tok_per_s": [1.0]}, index=["baseline"])
    assert Table(by_variant).cells().iloc[0, 0] == "baseline"
    assert list(Table(pd.DataFrame({"a": [1]})).cells().columns) == ["a"]
    filtered = pd.DataFrame({"a": [1, 2, 3, 4]}).iloc[[0, 1, 3]]  # row numbers 0, 1, 3: never a column
    assert list(Table(filtered).cells().columns) == ["a"]


def test_a_hyphenated_word_of_prose_may_break_after_its_hyphens_but_an_identifier_stays_whole():
    run_id = "20261201-091704-2xh200-probe-socket"
    frame = pd.DataFrame({c: [f"host-memory fallback (all-to-all) {run_id}"] for c in "abcdefghi"})
    html = Table(frame)._repr_html_()
    assert "host-memory" in html and "host…" not in html and "(all-to-all)" in html  # never shortened
    assert '<span class="v-word">host-memory</span>' not in html  # free to break after "host-"
    assert '<span class="v-wrap">20261201-<wbr>' in html  # the run id is what wraps, whole
    assert word_width("(all-to-all)") == len("(all-") and word_width(run_id) == len(run_id)


def test_backticked_spans_are_set_as_code_and_escaped():
    table = Table(pd.DataFrame({"do": ["run `verifylab comm probe <x>` first"]}))
    html = table._repr_html_()
    assert "<code>verifylab comm probe &lt;x&gt;</code>" in html and "`" not in html
    assert table._repr_mimebundle_()[TABLE_MIME]["rows"] == [["run `verifylab comm probe <x>` first"]]


def test_a_spanned_column_reads_as_a_full_width_line_under_its_row_and_the_export_keeps_the_columns():
    prose = "upgrade to SGLang 0.5.20 and open _flashinfer_allreduce_fusion_auto_enable in arg_groups/overrides.py"
    frame = pd.DataFrame(
        {"topic": ["fusion"], "recommendation": [prose], "confidence": ["medium"], "evidence": ["chapter 4"]}
    )
    table = Table(frame, spanned="recommendation")
    html = table._repr_html_()
    assert '<tr class="v-lead"><td>fusion</td><td>medium</td><td>chapter 4</td></tr>' in html
    assert '<tr class="v-under"><td colspan="3" class="v-prose">' in html
    assert "_flashinfer_allreduce_fusion_auto_enable" in html.split('class="v-under"><td')[1]  # the full width: whole
    assert '<th colspan="3" class="v-prose">recommendation</th>' in html
    assert table._repr_mimebundle_()[TABLE_MIME]["columns"] == ["topic", "recommendation", "confidence", "evidence"]


def test_a_table_too_wide_lifts_its_one_value_columns_above_it_and_the_export_keeps_them():
    run_id = "20261130-142600-2xh200-comm"
    columns = {f"quantity_{i}_us": [1000.0 * i, 2000.0 * i] for i in range(1, 10)}
    stamp = {"run_id": [run_id] * 2, "provenance": ["measured"] * 2}
    frame = pd.DataFrame({"path": ["nvlink", "pcie"], **columns, **stamp})
    table = Table(frame)
    html = table._repr_html_()
    common, grid = html.split("<table", 1)
    assert "Every row: " in common and f'data-value="{run_id}"' in common and "provenance: measured" in common
    assert "run id" not in grid and "measured" not in grid
    assert table._repr_mimebundle_()[TABLE_MIME]["columns"][-2:] == ["run id", "provenance"]
    narrow = Table(frame[["path", "run_id"]])._repr_html_()
    assert "Every row" not in narrow  # it fits: nothing moves


def test_a_raw_block_cannot_be_ended_by_backticks_in_its_free_text():
    from verifylab.report.section import raw_html_block

    block = raw_html_block("<pre>note:\n```\nstays text</pre>")
    lines = block.splitlines()
    assert lines[0] == "```{raw} html" and lines[-1] == "```"
    assert not any(line.startswith("`") for line in lines[1:-1]) and "&#96;&#96;&#96;" in block


def test_a_url_in_a_cell_is_a_link_escaped_in_both_places_and_nothing_else_is():
    frame = pd.DataFrame({"source": ["https://example.org/a?x=1&y=<2> javascript:alert(1) see http://b.example/c"]})
    html = Table(frame)._repr_html_()
    assert "https://example.org/a?x=1&amp;y=&lt;2&gt;" in html  # no clean URL: escaped text, not a link
    assert html.count("<a ") == 1 and 'href="http://b.example/c"' in html
    linked = Table(pd.DataFrame({"source": ["see https://example.org/q?a=1&b=2"]}))._repr_html_()
    assert 'href="https://example.org/q?a=1&amp;b=2"' in linked  # & escaped in the href as in the text
    assert "javascript:alert(1)" in re.sub(r"<[^>]+>", "", html) and 'href="javascript' not in html
