"""AMD GPUs' scale-up domain: a fully connected Infinity Fabric mesh, one link between each pair of GPUs."""

from __future__ import annotations

import textwrap

import pytest
from test_registry import MINIMAL, error_for, write

from calculator import kernels
from calculator.kernels import collective_seconds, generic_efficiency
from calculator.performance import predict_benchmark, step_arrays
from calculator.performance.iteration import _collective_seconds
from calculator.registry import load_registry


def test_the_amd_gpus_scale_up_over_their_infinity_fabric_mesh():
    reg = load_registry()
    for accelerator, per_link in (("mi300x", 64e9), ("mi325x", 64e9), ("mi355x", 76.8e9)):
        device = reg.accelerators[accelerator]
        assert device.nvlink_bandwidth is None and device.scale_up_links == 7 and device.node_gpus == 8
        a = step_arrays("llama-3.1-70b", accelerator, "fp8")
        assert a.link_bandwidth == pytest.approx(per_link) and a.mesh_links == 7 and a.node_gpus == 8
    # NVLink is a switch: every GPU count moves at the GPU's NVLink bandwidth.
    assert step_arrays("llama-3.1-70b", "h100-sxm", "fp8").mesh_links == 0


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_a_collective_over_k_gpus_of_the_mesh_moves_on_k_minus_1_links(gpus):
    a = step_arrays("llama-3.1-70b", "mi300x", "fp8")
    generic = generic_efficiency()
    size = 64e6  # bytes: the ring term dwarfs the latency floor
    priced = float(_collective_seconds(a, gpus, size))
    # the generic ring at the achieved fraction, each GPU sending its peers' shares over gpus - 1 links of 64 GB/s
    expected = generic["allreduce_floor"] + 2 * (gpus - 1) / gpus * size / (
        generic["allreduce_fraction"] * 64e9 * (gpus - 1)
    )
    assert priced == pytest.approx(expected, rel=1e-12)
    # the public function, given one link, is the switched price: (gpus - 1) times slower for the same bytes
    switched = float(collective_seconds(a.tables, "all_reduce", gpus, size, 64e9))
    assert switched - generic["allreduce_floor"] == pytest.approx((expected - generic["allreduce_floor"]) * (gpus - 1))


def test_tensor_parallelism_on_eight_mi300x_is_no_longer_priced_over_pcie():
    # Before the mesh, a GPU-to-GPU collective of the MI300X ran on its 64 GB/s PCIe host link whatever the count.
    eight = predict_benchmark("llama-3.1-70b", "mi300x", "fp8", 8, 1024, 1024, 256, "vllm")
    two = predict_benchmark("llama-3.1-70b", "mi300x", "fp8", 2, 1024, 1024, 256, "vllm")
    h100 = predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 8, 1024, 1024, 256, "vllm")
    # TP 8 on the mesh (7 links, 448 GB/s a direction) is near NVLink's 450 GB/s: within the kernels' difference.
    assert eight.tpot < 1.3 * h100.tpot
    # TP 2 has one link between the pair: its all-reduces are seven times slower per byte than TP 8's.
    a = step_arrays("llama-3.1-70b", "mi300x", "fp8")
    per_byte = [float(_collective_seconds(a, t, 1e9)) for t in (2, 8)]
    assert per_byte[0] > 3 * per_byte[1]
    assert two.tpot > eight.tpot


MESH = textwrap.dedent(
    """
    interconnects:
      - id: fabric
        name: A fabric link
        scope: intra_node
        provenance: published
        bandwidth: 64 GB/s
        sources:
          - {source: sheet, fields: [bandwidth]}
    """
)


def mesh_registry(extra_fields):
    gpu = "    tdp: 700 W\n" + "".join(f"    {line}\n" for line in extra_fields)
    text = MINIMAL.replace("    tdp: 700 W\n", gpu, 1) + MESH
    fields = ", ".join(f.split(":")[0] for f in extra_fields)
    return text.replace(
        "[memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]",
        f"[memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp, {fields}]",
    )


def test_a_user_mesh_loads_and_prices_its_links(tmp_path):
    reg = load_registry(write(tmp_path, mesh_registry(["scale_up: fabric", "scale_up_links: 3", "node_gpus: 4"])))
    device = reg.accelerators["gpu-x"]
    a = step_arrays("model-x", device, "bf16", registry=reg)
    assert a.mesh_links == 3 and a.link_bandwidth == pytest.approx(64e9)
    assert not kernels.tables_for(device, registry=reg).anchors


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (["scale_up: nowhere", "scale_up_links: 3", "node_gpus: 4"], "field 'scale_up': expected the id of an intra_node"),
        (["scale_up: fabric", "node_gpus: 4"], "field 'scale_up_links': required with a 'scale_up' mesh"),
        (["scale_up: fabric", "scale_up_links: 3"], "field 'node_gpus': required with a 'scale_up' mesh"),
        (["scale_up: fabric", "scale_up_links: 2", "node_gpus: 4"], "needs at least 3 links per GPU, found 2"),
        (["scale_up_links: 3"], "field 'scale_up_links': given without a 'scale_up' interconnect"),
        (["scale_up: fabric", "scale_up_links: 3", "node_gpus: 4", "nvlink_bandwidth: 450 GB/s"], "takes nvlink_bandwidth, not a mesh"),
    ],
)  # fmt: skip
def test_a_mesh_that_cannot_be_priced_is_refused_naming_its_field(tmp_path, fields, message):
    text = error_for(tmp_path, mesh_registry(fields))
    assert "accelerators['gpu-x']" in text and message in text
