"""Measured all-reduce latency curves, one curve type whatever their source (a stored run, a reader's file, public
rows), read and checked once; and the measured norm kernel and in-pass factors read beside them."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from verifylab.derived import derived
from verifylab.errors import ModelInputError
from verifylab.intake import OutsideFileError, read_outside_text
from verifylab.sources import MeasuredRuns
from verifylab.vocab import (
    COMM_CAMPAIGN_TABLES,
    KIMI_K2_ALLREDUCES_PER_PASS,
    KIMI_K2_HIDDEN,
    Regime,
    allreduce_message_bytes,
)

CURVE_COLUMNS = {"path", "impl", "tokens", "us"}


@dataclass(frozen=True)
class Curve:
    """One collective's per-call latency (µs) by message size (bytes), sorted, and where it was measured: ``source``
    names a stored run, a reader's file or public rows (``public_rows``: their ids), ``path`` and ``impl`` the
    transport and implementation. Between its sizes it is log-log interpolated; beyond them :meth:`at` extends its
    end segments, while :meth:`priced_at` holds its smallest size's latency below and grows by a bandwidth term above
    (how a regime prices a message no source measured)."""

    source: str
    message_bytes: tuple[float, ...]
    us: tuple[float, ...]
    path: str = ""
    impl: str = "nccl"
    public_rows: tuple[str, ...] = ()

    def at(self, message_bytes: float) -> float:
        """Latency at ``message_bytes`` (log-log interpolation)."""
        return loglog_interpolate(self.message_bytes, self.us, message_bytes)

    def priced_at(self, message: float, slope_us_per_byte: float) -> float:
        """Latency at ``message``: the floor of the smallest size below it, ``slope_us_per_byte`` past the largest."""
        xs, ys = self.message_bytes, self.us
        if message <= xs[0]:
            return ys[0]  # below the smallest size measured: the latency floor of that size
        if message >= xs[-1]:
            return ys[-1] + (message - xs[-1]) * slope_us_per_byte
        return loglog_interpolate(xs, ys, message)


def loglog_interpolate(xs: tuple[float, ...], ys: tuple[float, ...], x: float) -> float:
    """``y(x)`` on the log-log line through the sorted points; the end segments' slope outside their range."""
    if len(xs) == 1:
        return ys[0]
    i = next((j for j in range(1, len(xs)) if xs[j] >= x), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))


PLAUSIBLE_US = (0.5, 1e6)  # no all-reduce, even on one GPU in a graph, takes under 0.5 µs; none over a second


def checked_row(size: float, us: float, where: str) -> tuple[float, float]:
    """One curve point, or one line naming the row: a size > 0 and a finite time in microseconds within
    :data:`PLAUSIBLE_US` (a time under it is most likely milliseconds in a µs column)."""
    if not (math.isfinite(size) and size > 0):
        raise ModelInputError(f"{where}: message of {size!r} bytes (from its tokens): must be a number > 0")
    if not math.isfinite(us) or us <= 0:
        raise ModelInputError(f"{where}: us = {us!r}: a latency is a finite number of microseconds > 0")
    low, high = PLAUSIBLE_US
    if not low <= us <= high:
        hint = " (is this column in milliseconds?)" if us < low else " (is this column in nanoseconds?)"
        raise ModelInputError(f"{where}: us = {us!r}: outside {low:g}..{high:g} µs, what an all-reduce takes{hint}")
    return size, us


MIN_CURVE_SIZES = 3  # a curve a reader gives: enough sizes to tell a latency floor from a bandwidth slope


NOISE = 0.25  # a larger message may time this much faster than a smaller one (run-to-run noise), no more


def _curve(path: str, impl: str, pairs: list[tuple[float, float]], source: str, given: bool = False) -> Curve:
    """One curve from its points; ``given`` (a reader's file): at least :data:`MIN_CURVE_SIZES` sizes, each once,
    and no larger message much faster than a smaller one (a unit or a column mixed up)."""
    by_size: dict[float, list[float]] = {}
    for size, us in pairs:
        by_size.setdefault(size, []).append(us)
    if not by_size:
        raise ModelInputError(f"{source}: no ({path}, {impl}) latency rows")
    sizes = sorted(by_size)
    if given:
        twice = [s for s in sizes if len(by_size[s]) > 1]
        if twice:
            raise ModelInputError(f"{source}: ({path}, {impl}) times {twice[0]:g} bytes twice: one row per size")
        if len(sizes) < MIN_CURVE_SIZES:
            raise ModelInputError(
                f"{source}: ({path}, {impl}) has {len(sizes)} size(s); a curve needs at least {MIN_CURVE_SIZES}"
            )
        for (s0, small), (s1, large) in zip(
            ((s, by_size[s][0]) for s in sizes), ((s, by_size[s][0]) for s in sizes[1:]), strict=False
        ):
            if large < small * (1 - NOISE):
                raise ModelInputError(
                    f"{source}: ({path}, {impl}) {s1:g} bytes take {large:g} µs, less than {s0:g} bytes' {small:g} µs: "
                    "latency grows with the message (are two columns or units mixed up?)"
                )
    return Curve(source, tuple(sizes), tuple(min(by_size[s]) for s in sizes), path, impl)


