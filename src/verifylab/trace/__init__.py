"""Profiler traces: a streaming reader (``reader``), kernel classification (``classify``) and the
per-step breakdown (``analyze``). Analyses take events and return pandas DataFrames."""

from verifylab.trace.analyze import TraceSummary, summarize_traces

__all__ = ["TraceSummary", "summarize_traces"]
