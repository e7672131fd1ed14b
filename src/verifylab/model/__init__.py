"""The cost model, by concept, each floor importing only those below it; every output is *modelled* and names its
inputs.

- ``inputs``: what the model reads, as values — stored runs' curves, probes, grids and traces, served models' configs
  and their costs per pass, the GPU table, the public curves;
- ``pricing``: what a pass costs (``pricer``: one record of named terms per pass, every saving a difference of two),
  per collective and regime (``collectives``), on a box (``boxes``), with speculation (``speculation``), and its floors;
- ``fits``: what is fitted to measurements, and the checks of the model on what it did not fit;
- ``case``: the case study's account — its cycle, its box per regime, its options, the reconciliation, hypotheses;
- ``answers``: the decisions — the four questions per regime, a box's own decision and its plan, in words.
"""