def curves_from_frame(
    frame: pd.DataFrame, source: str, hidden: int = KIMI_K2_HIDDEN, stored: bool = False
) -> list[Curve]:
    """Curves from rows ``path, impl, tokens, us`` (a run's ``allreduce_latency`` table or a user's CSV). Every row
    of a user's file is a point or the file is refused naming the row; a stored run's empty ``us`` cells are the
    paths it did not time (its note says why) and are left out."""
    missing = CURVE_COLUMNS - set(frame.columns)
    if missing:
        raise ModelInputError(f"{source}: latency table lacks column(s) {', '.join(sorted(missing))}")
    frame = frame.reset_index(drop=True)
    frame["us"] = pd.to_numeric(frame["us"], errors="coerce")
    frame["tokens"] = pd.to_numeric(frame["tokens"], errors="coerce")
    if not stored:
        blank = frame[frame[["us", "tokens"]].isna().any(axis=1)]
        if not blank.empty:
            row = int(blank.index[0]) + 2  # the header is line 1
            raise ModelInputError(f"{source}: line {row}: tokens and us must both be numbers")
        other = frame[~frame["impl"].isin(["nccl", "fused"])]
        if not other.empty:
            row = int(other.index[0]) + 2
            raise ModelInputError(f"{source}: line {row}: impl {str(other['impl'].iloc[0])[:20]!r}: nccl or fused")
    rows = frame.dropna(subset=["us"])
    if "settings" in rows.columns:  # a forced strategy is not how SGLang runs the fused kernel
        rows = rows[~rows["settings"].astype(str).str.contains("forced|two-shot", case=False)]
    if "mode" in rows.columns:  # a probe's table: SGLang replays its passes in CUDA graphs
        rows = rows[rows["mode"] == "graph"]
    if "group" in rows.columns:  # ... and all-reduces across every rank, not a pair or a half
        rows = rows[rows["group"] == "all"]
    rows = rows[rows["impl"].isin(["nccl", "fused"])]
    if rows.empty:
        raise ModelInputError(f"{source}: no NCCL or fused all-reduce rows (impl 'nccl' or 'fused') to build a curve")
    curves = []
    for (path, impl), group in rows.groupby(["path", "impl"]):
        # a stored run timed real messages: its bytes column, never tokens re-read at another model's hidden size
        sizes = (
            group["bytes"]
            if stored and "bytes" in group
            else [allreduce_message_bytes(t, hidden) for t in group["tokens"]]
        )
        pairs = [
            checked_row(float(size), u, f"{source}: line {i + 2}")
            for i, size, u in zip(group.index, sizes, group["us"], strict=True)
        ]
        curves.append(_curve(str(path), str(impl), pairs, source, given=not stored))
    return curves


def parse_nccl_tests(text: str, path: str, source: str) -> Curve:
    """nccl-tests' ``all_reduce_perf`` stdout: '#' lines are headers; each data row is size (B), count, type,
    redop, root, then the out-of-place time (µs), algbw, busbw, #wrong, then the in-place columns."""
    pairs = []
    for n, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or line.lstrip().startswith("#"):
            continue
        try:
            size, us = float(fields[0]), float(fields[5])
        except (ValueError, IndexError):
            raise ModelInputError(f"{source}:{n}: not an all_reduce_perf data row") from None
        pairs.append(checked_row(size, us, f"{source}:{n}"))
    return _curve(path, "nccl", pairs, source, given=True)


def load_curves(
    latency: str, runs: MeasuredRuns | None, path: str | None = None, hidden: int = KIMI_K2_HIDDEN
) -> list[Curve]:
    """Curves from a file (a CSV ``path, impl, tokens, us`` or an nccl-tests output), decided by what exists: a
    file path (absolute or relative) is read as a file, never validated as a run name; otherwise a stored run id."""
    file = Path(latency)
    if file.exists():
        curves = _curves_from_file(file, path, hidden)
    elif runs is not None and runs.exists(latency):
        curves = list(stored_curves(runs, latency, hidden))
    else:
        where = f"no run of that name in {runs.where}" if runs is not None else "no runs given"
        raise ModelInputError(f"--latency {latency}: neither a file nor a stored run id ({where})")
    if path is not None and not any(c.path == path for c in curves):
        have = ", ".join(sorted({c.path for c in curves}))
        raise ModelInputError(f"--path {path!r}: --latency {latency} has no curve on that path (its paths: {have})")
    return curves


@derived
def stored_curves(runs: MeasuredRuns, run_id: str, hidden: int) -> tuple[Curve, ...]:
    """A stored run's curves at a model's ``hidden`` size (read and built once per set of runs)."""
    table = runs.table_or_none(run_id, "allreduce_latency")
    if table is None:
        raise ModelInputError(f"run {run_id} has no allreduce_latency table")
    return tuple(curves_from_frame(table, f"run {run_id}", hidden, stored=True))


