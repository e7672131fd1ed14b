"""The rendering kit: tables, charts, sections and interval headers. It knows no topic: what is shown is computed
in ``verifylab.analysis`` (and the cost model, ``verifylab.model``)."""
