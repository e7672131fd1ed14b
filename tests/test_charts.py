def _layers_with_own_data(spec: dict) -> list[int]:
    """The layers of a faceted chart that carry rows of their own (Vega-Lite does not facet those: every panel
    would draw every regime's rows)."""
    inner = spec.get("spec", {})
    return [i for i, layer in enumerate(inner.get("layer", [])) if "data" in layer]


def test_a_faceted_chart_draws_each_panel_from_its_own_rows(shipped):
    """#71 (Fig. 4.8): the case study's Pareto and the options chart facet one layer of data by regime; a layer with
    data of its own drew all three regimes in every panel (identical panels, lines zig-zagging between regimes).
    The Pareto's points at the loads the book prices are labelled with their streams."""
    from verifylab.analysis.model_charts import PARETO_LABELLED_STREAMS
    from verifylab.chapters import ch04_fusion_vs_elimination as ch04

    for figure in (ch04.case_pareto_figure(shipped), ch04.options_figure(shipped)):
        spec = figure.spec()
        assert "facet" in spec and _layers_with_own_data(spec) == [], figure.name
    pareto = ch04.case_pareto_figure(shipped).spec()
    rows = next(iter(pareto["datasets"].values()))
    labelled = {r["streams"] for r in rows if r["label"]}
    assert labelled == set(PARETO_LABELLED_STREAMS) and any(
        layer.get("mark", {}).get("type") == "text" for layer in pareto["spec"]["layer"]
    )
