"""Verify-pass and speculative-decoding cost model (``costmodel``), the reconciliation of the reported
figures (``reconcile``) and physical limits (``limits``). Every output is *modelled* and lists its inputs."""
