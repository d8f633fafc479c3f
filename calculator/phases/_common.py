"""Helpers the phases submodules share: the per-device constants of a model on an accelerator."""

from __future__ import annotations

import numpy as np

from .._support import accelerator_of, bits_of, transformer_of
from ..memory import device_share
from ..precision import bits_per_element, check_precision
from .flops import attention_flops_per_pair

__all__: list[str] = []


def _device_setup(
    function, model, accelerator, precision, tensor_parallel, weight_bits, kv_precision, *, registry=None
):
    """Per-device constants of a model on an accelerator (magnitudes; no batch/context yet)."""
    resolved = transformer_of(model, function, registry=registry)
    device = accelerator_of(accelerator, registry=registry)
    compute = check_precision(precision)
    bits = bits_per_element(compute) if weight_bits is None else bits_of(function, "weight_bits", weight_bits)
    share = device_share(resolved, tensor_parallel, bits, kv_precision)
    return {
        "model": resolved,
        "degree": np.asarray(share.tensor_parallel, dtype=float),
        "weights": share.weights.m_as("B"),
        "kv_per_token": share.kv_per_token.m_as("B/token"),
        "attention": attention_flops_per_pair(resolved).m_as("FLOP"),
        "peak": device.peak_throughput(compute).m_as("FLOP/s"),
        "bandwidth": device.memory_bandwidth.m_as("B/s"),
    }
