"""Spread output lengths in the closed-loop predictor: the running sequences' context is length-biased.

A request is among the running sequences for as long as it decodes, so where the output lengths spread the longer
ones are more often there: the batch's mean context is ``I + E[O^2] / 2 E[O]``, ``I + O (1 + cv^2) / 2``, as the
sizer's ``Workload.held_context`` has it. The simulator, which draws every request's length, is the check.
"""

import warnings

import pytest

from calculator.performance import predict_benchmark
from calculator.simulation import SimulationSetup, Traffic, simulate

#: Llama-3.1-8B BF16 on one H100 under SGLang, 64 clients of 256-token prompts and 2,048-token outputs: long outputs,
#: so that the KV the decode reads is about a third of its step.
CASE = ("llama-3.1-8b", "h100-sxm", "bf16", 1)
CLIENTS, PROMPT, OUTPUT = 64, 256, 2048


def _simulated_tpot(cv: float) -> float:
    # 32 requests a client: the run's last requests, which decode beside fewer others, weigh little
    traffic = Traffic(
        clients=CLIENTS, input_tokens=PROMPT, output_tokens=OUTPUT, requests=32 * CLIENTS, input_cv=cv, output_cv=cv
    )
    return simulate(SimulationSetup(*CASE, engine="sglang"), traffic).value("tpot").m_as("s")


def test_the_predicted_tpot_follows_the_simulated_one_as_the_lengths_spread():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        narrow, wide = (
            predict_benchmark(*CASE, PROMPT, OUTPUT, CLIENTS, "sglang", length_cv=cv).tpot.m_as("s")
            for cv in (0.1, 1.0)
        )
        simulated_narrow, simulated_wide = _simulated_tpot(0.1), _simulated_tpot(1.0)
    # at cv 1 the running sequences hold 256 + 2,048 tokens on average instead of 256 + 1,024
    assert wide > 1.1 * narrow and simulated_wide > 1.1 * simulated_narrow
    assert narrow == pytest.approx(simulated_narrow, rel=0.05)
    assert wide == pytest.approx(simulated_wide, rel=0.06)  # was 15 % under it with the unbiased mean


def test_identical_requests_in_waves_have_no_spread_to_bias_the_context():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain, given = (
            predict_benchmark(*CASE, PROMPT, OUTPUT, CLIENTS, "sglang", arrivals="waves", length_cv=cv)
            for cv in (None, 1.0)
        )
    assert given.tpot.m_as("s") == pytest.approx(plain.tpot.m_as("s"), rel=1e-12)
