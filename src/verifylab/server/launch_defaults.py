"""The launch settings' defaults and what each does, as plain values: ``server.settings`` declares its model from
them, and the command line (which must start without pydantic) takes its options' defaults and help from them."""

from __future__ import annotations

TP_SIZE = 1
PORT = 30000
SIMULATE_NO_MULTICAST = False
# draft model, memory fraction, attention backend: None (SGLang's own choice); extra flags: none; the launcher is
# computed: this interpreter -m sglang.launch_server (server.settings)

HELP = {
    "draft_model_path": "the EAGLE-3 draft model (eagle3 variants)",
    "tp_size": "tensor-parallel size",
    "port": "the port the started server listens on (127.0.0.1)",
    "mem_fraction_static": "GPU memory SGLang keeps for weights and KV cache (SGLang's default if None)",
    "attention_backend": "SGLang's attention backend for every variant, e.g. triton (SGLang's choice if None)",
    "launcher": "the command that starts SGLang (None: this interpreter -m sglang.launch_server)",
    "extra_args": 'more launch flags for every variant, e.g. ["--sampling-backend", "pytorch"]',
    "simulate_no_multicast": "answer SGLang's multicast queries as a PCIe box without NVLink multicast would "
    "(verifylab.guard's sitecustomize): reproduces the 'Skipping allreduce fusion' preflight on NVLink GPUs",
}
