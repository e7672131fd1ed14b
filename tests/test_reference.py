import pytest

from verifylab.errors import ReferenceDataError
from verifylab.reported import reported_value
from verifylab.store.reference import load_reported_figures, quote_in_seed, reported_throughput

from .conftest import SEEDS

REQUIRED = {
    "baseline_82": 82,
    "baseline_89_5": 89.5,
    "baseline_90": 90,
    "baseline_92_6": 92.6,
    "eagle3_54_1": 54.1,
    "eagle3_54_8": 54.8,
    "eagle3_60": 60,
    "eagle3_fusion_96_1": 96.1,
    "allreduces_per_verify": 122,
    "verify_allreduce_ms": 25,
    "verify_total_ms": 30,
    "accept_length": 2.0,
    "drafter_accuracy_scratch": 74.7,
    "drafter_accuracy_aq": 38,
    "ngram_41": 41,
    "fusion_saving_estimate_low": 2,
    "fusion_saving_estimate_high": 8,
    "spec_liability_concurrency": 30,
    "bench_warmups": 2,
    "bench_runs": 5,
    "bench_tokens": 2048,
}


def test_reported_figures_are_complete(repo_root):
    figures = load_reported_figures(repo_root / "data")
    for figure_id, value in REQUIRED.items():
        assert reported_value(figures, figure_id) == value
    runs = sorted(figures.loc[figures.figure_id.str.startswith("fusion_run_"), "value"])
    assert runs == [92.6, 92.6, 92.6, 92.7, 93.1]
    assert set(figures["provenance"]) == {"reported"}


@pytest.mark.skipif(not SEEDS.is_dir(), reason="shared/seeds is not beside this checkout")
def test_every_quote_is_verbatim_in_its_seed(repo_root):
    figures = load_reported_figures(repo_root / "data")
    for row in figures.itertuples():
        text = (SEEDS / row.seed_file).read_text(encoding="utf-8")
        assert quote_in_seed(row.quote, text), f"{row.figure_id}: quote not in {row.seed_file}"


def test_quote_matching_ignores_whitespace_only():
    assert quote_in_seed("a  b\nc", "x a b c y")
    assert not quote_in_seed("a b d", "x a b c y")


def test_malformed_reference_table_is_named(data_dir):
    path = data_dir / "reference" / "reported_figures.csv"
    path.write_text("figure_id,quantity\nx,y\n")
    with pytest.raises(ReferenceDataError, match=r"reported_figures\.csv: missing column"):
        load_reported_figures(data_dir)


def test_throughput_subset(repo_root):
    tput = reported_throughput(load_reported_figures(repo_root / "data"))
    assert {"baseline", "fusion", "eagle3", "eagle3_fusion", "ngram"} <= set(tput["configuration"])
