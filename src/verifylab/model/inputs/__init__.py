"""What the model reads, as values: stored runs' curves, probes, grids and traces, served models' configs and their
costs per pass, the GPU table and the public speculation curves, and the one record they are read into (``stored``).
Nothing here prices a pass."""
