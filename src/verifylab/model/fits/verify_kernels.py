"""The serial verify kernel's rate, fitted on the stored engine runs (``benchmarks/engine_reads``: SGLang 0.5.17, one
H200, Triton attention, EAGLE-3 with the accept length held): on the MLA target's cycle growth between its two
shortest contexts up to :data:`FIT_CONTEXT_MAX` (per 1,000 tokens, per layer, per element of a token's key and value
rows; the range over 1 and 4 streams) and on how much more 16 streams cost (the programs one SM runs at once). Every
cell beyond it, and every cell of the dense target, is held out and predicted beside what was measured."""

from __future__ import annotations

import pandas as pd

from verifylab.model.inputs.engine_cells import EngineCells
from verifylab.model.inputs.gpus import GPU_TABLE
from verifylab.model.inputs.stored import StoredRuns
from verifylab.model.pricing.verify_kernels import AttentionShape, SerialRate, attention_shape, waves
from verifylab.span import Span

FIT_CONTEXT_MAX = 16384  # fitted on cells up to this context; longer ones are predicted
FIT_SHAPE = "mla"
MEASURED_ON = "h200"


def _spec_cells(engine: EngineCells) -> pd.DataFrame:
    cells = engine.cells
    if cells.empty:
        return cells
    return cells[(cells["backend"] == "triton") & (cells["mode"] == "eagle3") & (cells["gpu"] == MEASURED_ON)].copy()


def serial_rate(engine: EngineCells) -> tuple[SerialRate, dict[str, AttentionShape], dict[str, int]] | None:
    """The fitted rate, each stored target's attention shape (TP 1) and layer count; None without the cells."""
    cells = _spec_cells(engine)
    if cells.empty:
        return None
    configs = {shape: engine.configs[shape] for shape in sorted(cells["shape"].unique()) if shape in engine.configs}
    shapes = {name: attention_shape(config, 1) for name, config in configs.items()}
    layers = {name: int(config["num_hidden_layers"]) for name, config in configs.items()}
    mine = cells[(cells["shape"] == FIT_SHAPE) & (cells["context"] <= FIT_CONTEXT_MAX)]
    contexts = sorted(mine["context"].unique())
    if len(contexts) < 2 or FIT_SHAPE not in shapes:
        return None
    low, high = contexts[0], contexts[-1]
    cycle = mine.set_index(["context", "streams"])["cycle_ms"]

    def growth(streams: int) -> float:
        return float(cycle[(high, streams)] - cycle[(low, streams)]) / ((high - low) / 1000)

    shape, depth = shapes[FIT_SHAPE], layers[FIT_SHAPE]
    rates = [growth(s) / depth / shape.row_elements for s in (1, 4) if (high, s) in cycle.index]
    sms = GPU_TABLE[MEASURED_ON].sms
    per_sm = 1.0
    if (high, 16) in cycle.index and (high, 1) in cycle.index:
        ratio = growth(16) / growth(1)
        per_sm = 16 * shape.q_heads / (sms * ratio) if ratio > 1 else 16 * shape.q_heads / sms
    source = (
        f"fitted on {', '.join(sorted(mine['run'].unique()))}: the {FIT_SHAPE.upper()} target's EAGLE-3 cycle growth "
        f"between {low:,} and {high:,} tokens at 1 and 4 streams (per layer and key+value element), 16 streams for "
        f"the programs an SM runs at once; measured on one H200 (SM90), SGLang 0.5.17"
    )
    return SerialRate(Span(min(rates), max(rates)), per_sm, MEASURED_ON, source), shapes, layers


KERNEL_CELLS = "verify_kernel_cells"
KERNEL_PREDICTION = "verify_kernel_prediction"
KERNEL_FIT_SHAPES = ("mla16", "dense")  # two row widths: the per-token and per-element costs
# The shapes the kernel runs measured (benchmarks/verify_kernels/predict.py): heads on one GPU and key+value row width
KERNEL_SHAPES = {
    "mla16": AttentionShape(True, 16, 1, 576, 512, 1152.0),
    "mla8-kimi": AttentionShape(True, 8, 1, 576, 512, 1152.0),
    "dense": AttentionShape(False, 32, 8, 128, 128, 4096.0),
}


