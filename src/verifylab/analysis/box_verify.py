"""A `verifylab box --verify` run read back: per configuration measured and stream count, the model's prediction (kept
in the run's parameters before anything ran) beside the measurement, the prediction's error, and which configuration
won at the owner's load. The measured answer wins: where it differs from the model's choice the verdict says so."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from verifylab.errors import ModelInputError
from verifylab.model.answers.box_plan import COLLECTIVE_NAMES
from verifylab.model.views import check_grid_fit, gains, stored_runs
from verifylab.sources import MeasuredRuns
from verifylab.vocab import BOX_VERIFY_POINTS_TABLE, Drafter, streams_words

POINTS = BOX_VERIFY_POINTS_TABLE


def verify_runs(runs: MeasuredRuns) -> list[str]:
    """Runs that hold a box check, oldest first."""
    return sorted(runs.runs_with_table(POINTS))


def _miss(measured: float, low: float, high: float) -> float:
    """How far ``measured`` lies outside [low, high], relative to the nearer end (0 inside; NaN: nothing measured)."""
    if not np.isfinite(measured):
        return float("nan")
    if measured < low:
        return (measured - low) / low if low else float("-inf")
    if measured > high:
        return (measured - high) / high if high else float("inf")
    return 0.0


def compare(runs: MeasuredRuns, run_id: str) -> pd.DataFrame:
    """One row per configuration and stream count: predicted (low, high) beside measured tok/s (decode phase, all
    running streams), time per output token and to first token (medians), goodput under the plan's SLO, the share
    of requests within it, and the error of the predicted tok/s (0 inside the range)."""
    plan = runs.run(run_id).parameters.get("box_plan")
    if not isinstance(plan, dict) or not isinstance(plan.get("configs"), list):
        raise ModelInputError(f"run {run_id}: no box plan in its parameters (not a `verifylab box --verify` run)")
    ttft_limit, tpot_limit = float(plan["slo_ttft_ms"]) / 1e3, float(plan["slo_tpot_ms"]) / 1e3
    tables = runs.run(run_id).tables
    rows = []
    for config in plan["configs"]:
        for cell in config["cells"]:
            c = int(cell["streams"])
            name = f"sweep-{config['variant']}-c{c}"
            part = runs.read_table(run_id, name) if name in tables else pd.DataFrame()
            if not part.empty:
                part = part[part["ok"].astype(bool) & part["tpot_s"].notna()]
            running = min(c, int(config["max_running"]))
            if part.empty:
                measured = dict.fromkeys(("tps", "tpot", "ttft", "good", "share"), float("nan"))
            else:
                within = (part["ttft_s"] <= ttft_limit) & (part["tpot_s"] <= tpot_limit)
                tps = running / float(part["tpot_s"].mean())
                share = float(within.mean())
                tokens = part["output_tokens"].sum()
                good = tps * float(part.loc[within, "output_tokens"].sum()) / tokens if tokens else 0.0
                measured = {
                    "tps": tps,
                    "tpot": float(part["tpot_s"].median()) * 1e3,
                    "ttft": float(part["ttft_s"].median()) * 1e3,
                    "good": good,
                    "share": share,
                }
            (tl, th), (pl, ph), (fl, fh), (gl, gh) = (
                cell["tokens_per_s"],
                cell["tpot_ms"],
                cell["ttft_ms"],
                cell["goodput_tokens_per_s"],
            )
            rows.append(
                {
                    "role": config["role"],
                    "variant": config["variant"],
                    "configuration": config["configuration"],
                    "streams": c,
                    "predicted_tokens_per_s_low": tl,
                    "predicted_tokens_per_s_high": th,
                    "measured_tokens_per_s": measured["tps"],
                    "predicted_tpot_ms_low": pl,
                    "predicted_tpot_ms_high": ph,
                    "measured_tpot_ms": measured["tpot"],
                    "predicted_ttft_ms_low": fl,
                    "predicted_ttft_ms_high": fh,
                    "measured_ttft_ms": measured["ttft"],
                    "predicted_goodput_tokens_per_s_low": gl,
                    "predicted_goodput_tokens_per_s_high": gh,
                    "measured_goodput_tokens_per_s": measured["good"],
                    "within_slo_share": measured["share"],
                    "error": _miss(measured["tps"], tl, th),
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class VerifyVerdict:
    """Which configuration served the most goodput at the owner's load, measured, against the model's choice."""

    run_id: str
    load: int
    chosen: str
    runner_up: str
    winner: str  # measured
    chosen_goodput: float
    runner_up_goodput: float
    winner_goodput: float
    model_right: bool
    median_error: float  # of the predicted tok/s, over the measured cells (0: inside the range)
    measured_cells: int
    planned_cells: int


def verdict(runs: MeasuredRuns, run_id: str, table: pd.DataFrame | None = None) -> VerifyVerdict:
    """The measured winner at the plan's load and whether the model chose it (a tie within 2 % counts as right)."""
    table = compare(runs, run_id) if table is None else table
    load = int(runs.run(run_id).parameters["box_plan"]["load"])
    at = table[table["streams"] == load].set_index("role")
    if at.empty:
        raise ModelInputError(f"run {run_id}: nothing planned at its own load")
    good = at["measured_goodput_tokens_per_s"].fillna(-1.0)
    winner_role = str(good.idxmax())
    chosen, runner = at.loc["chosen"], at.loc["runner-up"] if "runner-up" in at.index else at.loc["plain"]
    best = float(good.max())
    right = winner_role == "chosen" or float(chosen["measured_goodput_tokens_per_s"]) >= 0.98 * best
    measured = table.dropna(subset=["measured_tokens_per_s"])
    return VerifyVerdict(
        run_id,
        load,
        str(chosen["configuration"]),
        str(runner["configuration"]),
        str(at.loc[winner_role, "configuration"]),
        float(chosen["measured_goodput_tokens_per_s"]),
        float(runner["measured_goodput_tokens_per_s"]),
        best,
        bool(right),
        float(measured["error"].abs().median()) if not measured.empty else float("nan"),
        len(measured),
        len(table),
    )


