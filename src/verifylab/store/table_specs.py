"""Every run table's declaration: its columns (name, dtype, unit), the key that identifies a row, and what makes a
run hold it (:data:`TABLES`). :mod:`verifylab.store.schema` checks frames against them and migrates older runs."""

from __future__ import annotations

import re
from dataclasses import dataclass

DTYPES = ("str", "int", "float", "bool", "json")  # json: a list or object stored as JSON text


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str

    @property
    def unit(self) -> str:
        return unit_of(self.name)


@dataclass(frozen=True)
class TableSpec:
    """One kind of run table: ``name`` is the table's name, or a pattern with ``{field}`` parts (one table per
    variant or cell); ``key`` identifies a row (an upsert replaces rows with the same key)."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def matches(self, table: str) -> bool:
        pattern = re.sub(r"\\\{[a-z_]+\\\}", "[a-z0-9_.]+", re.escape(self.name))
        return re.fullmatch(pattern, table) is not None


def unit_of(column: str) -> str:
    """The unit a column's name declares ('' for counts, labels and ratios)."""
    for suffix, unit in (
        ("tokens_per_s", "tok/s"),
        ("_gbs", "GB/s"),
        ("_us", "µs"),
        ("_ms", "ms"),
        ("_s", "s"),
        ("bytes", "bytes"),
        ("_tflops", "TFLOP/s"),
    ):
        if column.endswith(suffix) or column == suffix.strip("_"):
            return unit
    return ""


def _columns(spec: str) -> tuple[Column, ...]:
    """``"name:dtype name:dtype ..."`` as columns."""
    out = []
    for item in spec.split():
        name, _, dtype = item.partition(":")
        if dtype not in DTYPES:
            raise ValueError(f"column {name}: dtype {dtype!r} is not one of {DTYPES}")
        out.append(Column(name, dtype))
    return tuple(out)


_REQUEST = (
    "prompt_id:str category:str ok:bool error:str prompt_tokens:int output_tokens:int ttft_s:float tpot_s:float "
    "e2e_s:float output_tokens_per_s:float chunks:int median_itl_s:float spec_verify_ct:int output_digest:str"
)
_STATE = (
    "variant:str fusion:str speculative_algorithm:str tp_size:int active:bool inactive_reasons:str "
    "multicast_guard:bool pcie_ipc:str failure:str"
)
_PASS = (
    "path:str variant:str tokens:int layers_measured:int allreduces_per_pass:int pass_ms:float measured_ms:float "
    "measured_ms_min:float measured_ms_max:float replays:int rel_diff_vs_nccl:float note:str"
)
_LATENCY = (
    "path:str impl:str tokens:int bytes:int us:float us_min:float us_max:float replays:int rel_err:float "
    "settings:str note:str"
)
_BREAKDOWN = (
    "step:int phase:str span_us:float allreduce_count:int allgather_count:int comm_us:float compute_us:float "
    "idle_us:float exposed_comm_us:float norm_us:float gemm_moe_us:float attention_us:float"
)

TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "single_stream",
        "One row per variant: the median single-stream throughput over the runs, the order-statistic interval of "
        "that median with its coverage, and the accept length (client and server).",
        _columns(
            "variant:str median_output_tokens_per_s:float interval_low:float interval_high:float "
            "interval_coverage:float accept_length:float server_accept_length:float runs:int failed:int"
        ),
        key=("variant",),
    ),
    TableSpec(
        "single-{variant}",
        "Each single-stream request of one variant, with its output token ids (greedy-output comparison).",
        _columns(f"variant:str {_REQUEST} output_ids:json"),
    ),
    TableSpec(
        "sweep_cells",
        "One row per (variant, concurrency) cell of a sweep: throughput, a 95 % bootstrap interval of the mean "
        "per-request tok/s, latencies, goodput under the SLOs in the row.",
        _columns(
            "variant:str concurrency:int effective_concurrency:int requests:int failed:int wall_s:float "
            "output_tokens_per_s:float per_request_tokens_per_s_ci95:json median_itl_ms:float p90_itl_ms:float "
            "p99_itl_ms:float median_ttft_ms:float median_tpot_ms:float accept_length:float "
            "tokens_per_s_per_user:float goodput_tokens_per_s:float slo_ttft_s:float slo_tpot_s:float errors:json"
        ),
        key=("variant", "concurrency"),
    ),
    TableSpec(
        "sweep-{variant}-c{concurrency}",
        "Each request of one sweep cell.",
        _columns(f"variant:str concurrency:int {_REQUEST}"),
    ),
    TableSpec(
        "variant_state",
        "Each variant's requested vs in-effect state, read from the running server.",
        _columns(f"repeat:int order:int {_STATE}"),
        key=("variant", "repeat"),
    ),
    TableSpec("profile_state", "The profiled variant's state, read from the running server.", _columns(_STATE)),
    TableSpec(
        "speculation_points",
        "One row per server of a speculation-under-load grid: the drafter, draft tokens per verify and the accept "
        "length SGLang was made to hold (SGLANG_SIMULATE_ACC_LEN), the server's own average, its state.",
        _columns(
            f"drafter:str draft_tokens:int accept_target:float server_accept_length:float failed_cells:int {_STATE}"
        ),
        key=("variant",),
    ),
    TableSpec(
        "grid_prediction",
        "The speculation model's prediction of a grid, written and committed before the grid ran (its commit in the "
        "run's notes): per server and stream count, plain and speculative tok/s and the gain, each a range.",
        _columns(
            "drafter:str draft_tokens:int accept_target:float streams:int plain_tokens_per_s_low:float "
            "plain_tokens_per_s_high:float spec_tokens_per_s_low:float spec_tokens_per_s_high:float gain_low:float "
            "gain_high:float spread_floor_ms:float routing:str overlap_low:float overlap_high:float fitted_run:str"
        ),
        key=("drafter", "draft_tokens", "accept_target", "streams"),
    ),
    TableSpec(
        "box_verify_points",
        "One row per server `verifylab box --verify` started (the choice, the runner-up, plain decoding): as "
        "speculation_points, kept apart so that a check never enters the speculation grid's fit.",
        _columns(
            f"drafter:str draft_tokens:int accept_target:float server_accept_length:float failed_cells:int {_STATE}"
        ),
        key=("variant",),
    ),
    TableSpec(
        "trace_steps",
        "One row per rank and decode/verify step of a profile: span, collectives and where the time went.",
        _columns(
            "norm:str rank:int step:int phase:str span_us:float kernel_count:int allreduce_count:int "
            "allgather_count:int other_collective_count:int comm_us:float comm_wait_us:float "
            "comm_transfer_us:float compute_us:float idle_us:float exposed_comm_us:float norm_us:float "
            "gemm_moe_us:float attention_us:float bytes_per_allreduce:float bytes_source:str allreduce_impls:str "
            "nccl_name_suffixes:str source:str backend:str variant:str"
        ),
        key=("variant", "rank", "step"),
    ),
    TableSpec(
        "trace_kernels",
        "Kernel time per rank, by kernel and group.",
        _columns("rank:int kernel:str group:str count:int total_us:float variant:str"),
    ),
    TableSpec(
        "allreduce_kernels",
        "All-reduce kernels per verify pass, by phase and implementation, of a profiled server.",
        _columns("phase:str impl:str kernel:str per_pass:float passes:int variant:str"),
    ),
    TableSpec(
        "step_wall_time",
        "Wall time of each synthetic step per rank.",
        _columns("rank:int step:int wall_ms:float"),
    ),
    TableSpec(
        "allreduce_latency",
        "Per-call all-reduce latency by path, implementation and message size (the probe's and the campaign's).",
        _columns(
            f"{_LATENCY} group:str ranks:int mode:str us_slowest_rank:float rank_skew_us:float slowest_rank:int "
            "protocol:str correct:bool algbw_gbs:float busbw_gbs:float algorithm:str nccl_channels:int"
        ),
        key=("path", "impl", "tokens", "group", "mode"),
    ),
    TableSpec("collective_latency", "Latency of the other collectives (send/recv, all-gather).", _columns(_LATENCY)),
    TableSpec(
        "nccl_transport",
        "The transport NCCL logged per GPU pair and path.",
        _columns(
            "path:str meaning:str nccl_transport:str exit:int gpu_a:int gpu_b:int transport:str via:str channels:int "
            "nccl_version:str coll_channels:int environment:str"
        ),
    ),
    TableSpec("verify_pass", "Synthetic verify passes per path, variant and tokens.", _columns(_PASS)),
    TableSpec(
        "verify_pass_pytorch_norm",
        "Synthetic verify passes with PyTorch's norm instead of the fused kernel.",
        _columns(_PASS),
    ),
    TableSpec(
        "verify_pass_trace",
        "The synthetic passes' traces, one row per step.",
        _columns(f"path:str variant:str tokens:int {_BREAKDOWN}"),
    ),
    TableSpec(
        "verdict",
        "The communication probe's verdict: the regime, its band and evidence, the fix to try.",
        _columns(
            "world:int regime:str transport:str reference_tokens:int reference_bytes:int allreduce_us:float "
            "allreduce_eager_us:float band:str band_evidence:str reason:str fix_hypothesis:str fix_evidence:str "
            "group:str refused_paths:str"
        ),
    ),
    TableSpec(
        "rank_map",
        "The communication probe's ranks: which physical GPU each ran on (NVML where it loads).",
        _columns(
            "rank:int cuda_device:int nvml_index:int name:str uuid:str pci_bus_id:str numa_node:int pcie_link:str "
            "pcie_link_max:str nccl_version:str source:str"
        ),
    ),
    TableSpec(
        "box_decode",
        "One stream of plain decoding that `verifylab box` measured on the probed box's server, per request; each "
        "measurement is kept with its time (a later one is added, never written over the earlier).",
        _columns("request:int tpot_ms:float tokens_per_s:float max_tokens:int url:str measured_at:str"),
        key=("measured_at", "request"),
    ),
    TableSpec(
        "box_verify",
        "`verifylab box --verify`: per configuration measured (the choice, the runner-up, plain decoding) and stream "
        "count, the model's prediction beside the measurement: tok/s, time per output token and to first token "
        "(median), goodput under the SLO, and the prediction's error.",
        _columns(
            "role:str variant:str configuration:str streams:int predicted_tokens_per_s_low:float "
            "predicted_tokens_per_s_high:float measured_tokens_per_s:float predicted_tpot_ms_low:float "
            "predicted_tpot_ms_high:float measured_tpot_ms:float predicted_ttft_ms_low:float "
            "predicted_ttft_ms_high:float measured_ttft_ms:float predicted_goodput_tokens_per_s_low:float "
            "predicted_goodput_tokens_per_s_high:float measured_goodput_tokens_per_s:float within_slo_share:float "
            "error:float"
        ),
        key=("variant", "streams"),
    ),
    TableSpec(
        "nccl_graph",
        "The graphs NCCL searched for the probe's communicator: pattern, channels, planned GB/s, path type.",
        _columns("pattern:int channels:int bw_gbs:float path_type:str nccl_version:str"),
    ),
    TableSpec(
        "p2p_matrix",
        "Per GPU pair: link, NUMA, peer access and copy latency/bandwidth.",
        _columns(
            "src:int dst:int link:str link_meaning:str same_numa:bool p2p_read:str p2p_write:str "
            "can_access_peer:bool copy_latency_us:float copy_bandwidth_gbs:float nccl_transport:str "
            "copy_correct:bool nvml_p2p_read:str nvml_p2p_write:str nvml_path:str"
        ),
    ),
    TableSpec(
        "p2p_host_settings",
        "Host settings that decide PCIe P2P (IOMMU, ACS...).",
        _columns("setting:str value:str source:str meaning:str"),
    ),
    TableSpec(
        "ceilings",
        "Copy bandwidth and matmul throughput of one GPU.",
        _columns(
            "copy_bytes:int copy_ms:float copy_bandwidth_gbs:float matmul_n:int matmul_ms:float matmul_tflops:float"
        ),
    ),
    TableSpec(
        "norm_fusion",
        "The add+RMSNorm kernel, unfused vs FlashInfer's fused kernel, by tokens.",
        _columns(
            "tokens:int hidden:int unfused_us:float fused_us:float saving_us:float rel_err_unfused:float "
            "rel_err_fused:float rel_err_fused_residual:float"
        ),
    ),
    TableSpec(
        "shard_compute",
        "One GPU's shard of the verify pass's compute by tokens, against its memory floor.",
        _columns(
            "tokens:int norm:str layers_measured:int experts_touched:int bytes_read_per_layer:float stack_ms:float "
            "layer_ms:float pass_ms_61_layers:float floor_layer_ms:float fraction_of_floor:float"
        ),
    ),
    TableSpec(
        "context_cells",
        "A real server's decoding with C streams of L tokens of distinct context: the step (plain) or verify cycle "
        "(speculative) time from the window in which every stream decodes.",
        _columns(
            "shape:str backend:str mode:str context:int streams:int kv_bytes_per_token:int "
            "draft_kv_bytes_per_token:int kv_pool_tokens:int window_s:float tokens_in_window:float "
            "verify_tokens:int accept_length:float step_ms:float cycle_ms:float server_start_s:float"
        ),
        key=("shape", "backend", "mode", "context", "streams"),
    ),
    TableSpec(
        "expert_counts",
        "SGLang's expert-distribution recorder, one row per target pass and MoE layer: tokens, distinct token ids "
        "and distinct experts the pass routed to.",
        _columns("mode:str streams:int forward_pass:int layer:int tokens:int distinct_tokens:int distinct_experts:int"),
        key=("mode", "streams", "forward_pass", "layer"),
    ),
    TableSpec(
        "verify_chains",
        "The token ids of each verified chain (one row per verify pass and stream), as the recorder saw them.",
        _columns("streams:int forward_pass:int stream:int chain_ids:json distinct_ids:int"),
        key=("streams", "forward_pass", "stream"),
    ),
    TableSpec(
        "verify_kernel_cells",
        "One attention layer's verify of an EAGLE-3 chain per kernel, shape, context and streams: its output against "
        "an fp32 reference at every draft position (worst relative error, unwritten elements, the verdict), then its "
        "median time where it passed.",
        _columns(
            "shape:str kernel:str context:int streams:int k:int verdict:str worst_rel_error:float unwritten:int "
            "tolerance:float ms:float repeats:int note:str"
        ),
        key=("shape", "kernel", "context", "streams"),
    ),
    TableSpec(
        "verify_kernel_prediction",
        "The model's per-kernel price of one layer's verify attention, committed before the run (predicted.csv).",
        _columns(
            "shape:str kernel:str context:int streams:int query_tokens:int q_heads:int kv_heads:int qk_dim:int "
            "v_dim:int predicted_low_ms:float predicted_high_ms:float model_kernel:str"
        ),
        key=("shape", "kernel", "context", "streams"),
    ),
    TableSpec(
        "engine_growth_prediction",
        "The model's growth of an EAGLE-3 cycle between two contexts per backend and target depth, committed before "
        "the run (predicted-engine.csv).",
        _columns(
            "shape:str layers:int backend:str mode:str streams:int context_low:int context_high:int "
            "growth_low_ms:float growth_high_ms:float kernel:str"
        ),
        key=("shape", "backend", "mode", "streams"),
    ),
    TableSpec(
        "context_prediction",
        "The model's prediction of attention's growth with context, committed before the run.",
        _columns(
            "shape:str mode:str kv_bytes_per_token:int draft_kv_bytes_per_token:int copy_gbs:float "
            "once_per_pass_us_per_1k:float once_per_token_us_per_1k:float model_prices:str bandwidth_source:str"
        ),
    ),
    TableSpec(
        "expert_prediction",
        "The model's prediction of distinct experts per pass, committed before the run.",
        _columns("mode:str streams:int tokens:int overlap:str overlap_value:float distinct_experts:float"),
    ),
    TableSpec(
        "sm120_build",
        "FlashInfer's fusion kernels built for SM120 (sass found, patch applied).",
        _columns("variant:str ok:bool seconds:float error:str sass:str patch:str"),
    ),
)
