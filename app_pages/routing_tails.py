"""Routing and tails: fan-out tails, random vs two-choice placement, weighted routing, consistent-hash remapping."""

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.plots import curves_figure, max_load_figure
from calculator.routing import (
    ConsistentHashRing,
    expected_max_load,
    fanout_slow_probability,
    per_leaf_budget,
    remap_fraction_on_add,
    remap_fraction_on_remove,
    remapped_fraction,
    routing_shares,
    simulate_max_load,
)

BINS = (10, 30, 100, 1000, 10_000)
POLICIES = {1: "random (d = 1)", 2: "two choices (d = 2)", 3: "three choices (d = 3)"}


@st.cache_data(show_spinner=False, max_entries=64)
def fluid_max_load(choices):
    """The fluid-limit expected maximum load at each fleet size of ``BINS`` (an ODE solve per size)."""
    return [expected_max_load(n, choices=choices) for n in BINS]


@st.cache_data(show_spinner=False, max_entries=256)
def simulated_max_load(bins, choices, trials, seed):
    return simulate_max_load(bins, choices=choices, trials=trials, seed=seed)


@st.cache_data(show_spinner=False, max_entries=256)
def measured_remap(servers, virtual_nodes, keys, change, seed):
    ring = ConsistentHashRing([f"server-{i}" for i in range(servers)], virtual_nodes=virtual_nodes, seed=seed)
    after = ring.with_server(f"server-{servers}") if change == "add" else ring.without_server(f"server-{servers - 1}")
    return remapped_fraction(ring, after, np.arange(keys)), ring.load_shares(np.arange(keys))


def main():
    st.title("Routing and tails")
    st.caption(
        "Why fan-out multiplies tails, how much two random probes flatten load, what weighted routing does on a "
        "mixed fleet, and how many keys move when a server joins (section 10.11; `calculator.routing`)."
    )
    sc = ui.Scenario("routing")
    fanout, balance, weighted, hashing = sc.tabs(
        ["Fan-out tail", "Random vs two choices", "Weighted routing", "Consistent hashing"]
    )
    if fanout.open:
        with fanout:
            _fanout(sc)
    if balance.open:
        with balance:
            _balance(sc)
    if weighted.open:
        with weighted:
            _weighted(sc)
    if hashing.open:
        with hashing:
            _hashing(sc)


def _fanout(sc):
    answer = st.container()  # the metrics above the inputs (first on a phone, where the columns stack)
    a, b, c = st.columns(3)
    leaf = sc.number("Leaf slow probability p", "leaf", 0.01, min_value=0.0, max_value=1.0, step=0.001,
                     format="%.4f", where=a)  # fmt: skip
    leaves = sc.number("Fan-out N", "fanout", 100, min_value=1, max_value=1_000_000, integer=True, where=b)
    target = sc.number("Request tail target P", "target", 0.01, min_value=1e-6, max_value=1.0, step=0.001,
                       format="%.4f", where=c)  # fmt: skip
    slow = fanout_slow_probability(leaf, leaves)
    budget = per_leaf_budget(target, leaves)
    cols = answer.columns(2)
    cols[0].metric("Requests slowed by at least one leaf", f"{ui.number(100 * slow, 3)} %")
    cols[1].metric(
        "Per-leaf budget for the target", f"{ui.number(budget, 3)} (leaf p{ui.number(100 * (1 - budget), 4)})"
    )
    sc.answered()
    fanouts = np.unique(np.geomspace(1, 10_000, 60).astype(int))
    series = {f"p = {p:g}": fanout_slow_probability(p, fanouts) for p in sorted({0.001, 0.01, 0.05, leaf})}
    figure = curves_figure(
        fanouts, series, x_name="Fan-out [leaves]", y_name="P(request slow) [probability]",
        title="Tail amplification by fan-out", log_x=True,
    )  # fmt: skip
    st.plotly_chart(figure, key="fanout")
    ui.show_math(fanout_slow_probability, leaf, leaves, title="slow requests")
    ui.show_math(per_leaf_budget, target, leaves, title="per-leaf budget")


