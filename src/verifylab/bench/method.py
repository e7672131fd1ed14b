"""The single-stream method, the closed-loop concurrency sweep, and their tables (with resume)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifylab.bench.client import Client, RequestResult, accept_length, parse_spec_meta
from verifylab.bench.prompts import Prompt
from verifylab.errors import ParameterError
from verifylab.stats import DEFAULT_SLO, bootstrap_ci, median_interval, summarize
from verifylab.store.manifest import TABLE_NAME_PATTERN
from verifylab.store.runs import RunStore

Progress = Callable[[int, int], None]


@dataclass
class SingleStreamConfig:
    """The case study's method by default: 2 warm-ups, 5 runs x 2048 tokens, one stream, temperature 0."""

    runs: int = 5
    warmup: int = 2
    max_tokens: int = 2048


async def server_accept_length(client: Client) -> float | None:
    """``avg_spec_accept_length`` from /server_info (``/get_server_info`` on older versions)."""
    try:
        info = await client.get_json("/server_info", "/get_server_info")
    except Exception:  # an older server without the endpoint: the cross-check is just absent
        return None
    states = info.get("internal_states") or []
    values = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
    known = [float(v) for v in values if v is not None]
    return float(np.mean(known)) if known else None


async def single_stream(
    client: Client, cfg: SingleStreamConfig, prompts: list[Prompt], progress: Progress | None = None
) -> tuple[list[RequestResult], float | None]:
    """Warm-ups (discarded), then ``runs`` sequential requests; returns results and the server's accept length
    measured over exactly these runs (/flush_cache first)."""
    for i in range(cfg.warmup):
        warm = prompts[i % len(prompts)]
        await client.generate(warm.text, min(cfg.max_tokens, 128), "warmup", "warmup", input_ids=warm.input_ids)
    await client.post("/flush_cache")
    results = []
    for i in range(cfg.runs):
        p = prompts[i % len(prompts)]
        results.append(await client.generate(p.text, cfg.max_tokens, p.id, p.category, input_ids=p.input_ids))
        if progress:
            progress(i + 1, cfg.runs)
    return results, await server_accept_length(client)


async def sweep_cell(
    client: Client,
    concurrency: int,
    requests: int,
    max_tokens: int,
    prompts: list[Prompt],
    progress: Progress | None = None,
    stalled: Callable[[int, float], None] | None = None,
) -> tuple[list[RequestResult], float]:
    """Closed loop: ``concurrency`` requests in flight until ``requests`` have finished; returns them and wall s.
    The client is warmed first with as many connections as the cell holds (not timed, not recorded). ``stalled``:
    told, every quarter of the client's stall limit while any request waits that long for a token, how many wait
    and for how long (a line for the reader before the request fails)."""
    await client.warm(concurrency)
    counter = {"next": 0, "done": 0}
    results: list[RequestResult] = []

    async def worker() -> None:
        while counter["next"] < requests:
            i = counter["next"]
            counter["next"] += 1
            p = prompts[i % len(prompts)]
            results.append(await client.generate(p.text, max_tokens, p.id, p.category, input_ids=p.input_ids))
            counter["done"] += 1
            if progress:
                progress(counter["done"], requests)

    async def watch() -> None:
        every = client.stall_s / 4
        while True:
            await asyncio.sleep(every)
            waiting, longest = client.stalled(every)
            if waiting and stalled is not None:  # (mypy: the watcher runs only with one)
                stalled(waiting, longest)

    start = time.perf_counter()
    watcher = asyncio.create_task(watch()) if stalled is not None else None
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        if watcher is not None:
            watcher.cancel()
    return results, time.perf_counter() - start


def requests_frame(results: list[RequestResult], keep_ids: bool = False, **labels) -> pd.DataFrame:
    """Per-request rows (tidy), with the labels given (variant, concurrency, ...); ``keep_ids`` stores the
    output token ids (JSON) for the token-by-token comparison of greedy outputs."""
    rows = []
    for r in results:
        spec = parse_spec_meta(r.meta)
        itl = r.per_token_latency_s
        rows.append(
            {
                **labels,
                "prompt_id": r.prompt_id,
                "category": r.category,
                "ok": r.ok,
                "error": r.error,
                "prompt_tokens": r.prompt_tokens,
                "output_tokens": r.output_tokens,
                "ttft_s": r.ttft_s,
                "tpot_s": r.tpot_s,
                "e2e_s": r.e2e_s,
                "output_tokens_per_s": r.output_tokens_per_s,
                "chunks": len(r.chunk_times),
                "median_itl_s": float(np.median(itl)) if itl else None,
                "spec_verify_ct": spec.get("spec_verify_ct"),
                "output_digest": _digest(r),
                **({"output_ids": json.dumps(r.output_ids)} if keep_ids else {}),
            }
        )
    return pd.DataFrame(rows)


