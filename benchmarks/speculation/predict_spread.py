"""The speculation model's prediction for a spread-forced grid, written before the grid runs (issue #50).

The model is fitted on the stored collapsed-routing grid only (its plain sweep and EAGLE-3 at accept length 2); the
spread-forced servers (requests sampled at temperature > 0, SGLang accepting the draft's own tokens) read experts as
uniform routing says, with no overlap between a chain's tokens (random weights share nothing from one token to the
next). Writes a CSV a later run is compared with; commit it before the run.

    .venv/bin/python benchmarks/speculation/predict_spread.py [--out FILE]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from verifylab.iorw import atomic_write_text
from verifylab.model.fits.grid import first_grid_fit, predict_sweeps
from verifylab.model.inputs.model_costs import Routing
from verifylab.model.inputs.stored import stored_runs
from verifylab.model.pricing.speculation import crossings
from verifylab.store.evidence import Evidence
from verifylab.vocab import Drafter

SERVERS = [(Drafter.EAGLE3, 4, 2.0), (Drafter.EAGLE3, 4, 3.0)]
STREAMS = [1, 2, 4, 8, 16, 32, 64, 128]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("predicted-spread.csv"))
    args = parser.parse_args()
    fit = first_grid_fit(stored_runs(Evidence(args.data).measured))
    if fit is None:
        raise SystemExit("no stored grid run can be fitted")
    table = predict_sweeps(fit, SERVERS, STREAMS, Routing.UNIFORM)
    atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4g"))
    for (drafter, k, accept), part in table.groupby(["drafter", "draft_tokens", "accept_target"]):
        for end in ("low", "high"):
            found = crossings(list(zip(part["streams"], part[f"gain_{end}"], strict=True)))
            said = ", ".join(f"{what} at {at:.1f}" for at, what in found) or "pays at every stream count"
            print(f"{drafter} d{k} a{accept:g} ({end} end): {said}")
    plain128 = table[table["streams"] == 128].iloc[0]
    print(
        f"plain at 128 streams: {1e3 / (plain128['plain_tokens_per_s_high'] / 128):.2f}-"
        f"{1e3 / (plain128['plain_tokens_per_s_low'] / 128):.2f} ms a step; all-experts floor "
        f"{plain128['spread_floor_ms']:.2f} ms"
    )
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
