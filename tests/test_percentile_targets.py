"""Percentile targets for the stream: a request's TPOT and the token gaps at a percentile (issue 55, item 5).

The closed form (``calculator.fleet.stream.stream_tails``, ``docs/fleet-sizer.md``) is checked against
the simulator's own distributions: the per-request TPOT column of ``simulate_plan(...).requests`` and the
gaps between a replica's decode iterations, each weighted by the sequences that emitted a token in it.
"""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from calculator.cli import app
from calculator.errors import InputError
from calculator.fleet import FleetPlan, SearchSpace, Targets, Workload, size_fleet
from calculator.simulation import results, simulate_plan
from calculator.units import Q_

SPACE = SearchSpace("h100-sxm", "bf16", tensor_parallel=[1])


def _workload(rate):
    return Workload(Q_(rate, "request/s"), 2000, 200, input_cv=0.5, output_cv=0.5)


def _simulated_tails(plan, monkeypatch, requests=3000):
    """The simulator's p99 per-request TPOT and p99 token gap (token-weighted) for one replica, in seconds."""
    raws = []
    run_seed = results._simulate_seed

    def keep(run, progress=None):
        raws.append(run_seed(run, progress))
        return raws[-1]

    monkeypatch.setattr(results, "_simulate_seed", keep)
    frame = simulate_plan(plan, replicas=1, requests=requests, seeds=[1], executor=None).requests
    frame = frame[frame.measured]
    raw = raws[0]
    ends, decoded, batch = raw["ends"][0], raw["decoded"][0], raw["batch"][0]
    emits = ends[decoded]
    gaps, tokens = np.diff(emits), batch[decoded][1:]  # each gap counted once per sequence it delayed
    inside = (emits[1:] > frame.arrival.min()) & (emits[1:] < frame.arrival.max())  # the measured window
    gaps, tokens = gaps[inside], tokens[inside]
    order = np.argsort(gaps)
    share = np.cumsum(tokens[order]) / tokens.sum()
    return float(np.quantile(frame.tpot.dropna(), 0.99)), float(gaps[order][np.searchsorted(share, 0.99)])


# Tolerances, from the simulator's own scatter and the closed form's measured bias. With 3,000 requests on
# one replica (seed 1) the bootstrap standard error of the simulated p99 TPOT is 1-2 % and of the p99 gap
# 2-4 % at low and mid load, and two seeds differ by 1-4 %; the closed form reads 5-17 % low there (it
# leaves out the collisions of prompts over the token budget). Near the cap (80 % utilization) the
# simulated tails move 20-50 % between seeds (a long queue episode or none) while the closed form's mean
# TPOT itself is within the sizer's stated band: the check there is wide, and one-sided below.
LOADS = [(3.0, 0.25, 0.25), (8.0, 0.25, 0.25), (11.0, 0.45, 0.45)]


@pytest.mark.parametrize(("rate", "tpot_tol", "gap_tol"), LOADS)
def test_closed_form_tails_match_the_simulator(rate, tpot_tol, gap_tol, monkeypatch):
    targets = Targets(
        Q_(20, "s"), Q_(1, "s"), tbt=Q_(10, "s"), tpot_percentile=0.99, tbt_percentile=0.99, max_utilization=0.95
    )
    plan = size_fleet("llama-3.1-8b", _workload(rate), targets, SPACE)
    assert plan.replicas == 1
    tpot, gap = plan.service.tpot_tail.m_as("s"), plan.service.tbt_tail.m_as("s")
    assert tpot > plan.service.tpot.m_as("s")  # a tail above the mean
    sim_tpot, sim_gap = _simulated_tails(plan, monkeypatch)
    assert abs(tpot / sim_tpot - 1) <= tpot_tol, (tpot, sim_tpot)
    assert abs(gap / sim_gap - 1) <= gap_tol, (gap, sim_gap)


def test_a_plan_meeting_the_mean_tpot_but_not_its_p99_is_sized_larger(monkeypatch):
    workload = _workload(9.0)
    mean = size_fleet("llama-3.1-8b", workload, Targets(Q_(5, "s"), Q_(20, "ms")), SPACE)
    p99 = size_fleet("llama-3.1-8b", workload, Targets(Q_(5, "s"), Q_(20, "ms"), tpot_percentile=0.99), SPACE)
    assert mean.feasible and p99.feasible
    assert p99.gpus > mean.gpus and p99.binding_constraint == "tpot"
    assert p99.service.tpot_tail <= Q_(20, "ms")
    # Independent evidence the smaller plan misses the p99: the simulator's p99 on one replica of it.
    assert mean.replicas == 1
    sim_tpot, _ = _simulated_tails(mean, monkeypatch)
    assert sim_tpot > 0.020


def test_percentile_targets_round_trip_through_a_plan_file():
    targets = Targets(Q_(2, "s"), Q_(30, "ms"), tbt=Q_(120, "ms"), tpot_percentile=0.95, tbt_percentile=0.99)
    plan = size_fleet("llama-3.1-8b", _workload(4.0), targets, SPACE)
    back = FleetPlan.from_json_dict(json.loads(json.dumps(plan.to_json_dict())))
    assert back.targets == targets
    assert back.service.tpot_tail == plan.service.tpot_tail and back.service.tbt_tail == plan.service.tbt_tail
    # A plan file written before these fields reads as the mean TPOT and the longest gap.
    data = json.loads(json.dumps(plan.to_json_dict()))
    for key in ("tpot_percentile", "tbt_percentile"):
        del data["targets"][key]
    for key in ("tpot_tail", "tbt_tail"):
        del data["service"][key]
    old = FleetPlan.from_json_dict(data)
    assert old.targets.tpot_percentile is None and old.targets.tbt_percentile is None
    assert old.service.tpot_tail is None


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"tpot_percentile": 1.5}, "tpot_percentile"),
        ({"tpot_percentile": 0}, "tpot_percentile"),
        ({"tbt": Q_(100, "ms"), "tbt_percentile": "high"}, "tbt_percentile"),
        ({"tbt_percentile": 0.99}, "tbt_percentile"),  # a gap percentile without the gap
    ],
)
def test_bad_percentile_targets_are_named(kwargs, named):
    with pytest.raises(InputError, match=named):
        Targets(Q_(1, "s"), Q_(40, "ms"), **kwargs)


def test_cli_takes_and_checks_the_stream_percentiles():
    runner = CliRunner()
    base = ["size", "llama-3.1-8b", "--rate", "4", "--input", "2000", "--output", "200", "-a", "h100-sxm", "-p",
            "bf16", "--tp", "1", "--ttft", "2 s", "--tpot", "30 ms", "--price", "4"]  # fmt: skip
    given = runner.invoke(app, [*base, "--tpot-percentile", "p99", "--tbt", "120 ms", "--tbt-percentile", "99"])
    assert given.exit_code == 0, given.output
    assert "TPOT 30 ms (p99), token gap 120 ms (p99)" in given.stdout.splitlines()[1]
    data = json.loads(runner.invoke(app, [*base, "--tpot-percentile", "0.95", "--json"]).stdout)
    assert data["targets"]["tpot_percentile"] == 0.95
    bad = runner.invoke(app, [*base, "--tpot-percentile", "abc"])
    assert bad.exit_code != 0 and "--tpot-percentile" in bad.output
    lone = runner.invoke(app, [*base, "--tbt-percentile", "99"])
    assert lone.exit_code != 0 and "--tbt" in lone.output
