"""What one collective costs in each communication regime, at its own message size, from measured and public
curves — never from one unexplained figure alone.

Regimes (a box is in one; the communication probe tells which):
- **healthy P2P**: public measurements on RTX PRO 6000 PCIe boxes (NCCL at 4 and 8 ranks from several boxes, a
  one-shot push kernel at 4 and 8 ranks). Beyond the largest size a source measured, a curve grows by its
  bandwidth term: NCCL's ring moves 2(n-1)/n of the message at the public bus bandwidth (22-41 GB/s at 8 ranks);
  a one-shot push sends (n-1) copies over one GPU's link (54 GB/s public), and FlashInfer switches to two-shot
  past its size threshold.
- **host-memory fallback**: this project's measured 2-rank NCCL curve through host memory (2 x H200,
  ``NCCL_P2P_DISABLE=1``), scaled to n ranks as a ring of 2(n-1) steps of m/n; the high end replaces the measured
  per-step latency by the public ~14 us per hop through host memory on RTX PRO 6000 boxes. No P2P: FlashInfer's
  kernels cannot run.
- **as reported**: the case study's own pass, the only figure for its box: the per-all-reduce time its 30 ms
  verify leaves once the compute is at least the bytes floor (a range, not the 205 us the 25/5 ms split implies),
  growing past the reported message at host-memory bandwidth. P2P there is broken or staged: the one-shot push
  is not priced.

Every price is a :class:`Price` with a low and a high end and the sources it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from verifylab.comm.bands import host_hop_us
from verifylab.model.inputs.curves import BoxProbe, Curve, monotone
from verifylab.model.inputs.probes import BOX_WORLD
from verifylab.model.pricing.memo import memoized as _memoized
from verifylab.model.pricing.regimes import (
    AS_ISOLATED,
    PCIE_IPC_WORKSPACE_ROWS,
    PRICED_REGIMES,
    Collective,
    InPassFactor,
    Price,
    extrapolation,
    max_oneshot_tokens,
    pcie_ipc_holds,
)
from verifylab.vocab import KIMI_K2_HIDDEN, P2P_WORKS, Regime


@dataclass
class RegimeCurves:
    """Prices of every collective in every priced regime, from one Evidence's public table and measured runs."""

    public: pd.DataFrame
    host_curve: Curve | None  # measured 2-rank NCCL through host memory
    host_run: str | None
    reported_allreduce: tuple[float, float, float] | None = None  # (low us, high us, message bytes) as reported
    in_pass_fused: InPassFactor = field(default_factory=lambda: AS_ISOLATED)  # fused kernel in a pass / isolated
    box: BoxProbe | None = None
    memo: dict[tuple, Any] = field(default_factory=dict, init=False, repr=False, compare=False)  # see _memoized

    def __setattr__(self, name: str, value: Any) -> None:  # an input set anew drops every result kept
        super().__setattr__(name, value)
        if name != "memo" and "memo" in self.__dict__:
            self.memo.clear()

    def regimes(self) -> tuple[Regime, ...]:
        """The regimes the options are priced in: the three of the model, and this box where a probe exists."""
        return (*PRICED_REGIMES, Regime.MEASURED) if self.box else PRICED_REGIMES

    # --------------------------------------------------------------------------------------- public inputs
    @property
    def _priced_public(self) -> pd.DataFrame:
        """The public rows that may price an answer: not one its source superseded, nor one the table keeps as context
        (its note says why); both are shown as evidence only."""
        p = self.public
        if p.empty or "note" not in p.columns:
            return p
        return p[~p["note"].astype(str).str.startswith(("superseded", "context:"))]

    def _rows(self, world: int, prefixes: tuple[str, ...]) -> pd.DataFrame:
        """The healthy-P2P latency rows of these implementations at ``world`` ranks, every size a source measured
        (a row in ms read in µs: a source's largest sizes are often given in ms)."""
        p = self._priced_public
        if p.empty:
            return p
        keep = (p["world_size"] == world) & p["unit"].isin(["us", "ms"]) & (p["regime"] == Regime.HEALTHY_P2P.value)
        keep &= p["implementation"].astype(str).str.startswith(prefixes) & p["message_bytes"].notna()
        rows = p[keep].copy()
        rows["value"] = [
            float(v) * (1e3 if u == "ms" else 1.0) for v, u in zip(rows["value"], rows["unit"], strict=True)
        ]
        return rows

    @staticmethod
    def _around(curves: tuple[Curve, ...], message: float) -> tuple[Curve, ...]:
        """The curves whose sizes bracket ``message`` (its price is theirs or their interpolation), or every curve
        where none does (the price is then extrapolated, and says so)."""
        return tuple(c for c in curves if c.message_bytes[0] <= message <= c.message_bytes[-1]) or curves

    @_memoized
    def _curves(self, world: int, prefixes: tuple[str, ...]) -> tuple[Curve, ...]:
        rows = self._rows(world, prefixes)
        curves = []
        for (_url, impl), group in rows.groupby(["url", "implementation"]):
            g = group.sort_values("message_bytes")
            ids = tuple(g["id"])
            label = f"{impl} ({', '.join(ids)})"
            curves.append(Curve(label, tuple(g["message_bytes"]), monotone(list(g["value"])), public_rows=ids))
        return tuple(curves)

    @_memoized
    def _value(
        self, implementation: str, unit: str, world: int | None = None, regime: Regime | None = None
    ) -> tuple[float, ...]:
        p = self._priced_public
        if p.empty:
            return ()
        keep = (p["implementation"] == implementation) & (p["unit"] == unit)
        if regime is not None:
            keep &= p["regime"] == regime.value
        if world is not None:
            keep &= p["world_size"] == world
        return tuple(float(v) for v in p.loc[keep, "value"])

    @property
    def bus_bandwidth_gbs(self) -> tuple[float, float]:
        """NCCL's large-message bus bandwidth at 8 ranks over PCIe P2P (public), low and high."""
        values = self._value("nccl_busbw", "GB/s", regime=Regime.HEALTHY_P2P) or [41.1]
        return min(values), max(values)

    @property
    def link_gbs(self) -> float:
        """One GPU's PCIe P2P write bandwidth (public)."""
        values = [v for v in self._value("p2p_write_bandwidth", "GB/s") if v > 10] or [54.0]
        return max(values)

    @property
    def host_hop_us(self) -> float:
        return self._host_hop_us()

    @_memoized
    def _host_hop_us(self) -> float:
        return host_hop_us(self.public)[0]  # the public hop row, read as the probe's verdict reads it

    @property
    def host_gbs(self) -> float:
        """Bandwidth through host memory, from the measured 2-rank curve's two largest sizes (bytes / us)."""
        c = self.host_curve
        if c is None or len(c.us) < 2:
            return 10.0
        slope = (c.us[-1] - c.us[-2]) / (c.message_bytes[-1] - c.message_bytes[-2])  # us per byte, 2 ranks
        return 1 / max(slope, 1e-9) / 1e3  # a 2-rank ring moves the whole message once each way

    @_memoized
    def _sm120_host_curve(self) -> Curve | None:
        """NCCL through host memory at 2 ranks on SM120 (public rows, us; ms rows converted), or None."""
        p = self._priced_public
        if p.empty:
            return None
        keep = (p["regime"] == Regime.HOST_MEMORY.value) & (p["implementation"] == "nccl") & (p["world_size"] == 2)
        rows = p[keep & p["message_bytes"].notna() & p["unit"].isin(["us", "ms"])].sort_values("message_bytes")
        if rows.empty:
            return None
        us = [float(v) * (1e3 if u == "ms" else 1.0) for v, u in zip(rows["value"], rows["unit"], strict=True)]
        ids = tuple(rows["id"])
        return Curve(f"nccl ({', '.join(ids)})", tuple(rows["message_bytes"]), monotone(us), public_rows=ids)

    @property
    def sm120_host_gbs(self) -> float:
        """NCCL's bandwidth through host memory on SM120 (public), else the measured H200 one."""
        values = self._value("host_memory_bandwidth", "GB/s")
        return min(values) if values else self.host_gbs

    def public_uses(self, worlds: tuple[int, ...] = (2, 4, 8)) -> dict[str, list[str]]:
        """What each public row prices, by row id, read from the very curves and values the prices use: a row in
        no list is shown as context only."""
        uses: dict[str, list[str]] = {}
        for world in worlds:
            for prefixes, what in (
                (("nccl",), "NCCL all-reduce"),
                (("oneshot", "custom"), "one-shot (fused) push"),
                (("pcie_ipc",), "PCIe-IPC all-reduce"),
            ):
                for curve in self._curves(world, prefixes):
                    for row_id in curve.public_rows:
                        uses.setdefault(row_id, []).append(f"{what} curve at {world} ranks, healthy P2P")
        p = self._priced_public  # as bus_bandwidth_gbs and link_gbs read them
        healthy = Regime.HEALTHY_P2P.value
        for implementation, what, keep in (
            ("nccl_busbw", "NCCL bus bandwidth at 8 ranks, healthy P2P", lambda r: r.regime == healthy),
            ("p2p_write_bandwidth", "one GPU's P2P link bandwidth", lambda r: float(r.value) > 10),
        ):
            rows = p[(p["implementation"] == implementation)] if not p.empty else p
            for row in rows.itertuples():
                if keep(row):
                    uses.setdefault(str(row.id), []).append(what)
        sm120 = self._sm120_host_curve()
        for row_id in sm120.public_rows if sm120 else ():
            uses.setdefault(row_id, []).append("NCCL through host memory on SM120 (high end of the host-memory price)")
        for row in p[p["implementation"] == "host_memory_bandwidth"].itertuples() if not p.empty else ():
            uses.setdefault(str(row.id), []).append("host-memory bandwidth on SM120, past the largest size measured")
        hop_id = host_hop_us(self.public)[1]
        if hop_id:
            uses.setdefault(hop_id, []).append("one hop through host memory (host-memory and degraded floors)")
        return uses

    # ------------------------------------------------------------------------------------------- prices
    @_memoized
    def price(
        self, regime: Regime, collective: Collective, world: int, message: float, hidden: int = KIMI_K2_HIDDEN
    ) -> Price | str:
        """The price of one collective of ``message`` bytes at ``world`` ranks, or why it is not priced; ``hidden``:
        the served model's hidden size (PCIe-IPC's workspace is counted in its rows)."""
        if regime is Regime.MEASURED:
            return self._box(collective, world, message, hidden)
        if collective is Collective.NCCL:
            return self._nccl(regime, world, message)
        if collective is Collective.FUSED:
            return self._fused(regime, world, message)
        if collective is Collective.PCIE_IPC:
            return self._pcie_ipc(regime, world, message, hidden)
        if collective is Collective.ALL_TO_ALL:
            return self._all_to_all(regime, world, message)
        return self._send(regime, message)

    def _box(self, collective: Collective, world: int, message: float, hidden: int) -> Price | str:
        """This box's measured curve where the probe measured it; the box's regime for what it did not."""
        box = self.box
        if box is None:
            return "no probe of this box"
        ring = 2 * (world - 1) / world
        if world == BOX_WORLD and collective is Collective.NCCL:
            value = box.nccl.priced_at(message, ring / (self.bus_bandwidth_gbs[0] * 1e3))
            return Price(value, value, f"measured on this box: {box.source}")
        if world == BOX_WORLD and collective is Collective.FUSED and box.fused is not None:
            low, high = self.in_pass_fused.range_at(message)
            value = box.fused.priced_at(message, (world - 1) / (self.link_gbs * 1e3))
            return Price(value * low, value * high, f"measured on this box: {box.source}, x in-pass factor")
        if box.regime in P2P_WORKS and collective is Collective.PCIE_IPC and not pcie_ipc_holds(message, hidden):
            return self._box(Collective.NCCL, world, message, hidden)  # SGLang hands it to this box's own NCCL
        if box.regime is Regime.NCCL_SLOW and collective is not Collective.NCCL:  # P2P works: priced as healthy
            priced = self.price(Regime.HEALTHY_P2P, collective, world, message, hidden)
            return (
                priced
                if isinstance(priced, str)
                else Price(priced.low_us, priced.high_us, f"{priced.basis} (P2P works on this box: its probe)")
            )
        if box.regime not in PRICED_REGIMES:
            return f"not measured on this box, and its regime is {box.regime} ({box.source} has no verdict)"
        priced = self.price(box.regime, collective, world, message, hidden)
        return (
            priced
            if isinstance(priced, str)
            else Price(
                priced.low_us, priced.high_us, f"{priced.basis} (this box's regime, {box.regime}: not measured here)"
            )
        )

    def _nccl(self, regime: Regime, world: int, message: float) -> Price | str:
        if regime is Regime.HEALTHY_P2P:
            curves = self._curves(world, ("nccl",))
            if not curves:
                return f"no public NCCL curve at {world} ranks"
            low_bw, high_bw = self.bus_bandwidth_gbs
            ring = 2 * (world - 1) / world
            around = self._around(curves, message)
            values = [c.priced_at(message, ring / (bw * 1e3)) for c in around for bw in (low_bw, high_bw)]
            sources = "; ".join(c.source for c in curves)
            beyond = extrapolation([c.message_bytes for c in curves], message)
            return Price(
                min(values), max(values), f"public NCCL curves at {world} ranks: {sources}", extrapolated=beyond
            )
        if regime is Regime.HOST_MEMORY:
            if self.host_curve is None:
                return "no measured host-memory curve"
            step_message = 2 * message / world
            low = (world - 1) * self.host_curve.priced_at(step_message, 1 / (self.host_gbs * 1e3))
            step_measured = self.host_curve.us[0] / 2
            high = low + 2 * (world - 1) * max(0.0, self.host_hop_us - step_measured)
            basis = (
                f"measured 2-rank host-memory curve (run {self.host_run}, H200) as a ring of "
                f"{2 * (world - 1)} steps; high end at the public {self.host_hop_us:g} us per hop"
            )
            sm120 = self._sm120_host_curve()
            if sm120 is not None:  # the SM120 figure: NCCL's SHM kernels far slower than the H200's
                high = max(high, (world - 1) * sm120.priced_at(step_message, 1 / (self.sm120_host_gbs * 1e3)))
                basis += f" or the public SM120 2-rank curve ({sm120.source}), whichever is slower"
            return Price(low, high, basis)
        if regime is Regime.DEGRADED:
            if self.reported_allreduce is None:
                return "no reported all-reduce"
            low, high, at = self.reported_allreduce
            steps = 2 * (world - 1) / 14  # the reported ring had 8 ranks: 14 steps
            extra = max(0.0, message - at) * 2 * (world - 1) / world / (self.host_gbs * 1e3)
            basis = "as reported: the verify pass less its compute floor, per all-reduce"
            if world != 8:
                basis += f", x {2 * (world - 1)}/14 ring steps"
            return Price(low * steps + extra, high * steps + extra, basis)
        return f"regime '{regime}' is not priced"

    def _fused(self, regime: Regime, world: int, message: float) -> Price | str:
        if regime is not Regime.HEALTHY_P2P:
            return "needs working P2P (FlashInfer's kernels write into the peers' memory): fix P2P first"
        curves = self._curves(world, ("oneshot", "custom"))
        if not curves:
            return f"no public one-shot curve at {world} ranks"
        push = (world - 1) / (self.link_gbs * 1e3)  # us per byte: n-1 copies over one link
        tokens = message / (KIMI_K2_HIDDEN * 2)
        one_shot_limit = max_oneshot_tokens(KIMI_K2_HIDDEN, world) if world in (2, 4, 8) else 0
        values = []
        for c in self._around(curves, message):
            one_shot = max(c.priced_at(message, push), message * push)
            if tokens > one_shot_limit:  # FlashInfer's size rule picks two-shot: two hops, 2(n-1)/n of the message
                two_shot = 2 * c.us[0] + 2 * (world - 1) / world * message / (self.link_gbs * 1e3)
                values.append(two_shot)
            else:
                values.append(one_shot)
        sources = "; ".join(c.source for c in curves)
        beyond = extrapolation([c.message_bytes for c in curves], message)
        if tokens > one_shot_limit:
            beyond = "; ".join(w for w in (beyond, "two-shot by FlashInfer's size rule, which no source measured") if w)
        base = Price(
            min(values), max(values), f"public one-shot curves at {world} ranks: {sources}", extrapolated=beyond
        )
        low, high = self.in_pass_fused.range_at(message)
        return base.scaled(low, high, f"x {low:.2f}-{high:.2f} inside a pass (fitted on the H200 traces)")

    def _pcie_ipc(self, regime: Regime, world: int, message: float, hidden: int) -> Price | str:
        """SGLang's PCIe-IPC all-reduce (0.5.21+, FlashInfer >= 0.7.0) from its own public curve, as its source measured
        it (no in-pass factor was measured for this kernel, so none is applied); it needs peer writes, so it runs only
        where P2P works (healthy P2P, and a probed box whose NCCL is slow while its P2P works). Its workspace is sized
        for decode (:data:`PCIE_IPC_WORKSPACE_ROWS` rows of the hidden size): SGLang hands a larger reduction to NCCL
        (``should_pcie_ipc_ar``), so there the price is NCCL's, and says so."""
        if regime is not Regime.HEALTHY_P2P:
            return "needs working P2P (the kernel writes into the peers' memory): fix P2P first"
        if not pcie_ipc_holds(message, hidden):
            nccl = self._nccl(regime, world, message)
            if isinstance(nccl, str):
                return nccl
            return Price(
                nccl.low_us,
                nccl.high_us,
                f"NCCL: a reduction past PCIe-IPC's decode-sized workspace ({PCIE_IPC_WORKSPACE_ROWS} rows) is handed "
                f"to NCCL ({nccl.basis})",
                extrapolated=nccl.extrapolated,
            )
        curves = self._curves(world, ("pcie_ipc",))
        if not curves:
            return f"no public PCIe-IPC curve at {world} ranks"
        wire = 2 * (world - 1) / world / (self.link_gbs * 1e3)  # past the curve: a ring's bytes over one link
        values = [c.priced_at(message, wire) for c in self._around(curves, message)]
        sources = "; ".join(c.source for c in curves)
        beyond = extrapolation([c.message_bytes for c in curves], message)
        return Price(
            min(values), max(values), f"public PCIe-IPC curve at {world} ranks: {sources}", extrapolated=beyond
        )

    def _all_to_all(self, regime: Regime, world: int, per_gpu_bytes: float) -> Price | str:
        if regime is Regime.HEALTHY_P2P:
            curves = self._curves(world, ("oneshot", "custom"))
            if not curves:
                return f"no public push curve at {world} ranks"
            floor = min(c.us[0] for c in curves)
            low = floor + per_gpu_bytes / (self.link_gbs * 1e3)
            high = max(c.priced_at(per_gpu_bytes / (world - 1), 0.0) for c in curves) + per_gpu_bytes / (
                self.link_gbs * 1e3
            )
            return Price(
                low,
                high,
                "one hop to every peer: the public one-shot latency floor + the bytes over one link "
                "(modelled; DeepEP-style all-to-all targets NVLink/RDMA, not PCIe)",
            )
        if regime is Regime.HOST_MEMORY:
            hop = self.host_curve.us[0] / 2 if self.host_curve else self.host_hop_us
            wire = per_gpu_bytes / (self.host_gbs * 1e3)
            return Price(
                (world - 1) * hop + wire,
                (world - 1) * self.host_hop_us + wire,
                "n-1 hops through host memory + the bytes at host-memory bandwidth (modelled)",
            )
        return "not priced where P2P is broken: fix P2P first"

    def _send(self, regime: Regime, message: float) -> Price | str:
        if regime is Regime.HEALTHY_P2P:
            small = self._value("nccl", "us", 2) or [9.0]
            wire = message / (self.link_gbs * 1e3)
            return Price(
                min(small) + wire, max(small) + wire, "public 2-rank NCCL latency floor + the bytes over one link"
            )
        if regime is Regime.HOST_MEMORY:
            wire = message / (self.host_gbs * 1e3)
            return Price(self.host_hop_us + wire, self.host_hop_us + wire, "one hop through host memory (public)")
        if self.reported_allreduce is None:
            return "no reported all-reduce"
        low, high, _ = self.reported_allreduce
        return Price(low / 14, high / 14, "one step of the reported ring")