def kernel_cells(runs: StoredRuns) -> pd.DataFrame:
    """Every stored verify-kernel cell beside the prediction its run stores, with its run and GPU."""
    predictions = {t.run_id: t.frame for t in runs.run_tables(KERNEL_PREDICTION)}
    frames = []
    for stored in runs.run_tables(KERNEL_CELLS):
        cells, predicted = stored.frame, predictions.get(stored.run_id)
        if predicted is not None:
            cells = cells.merge(
                predicted[["shape", "kernel", "context", "streams", "predicted_low_ms", "predicted_high_ms"]],
                on=["shape", "kernel", "context", "streams"],
                how="left",
            )
        frames.append(cells.assign(run=stored.run_id, gpu=stored.gpu))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def serial_kernel_fit(runs: StoredRuns) -> tuple[SerialRate, pd.DataFrame] | None:
    """The serial kernel refitted on the stored kernel cells: one program's cost per 1,000 tokens as a fixed part plus
    a part per key+value element, from the growth between the two shortest contexts up to :data:`FIT_CONTEXT_MAX` of
    two shapes of different widths at one stream, and the programs an SM runs at once from the wider-headed shape at 16
    streams; every other cell (longer contexts, 4 streams, the third shape) held out. Returns the rate and each cell
    predicted (from the cell's own shortest context) beside what was measured."""
    cells = kernel_cells(runs)
    if cells.empty:
        return None
    serial = cells[(cells["kernel"] == "serial") & (cells["verdict"] == "pass")]
    gpu = str(serial["gpu"].iloc[0]) if not serial.empty else ""
    serial = serial[serial["gpu"] == gpu]
    short = serial[serial["context"] <= FIT_CONTEXT_MAX]
    contexts = sorted(short["context"].unique())
    if len(contexts) < 2 or not set(KERNEL_FIT_SHAPES) <= set(serial["shape"]):
        return None
    low, high = contexts[0], contexts[-1]
    at = serial.set_index(["shape", "context", "streams"])["ms"]

    def per_1k(shape: str, streams: int) -> float:
        return float(at[(shape, high, streams)] - at[(shape, low, streams)]) / ((high - low) / 1000)

    wide, narrow = (KERNEL_SHAPES[s] for s in KERNEL_FIT_SHAPES)
    per_element = (per_1k(KERNEL_FIT_SHAPES[0], 1) - per_1k(KERNEL_FIT_SHAPES[1], 1)) / (
        wide.row_elements - narrow.row_elements
    )
    fixed = per_1k(KERNEL_FIT_SHAPES[1], 1) - per_element * narrow.row_elements
    sms = GPU_TABLE[gpu].sms if gpu in GPU_TABLE else 132
    ratio = per_1k(KERNEL_FIT_SHAPES[1], 16) / per_1k(KERNEL_FIT_SHAPES[1], 1)
    per_sm = 16 * narrow.q_heads / (sms * ratio) if ratio > 1 else 16 * narrow.q_heads / sms
    runs_used = ", ".join(sorted(serial["run"].unique()))
    rate = SerialRate(
        Span(per_element, per_element),
        per_sm,
        gpu,
        f"refitted on {runs_used}: the serial kernel's growth between {low:,} and {high:,} tokens of the "
        f"{' and '.join(KERNEL_FIT_SHAPES)} layers at 1 stream, and of {KERNEL_FIT_SHAPES[1]} at 16 streams",
        ms_per_1k_fixed=fixed,
    )
    fitted = {(s, c, n) for s in KERNEL_FIT_SHAPES for c in (low, high) for n in (1,)} | {
        (KERNEL_FIT_SHAPES[1], c, 16) for c in (low, high)
    }
    rows = []
    for cell in serial.itertuples():
        shape = KERNEL_SHAPES.get(str(cell.shape))
        if shape is None or (cell.shape, low, cell.streams) not in at.index:
            continue
        base = float(at[(cell.shape, low, cell.streams)])
        loop = rate.ms_per_1k(shape)
        added = (cell.context - low) / 1000 * waves(cell.streams * shape.q_heads, sms, per_sm)
        predicted = base + loop.low * added
        rows.append(
            {
                "shape": cell.shape,
                "streams": int(cell.streams),
                "context": int(cell.context),
                "measured_ms": float(cell.ms),
                "predicted_ms": predicted,
                "miss": predicted / float(cell.ms) - 1,
                "fitted": (cell.shape, cell.context, cell.streams) in fitted or cell.context == low,
                "run": cell.run,
            }
        )
    return rate, pd.DataFrame(rows)
