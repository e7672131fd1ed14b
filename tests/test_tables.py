"""The book's one table renderer: units in headers, rounding by quantity, "—" with its footnote, lists joined,
yes/no, prose kept whole, kernel names cut with the full name on hover, and the cells the exports hold."""

from __future__ import annotations

import math

import pandas as pd

from verifylab.report.tables import EMPTY, EMPTY_NOTE, TABLE_MIME, Table, cell_text, header

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


def test_html_keeps_prose_whole_cuts_kernels_and_explains_the_dash():
    frame = pd.DataFrame(
        {"kernel": [KERNEL, "nccl"], "note": ["different stacks (CUDA 12.8 vs 13): not comparable", None]}
    )
    html = Table(frame)._repr_html_()
    assert '<td class="v-prose">different stacks (CUDA 12.8 vs 13): not comparable</td>' in html  # words whole
    run = Table(pd.DataFrame({"run": ["data/runs/20261130-142600-2xh200-comm/allreduce_latency.csv x"]}))
    assert "<td>data/runs/" in run._repr_html_()  # a long token may break anywhere: the table fits
    assert 'title="void at::native::elementwise_kernel&lt;128' in html and ">at::native::elementwise_kernel…<" in html
    assert EMPTY_NOTE in html and "<th>kernel</th>" in html
    bundle = Table(frame)._repr_mimebundle_()
    assert bundle[TABLE_MIME]["rows"][0][0] == KERNEL  # the export holds the full name


def test_a_meaningful_index_is_kept_as_a_column_and_a_plain_one_dropped():
    pivot = pd.DataFrame({"ms": [1.0, 2.0]}, index=pd.Index(["reported", "measured"], name="source"))
    assert list(Table(pivot).cells().columns) == ["source", "ms"]
    by_variant = pd.DataFrame({"tok_per_s": [1.0]}, index=["baseline"])
    assert Table(by_variant).cells().iloc[0, 0] == "baseline"
    assert list(Table(pd.DataFrame({"a": [1]})).cells().columns) == ["a"]
