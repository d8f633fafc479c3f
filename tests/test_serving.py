"""The serving vocabulary (calculator.serving): one definition the sizer and the simulator share."""

from __future__ import annotations

import types

import pandas as pd
import pytest

import calculator
from calculator import Q_, InputError, fleet, serving, simulation
from calculator.fleet import FleetPlan
from calculator.simulation import plan_setup, verify_plan


def test_the_sizer_and_the_simulator_serve_the_vocabularys_own_objects():
    for name in ("Workload", "Targets", "ServingOptions", "Speculation"):
        assert getattr(fleet, name) is getattr(serving, name) is getattr(calculator, name)
    for name in ("ROUTERS", "DEFAULT_ROUTER", "router_name"):
        assert getattr(simulation, name) is getattr(serving, name)


def test_router_aliases_name_the_simulated_policies():
    assert serving.router_name("Join-Shortest-Queue") == "least_connections"
    assert serving.router_name("power of two") == "two_choices"
    assert set(serving.ROUTERS.values()) == {"round_robin", "random", "least_connections", "least_work", "two_choices"}
    with pytest.raises(InputError, match="'router'"):
        serving.router_name("fastest")


def test_a_trace_is_read_once_for_both_sides(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_time,input_tokens,output_tokens\n0,100,10\n2,300,30\n4,200,20\n", encoding="utf-8")
    frame = serving.read_trace(path)
    assert frame["input_tokens"].tolist() == [100.0, 300.0, 200.0]
    workload = fleet.Workload.from_trace(path)
    assert workload.arrival_rate.m_as("request/s") == pytest.approx(2 / 4)  # 2 gaps over 4 s
    assert workload.input_tokens == pytest.approx(200.0)
    traffic = simulation.Traffic.from_trace(path)
    assert traffic.requests == 3 and traffic.output_tokens == pytest.approx(20.0)


def test_read_trace_names_what_is_wrong():
    with pytest.raises(InputError, match="'columns'"):
        serving.read_trace(pd.DataFrame({"t": [0.0]}), ["t"])
    with pytest.raises(InputError, match="column 'input_tokens', row 2"):
        serving.read_trace(pd.DataFrame({"arrival_time": [0, 1], "input_tokens": [5, 0], "output_tokens": [1, 1]}))


def test_a_fleet_plan_is_a_serving_plan_and_other_objects_are_not():
    plan = FleetPlan(feasible=False, reason="no candidate")
    assert isinstance(plan, serving.ServingPlan)
    assert not isinstance(object(), serving.ServingPlan)
    with pytest.raises(InputError, match="argument 'plan' must be a FleetPlan, got dict"):
        plan_setup({"model": "llama-3.1-8b"})
    with pytest.raises(InputError, match="infeasible"):
        verify_plan(plan)


def test_the_simulator_reads_any_plan_with_the_vocabularys_fields():
    """A plan record that is not a FleetPlan: the simulator reads its replica through ServingPlan alone."""

    plan = types.SimpleNamespace(
        feasible=True,
        reason="",
        model="llama-3.1-8b",
        accelerator="h100-sxm",
        precision="fp8",
        engine="vllm",
        kv_precision="",
        layout=serving.Layout(tensor_parallel=2),
        batch=48,
        replicas=3,
        router="round_robin",
        workload=serving.Workload(Q_(4, "request/s"), 1000, 200),
        targets=serving.Targets(Q_(1, "s"), Q_(50, "ms")),
        serving=serving.ServingOptions(chunk_size=2048),
        registry_documents=(),
    )
    assert isinstance(plan, serving.ServingPlan) and not isinstance(plan, FleetPlan)
    setup = plan_setup(plan)
    assert (setup.model, setup.tensor_parallel, setup.max_num_seqs, setup.max_num_tokens) == (
        "llama-3.1-8b",
        2,
        48,
        2048,
    )
    assert setup.engine == "vllm" and setup.kv_precision is None
