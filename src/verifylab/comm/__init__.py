"""Is this box's GPU-to-GPU communication healthy? ``verifylab comm probe`` measures it and says which regime the
box is in. Where each step lives:

- ``config``: what to measure (``ProbeConfig``: GPUs, message sizes, repetitions, deadlines), validated first
- ``probe``: the parent process: host facts, peer copies, one process per rank, deadlines, one error per failure
- ``rank``: what each rank runs (NCCL in a CUDA graph and eager, FlashInfer's kernels, pairs and halves)
- ``peers``: peer access and copy latency/bandwidth per GPU pair (one process)
- ``host``: read-only host facts (``nvidia-smi topo``, IOMMU, ACS, driver settings)
- ``nccl_log``: what NCCL says it chose, from its own INFO lines
- ``tables``: the stored tables, made from the raw record
- ``verdict``: the regime per world size and the one change to try first
- ``record``: the probe as one measured run (atomic), and its re-derivation from the raw record
"""
