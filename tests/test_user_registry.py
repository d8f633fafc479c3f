"""A user registry (new accelerator, its new interconnect, its price) flows through the API and the CLI."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from calculator import Q_, load_registry, predict_benchmark, size_fleet
from calculator.cli import app
from calculator.simulation import verify_plan

USER = textwrap.dedent(
    """\
    sources:
      - id: my-lab
        title: "Our lab's measurements"
        url: "https://example.com/lab"
        kind: user
    interconnects:
      - id: my-fabric
        name: My host fabric
        scope: host
        provenance: user
        bandwidth: 48 GB/s
        sources: [{source: my-lab, fields: [scope, bandwidth]}]
    accelerators:
      - id: my-gpu
        name: My GPU 96GB
        vendor: Example
        provenance: user
        memory: 96 GiB
        memory_nameplate: 96 GB
        memory_bandwidth: 4.0 TB/s
        dense_throughput: {bf16: 900 TFLOP/s, fp8: 1800 TFLOP/s}
        host_link: my-fabric
        tdp: 600 W
        sources: [{source: my-lab, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, host_link, tdp]}]
    prices:
      - id: my-gpu-on-demand
        name: Our contract price
        provenance: user
        accelerator: my-gpu
        price: 2.75 USD/hour
        market: on_demand
        as_of: "2026"
        sources: [{source: my-lab, fields: [price]}]
    """
)


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(USER, encoding="utf-8")
    return path


def _size(**changes):
    arguments = dict(
        model="llama-3.1-8b",
        accelerator="my-gpu",
        precision="fp8",
        arrival_rate=Q_(20, "request/s"),
        input_tokens=1024,
        output_tokens=256,
        ttft_slo=Q_(1, "s"),
        tpot_slo=Q_(50, "ms"),
    )
    arguments.update(changes)
    return size_fleet(**arguments)


def test_a_user_registry_sizes_a_fleet_through_the_api(user_file):
    registry = load_registry(extra=[user_file])
    plan = _size(registry=registry)
    assert plan.feasible and plan.accelerator == "my-gpu"
    # The price is the user's own, found in the registry the sizer was given.
    assert plan.cost_per_hour.m_as("USD/hour") == pytest.approx(plan.gpus * 2.75)
    # An accelerator object carries its registry: its host link resolves there, no registry= needed.
    same = _size(accelerator=registry.accelerator("my-gpu"))
    assert same.gpus == plan.gpus and same.cost_per_hour == plan.cost_per_hour
    # The default registry knows nothing of it.
    with pytest.raises(KeyError, match="my-gpu"):
        _size()
    predicted = predict_benchmark("llama-3.1-8b", "my-gpu", "fp8", 1, 1024, 256, 16, registry=registry)
    assert predicted.measured_kernels is False and predicted.tpot.m_as("ms") > 0
    # The plan records the user file, so its simulation (in worker processes too) resolves the ids.
    check = verify_plan(plan, seeds=2, requests=3000)
    assert check.simulated_replicas is not None


def test_a_user_registry_sizes_and_simulates_from_the_cli(user_file, tmp_path):
    runner = CliRunner()
    args = ["llama-3.1-8b", "--rate", "20", "--input", "1024", "--output", "256", "--ttft", "1 s", "--tpot", "50 ms",
            "-a", "my-gpu", "--extra", str(user_file)]  # fmt: skip
    sized = runner.invoke(app, ["size", *args, "--json"])
    assert sized.exit_code == 0, sized.output
    plan = json.loads(sized.stdout)
    assert plan["accelerator"] == "my-gpu" and plan["cost_per_hour"]["value"] == pytest.approx(plan["gpus"] * 2.75)
    (tmp_path / "plan.json").write_text(sized.stdout, encoding="utf-8")
    simulated = runner.invoke(
        app, ["simulate", "--plan", str(tmp_path / "plan.json"), "--requests", "2000", "--seeds", "1"]
    )
    assert simulated.exit_code == 0, simulated.output
    frontier = runner.invoke(app, ["frontier", "llama-3.1-8b", "--input", "512", "--output", "128", "-a", "my-gpu",
                                   "--extra", str(user_file), "--json"])  # fmt: skip
    assert frontier.exit_code == 0 and {row["accelerator"] for row in json.loads(frontier.stdout)} == {"my-gpu"}
    missing = runner.invoke(app, ["size", *args[:-2]])
    assert missing.exit_code == 2 and "my-gpu" in missing.output