def _curves_from_file(file: Path, path: str | None, hidden: int) -> list[Curve]:
    try:
        text = read_outside_text(file, "curve")
    except OutsideFileError as exc:
        raise ModelInputError(str(exc)) from None
    header = next((line for line in text.splitlines() if line.strip()), "")
    if {c.strip() for c in header.split(",")} >= CURVE_COLUMNS:
        try:
            frame = pd.read_csv(io.StringIO(text))
        except (ValueError, pd.errors.ParserError) as exc:
            raise ModelInputError(f"{file}: not a CSV curve ({' '.join(str(exc).split())[:120]})") from None
        return curves_from_frame(frame, str(file), hidden)
    if "," in header and not header.lstrip().startswith("#"):  # a CSV, not nccl-tests' output (its lines open "#")
        columns = ", ".join(c.strip() for c in header.split(",") if c.strip())[:200]
        raise ModelInputError(f"{file}: a CSV curve needs the columns path, impl, tokens, us (it has {columns})")
    if path is None:
        raise ModelInputError(f"{file}: an nccl-tests output holds one curve: name its path with --path")
    return [parse_nccl_tests(text, path, str(file))]


@dataclass(frozen=True)
class NormRead:
    """The newest measured norm kernel (FlashInfer's fused add+RMSNorm, the one SGLang's unfused path runs): its µs by
    tokens, and the run."""

    run_id: str
    tokens: tuple[float, ...]
    us: tuple[float, ...]

    def at(self, tokens: float) -> float:
        return loglog_interpolate(self.tokens, self.us, tokens)

    @property
    def source(self) -> str:
        return f"measured: run {self.run_id} (FlashInfer fused add+RMSNorm)"


def norm_read(runs: MeasuredRuns) -> NormRead | None:
    """The newest run's norm kernel (None: no run measured it)."""
    run_id = runs.newest_with("norm_fusion")
    if run_id is None:
        return None
    table = runs.read_table(run_id, "norm_fusion").sort_values("tokens")
    return NormRead(run_id, tuple(float(x) for x in table["tokens"]), tuple(float(y) for y in table["fused_us"]))


def norm_us_measured(runs: MeasuredRuns, tokens: float) -> tuple[float, str] | None:
    """The measured norm kernel at ``tokens``, and its source (None: no run measured it)."""
    read = norm_read(runs)
    return None if read is None else (read.at(tokens), read.source)


def in_pass_factors(runs: MeasuredRuns, run_id: str | None = None) -> dict[tuple[str, str], float]:
    """How much one all-reduce costs inside a synthetic pass over its isolated latency, per (path, impl), from the
    campaign's traces (comm time per all-reduce at the traced token count / the isolated curve there)."""
    return dict(_in_pass_factors(runs, run_id))


@derived
def _in_pass_factors(runs: MeasuredRuns, run_id: str | None) -> dict[tuple[str, str], float]:
    run_id = run_id or runs.newest_with(*COMM_CAMPAIGN_TABLES, "verify_pass_trace")
    if run_id is None:
        return {}
    trace = runs.read_table(run_id, "verify_pass_trace")
    lat = runs.read_table(run_id, "allreduce_latency")
    factors = {}
    for (path, variant, tokens), group in trace.groupby(["path", "variant", "tokens"]):
        if variant not in ("nccl", "fused") or (group["allreduce_count"] != KIMI_K2_ALLREDUCES_PER_PASS).any():
            continue  # a trace that did not see every all-reduce (the socket path's) gives no factor
        per_call = float((group["comm_us"] / group["allreduce_count"]).median())
        iso = lat[(lat["path"] == path) & (lat["impl"] == variant) & (lat["tokens"] == tokens)]
        if "settings" in iso.columns:
            iso = iso[~iso["settings"].astype(str).str.contains("forced", case=False)]
        if not iso.empty:
            factors[(str(path), str(variant))] = per_call / float(iso["us"].iloc[0])
    return factors


def monotone(us: list[float]) -> tuple[float, ...]:
    """A latency curve that never falls as the message grows: a point above a larger size's latency (an isolated
    spike, such as one source's own flagged outlier) is lowered to it."""
    out, lowest = [], math.inf
    for value in reversed(us):
        lowest = min(lowest, float(value))
        out.append(lowest)
    return tuple(reversed(out))


@dataclass(frozen=True)
class BoxProbe:
    """The reader's own box at the case study's TP size (a stored probe, or a curve file): its curves price the
    options; what it did not measure is priced in its regime, when its verdict gives one."""

    source: str  # "run <id>" or "file <path>"
    label: str
    regime: Regime  # the probe's verdict; UNKNOWN for a curve file (no verdict)
    nccl: Curve
    fused: Curve | None