def checked(runs: MeasuredRuns) -> pd.DataFrame:
    """Every stored box check, per configuration and stream count: the plan's prediction (made before the run),
    the measurement and the prediction's error; and, where a spread-forced grid of the same served model was
    fitted, that refit's prediction beside it (out of sample: the check never enters a fit)."""
    frames = []
    for run_id in verify_runs(runs):
        table = runs.table_or_none(run_id, "box_verify")
        table = compare(runs, run_id) if table is None or table.empty else table
        refit = _refit(runs, run_id, table)
        frames.append(table.assign(run=run_id, **refit, provenance="measured, modelled"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _refit(runs: MeasuredRuns, run_id: str, table: pd.DataFrame) -> dict[str, list[float]]:
    """The check's box refitted on its own grid (the rule that prices its plans: ``check_grid_fit``), priced at each
    cell (NaN: no grid of that box is stored)."""
    plan = runs.run(run_id).parameters["box_plan"]
    fit = check_grid_fit(stored_runs(runs), run_id)
    low, high = [], []
    configs = {c["variant"]: c for c in plan["configs"]}
    for r in table.itertuples():
        config = configs[r.variant]
        if fit is None or (config["drafter"] != "none" and Drafter(config["drafter"]) not in fit.overheads.cycle):
            low.append(float("nan"))
            high.append(float("nan"))
            continue
        running = min(int(r.streams), int(config["max_running"]))
        if config["drafter"] == "none":
            row = gains(fit.box, fit.overheads, Drafter.EAGLE3, 1.0, 2, [running])[0]
            rate = row.plain_tokens_per_s
        else:
            k, a = int(config["draft_tokens"]), float(config["accept"])
            rate = gains(fit.box, fit.overheads, Drafter(config["drafter"]), min(a, k), k, [running])[
                0
            ].spec_tokens_per_s
        low.append(rate.low)
        high.append(rate.high)
    errors = [_miss(m, lo, hi) for m, lo, hi in zip(table["measured_tokens_per_s"], low, high, strict=True)]
    return {"refit_tokens_per_s_low": low, "refit_tokens_per_s_high": high, "refit_error": errors}


def _range(low: float, high: float) -> str:
    """A predicted range as the page shows it: ``1959-2311``, or empty where nothing was predicted."""
    return "" if not (np.isfinite(low) and np.isfinite(high)) else f"{low:.0f}-{high:.0f}"


def cells_view(table: pd.DataFrame) -> pd.DataFrame:
    """A check's cells as a page shows them: per configuration and stream count, the plan's tok/s (made before the
    run) beside the measurement and the miss, then the measured serving numbers under the SLO."""
    if table.empty:
        return table
    ranges = zip(table["predicted_tokens_per_s_low"], table["predicted_tokens_per_s_high"], strict=True)
    return pd.DataFrame(
        {
            "configuration": table["role"] + ": " + table["configuration"],
            "streams": table["streams"],
            "plan_tokens_per_s": [_range(lo, hi) for lo, hi in ranges],
            "measured_tokens_per_s": table["measured_tokens_per_s"].round(0).astype("Int64"),
            "plan_miss_pct": (100 * table["error"]).round(0).astype("Int64"),
            "goodput_tokens_per_s": table["measured_goodput_tokens_per_s"].round(0).astype("Int64"),
            "tpot_ms": table["measured_tpot_ms"].round(2),
            "ttft_ms": table["measured_ttft_ms"].round(0).astype("Int64"),
        }
    )


def checked_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`checked`'s rows as chapter 5 shows them: :func:`cells_view` with the refit's range beside the plan's,
    the run and the provenance."""
    if table.empty:
        return table
    view = cells_view(table)
    refit = zip(table["refit_tokens_per_s_low"], table["refit_tokens_per_s_high"], strict=True)
    view.insert(3, "refit_tokens_per_s", [_range(lo, hi) for lo, hi in refit])
    return view.assign(run=table["run"].to_numpy(), provenance=table["provenance"].to_numpy())


def loop_error_words(runs: MeasuredRuns) -> str:
    """The newest stored `box --verify` run's miss, in words, on the box its label names (the loop's last check may
    have run on another box than the one asked about); empty where none is stored or none can be read."""
    for run_id in reversed(verify_runs(runs)):
        try:
            v = verdict(runs, run_id)
        except (ModelInputError, KeyError, ValueError):
            continue
        run = runs.run(run_id)
        box = run.label or "a box its run does not name"
        planned = run.parameters.get("box_plan", {}).get("inputs", {})  # which grid's overheads the plan took
        name = "drafting overhead" if "drafting overhead" in planned else "host overhead"  # older plans: the host's
        priced = f"; its plan's {name}: {planned[name]}" if planned.get(name) else ""
        return (
            f"on {box}, predicted tok/s missed the measured by a median {v.median_error:.0%} over "
            f"{v.measured_cells} of {v.planned_cells} cells; the model "
            f"{'chose right' if v.model_right else 'chose wrongly'} (run {run_id}{priced})"
        )
    return ""


ACCEPT_TOLERANCE = 0.05  # a speculative server whose reported accept length misses the plan's by more is refused


def _request_accept_problem(runs: MeasuredRuns, run_id: str, variant: str, target: float) -> str:
    """Why a held server's requests cannot be trusted (empty where they can): one that reported no verify count, or
    whose verify passes miss its tokens over the held accept length by more than one pass (a whole count's rounding)
    and :data:`ACCEPT_TOLERANCE`, warm-up or not."""
    names = [t for t in runs.run(run_id).tables if t.startswith(f"sweep-{variant}-c")]
    for name in names:
        requests = runs.read_table(run_id, name)
        ok = requests[requests["ok"].astype(bool)] if "ok" in requests else requests
        if ok.empty:
            continue
        problem = held_accept_problem(ok.get("output_tokens"), ok.get("spec_verify_ct"), target)
        if problem:
            return problem
    return ""


def held_accept_problem(output_tokens: object, verify_counts: object, target: float) -> str:
    """The one check of every answered request of a server held at accept length ``target``: empty where each
    request's verify passes are its tokens over ``target`` within one pass (a whole count's rounding) and
    :data:`ACCEPT_TOLERANCE`; else why not (a request that reported no verify count, or one that missed)."""
    verifies = pd.to_numeric(pd.Series(verify_counts, dtype=object), errors="coerce")
    if verifies.isna().any() or (verifies <= 0).any():
        return f"{int(verifies.isna().sum() + (verifies <= 0).sum())} request(s) reported no accept length"
    tokens = pd.to_numeric(pd.Series(output_tokens, dtype=object), errors="coerce")
    expected = tokens / target  # a request's verify count is whole: one pass either way is its rounding
    off = ~((verifies - expected).abs() <= 1.0 + ACCEPT_TOLERANCE * expected)  # a token count that is no number: off
    if off.any():
        worst = float((tokens / verifies)[off].iloc[0])
        return (
            f"{int(off.sum())} request(s) accepted {worst:.2f} tokens per verify against the {target:.2f} held "
            f"(more than one verify pass and {ACCEPT_TOLERANCE:.0%} off)"
        )
    return ""


UNLAUNCHED = {"pcie_ipc": "pcie_ipc", "fused": "fusion"}  # a plan's all-reduce but NCCL: the column its log fills


def untrusted_cells(runs: MeasuredRuns, run_id: str, table: pd.DataFrame) -> tuple[list[str], set[str]]:
    """What a check cannot trust, in lines naming the cells, and the servers (variants) whose cells are refused: a
    server that failed or left cells unmeasured (died, would not start), a server that ran without the all-reduce
    the plan priced for it (SGLang's PCIe-IPC or FlashInfer's fusion, as its log shows), and a speculative server
    whose reported accept length misses the plan's by more than :data:`ACCEPT_TOLERANCE` (it ignored the accept
    length asked)."""
    lines: list[str] = []
    refused: set[str] = set()
    points = runs.table_or_none(run_id, POINTS)
    parameters = runs.run(run_id).parameters
    held = bool(parameters.get("verify", {}).get("hold_accept"))
    tp = int(parameters.get("base", {}).get("tp_size") or 1)
    stored = parameters.get("box_plan", {})
    priced_on = {str(c.get("variant")): c.get("collective") for c in stored.get("configs", [])}  # each server's
    if points is not None:
        for row in points.to_dict("records"):
            failure = str(row.get("failure") or "").strip()
            failed = int(row.get("failed_cells") or 0)
            if failure or failed:
                lines.append(f"{row['variant']}: {failure or f'{failed} cell(s) failed'}")
            collective = str(priced_on.get(str(row["variant"]), stored.get("collective")))
            column = UNLAUNCHED.get(collective, "")
            if column and tp > 1 and not failure and row.get(column) != "enabled":  # priced on it, ran without it
                refused.add(str(row["variant"]))
                lines.append(
                    f"{row['variant']}: the plan priced {COLLECTIVE_NAMES[collective]} and the server ran without it "
                    f"({row.get(column) or 'not recorded'}; its log says why): its cells are refused"
                )
                continue
            target, reported = float(row.get("accept_target") or 1.0), row.get("server_accept_length")
            if held and target > 1.0:  # every request of a held server checked, not only the server's own average
                problem = _request_accept_problem(runs, run_id, str(row["variant"]), target)
                if problem:
                    refused.add(str(row["variant"]))
                    lines.append(f"{row['variant']}: {problem}: its cells are refused")
                    continue
            known = target > 1.0 and reported is not None and np.isfinite(reported)
            if known and abs(float(reported) / target - 1.0) > ACCEPT_TOLERANCE:
                refused.add(str(row["variant"]))
                lines.append(
                    f"{row['variant']}: the server reported accept length {float(reported):.2f} against the "
                    f"{target:.2f} planned (more than {ACCEPT_TOLERANCE:.0%} off): its cells are refused"
                )
    missing = table[table["measured_tokens_per_s"].isna() & ~table["variant"].isin(refused)]
    lines += [f"{r.configuration} at {streams_words(int(r.streams))}: not measured" for r in missing.itertuples()]
    return lines, refused
