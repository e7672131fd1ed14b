"""What the book computes from the evidence, by concept: benchmarks, live servers, profiles, communication (probe
and campaign), gates, hardware, the deployment facts and the recommendations. Chapters show these; the rendering
kit (tables, charts, sections) is ``verifylab.report``; nothing here starts a process."""