def _digest(r: RequestResult) -> str | None:
    if not r.ok:
        return None
    payload = json.dumps(r.output_ids) if r.output_ids is not None else r.text
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def single_stream_summary(results: list[RequestResult], server_accept: float | None) -> dict:
    """What `verifylab bench --json` prints."""
    ok = [r for r in results if r.ok]
    tput = [v for r in ok if (v := r.output_tokens_per_s) is not None]
    interval = median_interval(tput)  # of the median, with its true coverage (not 95 % below 6 runs)
    accept, notes = checked_accept_length(results, server_accept)
    return {
        "runs": [
            {
                "prompt_id": r.prompt_id,
                "category": r.category,
                "ok": r.ok,
                "error": r.error,
                "output_tokens": r.output_tokens,
                "output_tokens_per_s": r.output_tokens_per_s,
                "ttft_ms": r.ttft_s * 1e3 if r.ttft_s is not None else None,
                "tpot_ms": r.tpot_s * 1e3 if r.tpot_s is not None else None,
            }
            for r in results
        ],
        "median_output_tokens_per_s": float(np.median(tput)) if tput else None,
        "median_interval_output_tokens_per_s": list(interval[:2]) if interval else None,
        "interval_coverage": interval[2] if interval else None,
        "tpot_ms": summarize([r.tpot_s * 1e3 for r in ok if r.tpot_s is not None]),
        "accept_length": accept,
        "server_accept_length": server_accept,
        "failed": sum(not r.ok for r in results),
        "notes": notes,
    }


ACCEPT_AGREEMENT = 0.25  # the responses' accept length within 25 % of the server's running average


def checked_accept_length(results: list[RequestResult], server_accept: float | None) -> tuple[float | None, list[str]]:
    """The accept length from the responses' verify-pass counts, and what a reader must know about it: None when
    a count is impossible (below 1, or a pass per token or more) or when it disagrees with the server's own
    average (``/server_info``) by more than :data:`ACCEPT_AGREEMENT`."""
    counted = [parse_spec_meta(r.meta).get("spec_verify_ct") for r in results if r.ok]
    value = accept_length(results)
    if value is None and any(v is not None for v in counted):
        return None, [f"the server reported impossible verify-pass counts ({counted[:5]}): no accept length"]
    if value is not None and server_accept and abs(value - server_accept) > ACCEPT_AGREEMENT * server_accept:
        return None, [
            f"accept length {value:.2f} from the responses disagrees with the server's {server_accept:.2f} "
            "(/server_info): not stored"
        ]
    return value, []


def _median_ms(seconds: list[float | None]) -> float | None:
    """The median of the known values, in ms; None when none is known (a NaN would make ``--json`` invalid)."""
    known = [v for v in seconds if v is not None]
    return float(np.median(known)) * 1e3 if known else None


def cell_summary(
    results: list[RequestResult], wall_s: float, concurrency: int, slo: dict[str, float] | None = None
) -> dict:
    """One sweep cell: aggregate throughput, latency statistics, accept length, goodput under the SLOs
    (TTFT and TPOT), and tokens/s per user (for the Pareto view against tokens/s per GPU)."""
    slo = slo or DEFAULT_SLO
    ok = [r for r in results if r.ok]
    good = [r for r in ok if r.ttft_s is not None and r.ttft_s <= slo["ttft_s"] and (r.tpot_s or 0) <= slo["tpot_s"]]
    itl = [x for r in ok for x in r.per_token_latency_s]
    per_req = [v for r in ok if (v := r.output_tokens_per_s) is not None]
    ci = bootstrap_ci(per_req, stat=np.mean)
    return {
        "concurrency": concurrency,
        # fewer requests than streams: only that many were ever in flight (C=16 with 2 requests is 2 streams)
        "effective_concurrency": min(concurrency, len(results)),
        "requests": len(results),
        "failed": len(results) - len(ok),
        "wall_s": wall_s,
        "output_tokens_per_s": sum(r.output_tokens for r in ok) / wall_s if wall_s else None,
        "per_request_tokens_per_s_ci95": list(ci) if ci else None,  # a 95 % bootstrap of the mean: the name is true
        "median_itl_ms": float(np.median(itl)) * 1e3 if itl else None,
        "p90_itl_ms": float(np.percentile(itl, 90)) * 1e3 if itl else None,
        "p99_itl_ms": float(np.percentile(itl, 99)) * 1e3 if itl else None,
        "median_ttft_ms": _median_ms([r.ttft_s for r in ok]),
        "median_tpot_ms": _median_ms([r.tpot_s for r in ok if r.tpot_s]),  # None, never NaN, when none has one
        "accept_length": accept_length(results),
        "tokens_per_s_per_user": float(np.median(per_req)) if per_req else None,
        "goodput_tokens_per_s": sum(r.output_tokens for r in good) / wall_s if wall_s else None,
        "slo_ttft_s": slo["ttft_s"],
        "slo_tpot_s": slo["tpot_s"],
        "errors": sorted({r.error for r in results if r.error}),
    }


