"""What is fitted to measurements — the overheads on a speculation grid, the fused kernel's in-pass factor, the
routing overlap on public curves — and the checks of the model on the measurements it was not fitted on."""