def _balance(sc):
    a, b, c = st.columns(3)
    choices = sc.select("Compare with", "choices", [2, 3], 2, where=a, format_func=POLICIES.get)
    trials = sc.number("Simulated trials per point", "trials", 40, min_value=5, max_value=2000, integer=True, where=b)
    seed = sc.number("Seed", "seed", 0, min_value=0, max_value=2**31 - 1, integer=True, where=c)
    policies = (1, choices)
    expected = {POLICIES[d]: fluid_max_load(d) for d in policies}
    progress = st.progress(0.0, text="Simulating balls into bins...")
    simulated = {POLICIES[d]: [] for d in policies}
    total = len(BINS) * len(policies)
    for done, (d, n) in enumerate(((d, n) for d in policies for n in BINS), start=1):
        simulated[POLICIES[d]].append(simulated_max_load(n, d, trials, seed))
        progress.progress(done / total, text=f"Simulated {done} of {total} fleets")
    progress.empty()
    st.plotly_chart(max_load_figure(BINS, expected, simulated), key="max-load")
    rows = []
    for d in policies:
        for n, run, fluid in zip(BINS, simulated[POLICIES[d]], expected[POLICIES[d]], strict=True):
            rows.append(
                {
                    "policy": POLICIES[d],
                    "replicas = requests": n,
                    "expected max load (fluid limit)": fluid,
                    "simulated mean": run.mean,
                    "standard error": run.standard_error,
                }
            )
    ui.table(pd.DataFrame(rows), "max-load")
    st.caption(
        "n requests placed on n replicas; the maximum queue grows like ln n / ln ln n at random and ln ln n / ln d "
        "with d probes (Eq. 14/15). A static model without departures: it shows the shape, not serving queues."
    )


def _weighted(sc):
    a, b, c = st.columns(3)
    capacities = ui.parse_numbers(
        sc.text("Capacity of one server per tier [request/s]", "capacities", "1000, 600", where=a),
        "Capacities", minimum=1e-9,
    )  # fmt: skip
    counts = ui.parse_numbers(
        sc.text("Servers per tier", "counts", "10, 20", where=b), "Servers", integer=True, minimum=1
    )
    rate = sc.number("Offered rate [request/s]", "rate", 15_000.0, min_value=0.001, max_value=1e10, step=500.0, where=c)
    if len(capacities) != len(counts):
        st.warning(f"Give one server count per tier: {len(capacities)} capacities and {len(counts)} counts.")
        return
    rows = []
    for policy in ("weighted", "round_robin"):
        shares = routing_shares(Q_(capacities, "request/s"), Q_(rate, "request/s"), counts, policy)
        for tier, (share, utilization) in enumerate(zip(shares.share, shares.utilization, strict=True)):
            rows.append(
                {
                    "policy": policy,
                    "tier": tier + 1,
                    "share per server": share,
                    "utilization": utilization,
                    "saturates at [request/s]": shares.saturation_rate.m_as("request/s"),
                }
            )
        if policy == "round_robin" and not shares.stable:
            st.warning(
                f"Round robin overloads the slowest tier above {ui.fmt(shares.saturation_rate, 'request/s')}; "
                "capacity-weighted routing keeps every server at the same utilization."
            )
    ui.table(pd.DataFrame(rows), "routing-shares")
    st.caption("Example 10.8: capacity weights equalize utilization; round robin saturates the slowest tier first.")


def _hashing(sc):
    a, b, c, d = st.columns(4)
    servers = sc.number("Servers", "servers", 10, min_value=2, max_value=1000, integer=True, where=a)
    virtual = sc.number("Virtual nodes per server", "vnodes", 200, min_value=1, max_value=2000, integer=True, where=b)
    keys = sc.number("Keys", "keys", 50_000, min_value=1000, max_value=1_000_000, integer=True, where=c)
    change = sc.select("Change", "change", ["add", "remove"], "add", where=d, format_func=lambda x: f"{x} one server")
    with st.spinner("Hashing keys onto the ring..."):
        fraction, shares = measured_remap(servers, virtual, keys, change, 0)
    ideal = remap_fraction_on_add(servers) if change == "add" else remap_fraction_on_remove(servers)
    cols = st.columns(3)
    cols[0].metric("Keys remapped (measured)", f"{ui.number(100 * fraction, 3)} %")
    cols[1].metric("Ideal", f"{ui.number(100 * ideal, 3)} %")
    cols[2].metric("Largest server share", f"{ui.number(100 * max(shares.values()), 3)} %")
    ui.show_math(
        remap_fraction_on_add if change == "add" else remap_fraction_on_remove, servers, title="ideal remapped share"
    )
    ui.table(pd.DataFrame({"server": list(shares), "share of keys": list(shares.values())}), "consistent-hash-shares")


ui.run(main)