class BenchRecorder:
    """Writes benchmark tables into one run as they finish; knows which sweep cells are already stored."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    def measuring(self) -> contextlib.AbstractContextManager[None]:
        """The run's measuring lock (another process measuring into it is refused)."""
        return self.store.measuring(self.run_id)

    @staticmethod
    def cell_table(variant: str, concurrency: int) -> str:
        return f"sweep-{variant}-c{concurrency}"

    @classmethod
    def check_names(cls, variant: str, concurrency: list[int] | None = None) -> None:
        """Before anything is measured: every table this variant would write has a valid name, never truncated
        (a cut name let C=2 overwrite C=1). A :class:`ParameterError` names the variant otherwise."""
        names = [f"single-{variant}"] + [cls.cell_table(variant, c) for c in concurrency or []]
        bad = [n for n in names if not re.fullmatch(TABLE_NAME_PATTERN, n)]
        if bad:
            raise ParameterError(
                f"variant {variant!r}: it would store tables named {bad[0]!r}, which must match "
                f"{TABLE_NAME_PATTERN} (lower case, digits, _ and -, at most 64 characters)"
            )

    def has_cell(self, variant: str, concurrency: int) -> bool:
        """A cell is stored when its summary row is, without failed requests: the row is written last, so a cell
        whose requests table was written but not its row (a crash between the two) is measured again on resume,
        and so is a cell whose requests failed (its row keeps the errors until then)."""
        cells = self.store.table_or_none(self.run_id, "sweep_cells")
        if cells is None or self.cell_table(variant, concurrency) not in self.store.manifest(self.run_id).tables:
            return False
        same = (cells["variant"] == variant) & (cells["concurrency"] == concurrency)
        ok = cells["failed"].fillna(0) == 0 if "failed" in cells else True
        return bool((same & ok).any())

    def save_cell(self, variant: str, concurrency: int, results: list[RequestResult], summary: dict) -> None:
        """The requests table, then the summary row (the commit point), under the run's lock."""
        frame = requests_frame(results, variant=variant, concurrency=concurrency)
        row = {"variant": variant, **{k: (json.dumps(v) if isinstance(v, list) else v) for k, v in summary.items()}}
        with self.store.lock(self.run_id):
            self.store.write_table(self.run_id, self.cell_table(variant, concurrency), frame)
            self.store.upsert_rows(self.run_id, "sweep_cells", pd.DataFrame([row]))

    def save_single(self, variant: str, results: list[RequestResult], summary: dict) -> None:
        self.store.write_table(
            self.run_id, f"single-{variant}", requests_frame(results, keep_ids=True, variant=variant)
        )
        self.store.upsert_rows(
            self.run_id,
            "single_stream",
            pd.DataFrame(
                [
                    {
                        "variant": variant,
                        "median_output_tokens_per_s": summary["median_output_tokens_per_s"],
                        "interval_low": (summary["median_interval_output_tokens_per_s"] or [None, None])[0],
                        "interval_high": (summary["median_interval_output_tokens_per_s"] or [None, None])[1],
                        "interval_coverage": summary.get("interval_coverage"),
                        "accept_length": summary["accept_length"],
                        "server_accept_length": summary["server_accept_length"],
                        "runs": len(summary["runs"]),
                        "failed": summary["failed"],
                    }
                ]
            ),
        )
