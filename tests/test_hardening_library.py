"""Issue 57, item 10: library calls that accepted bad values now refuse them with the argument named.

Each case was a reproducer of the fuzz campaign: a NaN capacity gave a batch of -2**63, a negative GPU
count an all-reduce of 0 s, a -1 s round trip an 'ok' failover, a negative pool a negative allocation,
a negative GEMM width or no keys a NaN, ``registry='abc'`` an AttributeError in about 40 functions, a
NaN seed numpy's own error, and an array-valued target "truth value ... ambiguous".
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
from public_calls import public_functions, valid_call

import calculator as c
from calculator import Q_
from calculator.errors import CalculatorError, InputError

# ------------------------------------------------------------------ plain-number building blocks


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ((math.nan, 0.0, 1000.0, 1), "'capacity'"),  # was -9223372036854775808
        ((0.0, -1.0, 1e-6, 1), "'weights'"),  # was a batch of 1,000,000
        ((80e9, 0.0, 1000.0, 0), "'context'"),  # a division by zero
        ((80e9, 0.0, -5.0, 10), "'kv_per_token'"),
    ],
)
def test_max_batch_numeric_refuses_what_has_no_batch(arguments, named):
    from calculator.memory import max_batch_numeric

    with pytest.raises(InputError, match=f"max_batch_numeric\\(\\): argument {named}"):
        max_batch_numeric(*arguments)


def test_a_batch_beyond_what_a_float_counts_is_reported_as_that_bound():
    # 1e300 bytes of memory: the documented cap (2**53), where the int64 cast wrapped to -2**63.
    from calculator._support import MAX_COUNT
    from calculator.memory import max_batch, max_batch_numeric, max_context, memory_fit

    assert max_batch_numeric(1e300, 0.0, 1e-300, 1) == MAX_COUNT
    huge = (Q_(1e300, "B"), Q_(1, "GB"), Q_(1e5, "B/token"))
    assert max_batch(*huge, 100) == max_context(*huge) == MAX_COUNT
    fit = memory_fit(*huge, 100, 1)
    assert fit.max_batch == fit.max_context == MAX_COUNT
    assert max_batch_numeric(-5e9, 0.0, 1000.0, 100) == 0  # weights beyond the memory: nothing fits, not an error


def test_kernel_times_refuse_counts_and_shapes_that_price_nothing():
    from calculator.kernels import allreduce_seconds, collective_seconds, grouped_gemm_seconds, tables_for

    tables = tables_for("h200-sxm")
    with pytest.raises(InputError, match="allreduce_seconds\\(\\): argument 'gpus' must be an integer >= 1"):
        allreduce_seconds(tables, -1, [1e6], 450e9)  # was 0 s
    with pytest.raises(InputError, match="allreduce_seconds\\(\\): argument 'link_bandwidth' must be > 0"):
        allreduce_seconds(tables, 8, [1e6], 0.0)
    with pytest.raises(InputError, match="grouped_gemm_seconds\\(\\): argument 'n' must be > 0"):
        grouped_gemm_seconds(tables, "fp8", 512, -0.5, 4096, 8)  # was NaN
    with pytest.raises(InputError, match="grouped_gemm_seconds\\(\\): argument 'dtype' must be one of"):
        grouped_gemm_seconds(tables, "int3", 512, 4096, 4096, 8)  # was a KeyError
    with pytest.raises(InputError, match="collective_seconds\\(\\): argument 'tables' must be the KernelTables"):
        collective_seconds("h200-sxm", "all_gather", 8, 1e6, 450e9)
    assert np.all(allreduce_seconds(tables, 1, [1e6, 1e9], 450e9) == 0)  # one GPU: no all-reduce, as documented


# ------------------------------------------------------------------ routing, regions, tenancy


def test_failover_refuses_a_negative_or_missing_response_time():
    from calculator.regions import failover_attempts

    regions = ["us-east", "us-west"]
    with pytest.raises(
        InputError, match="failover_attempts\\(\\): argument 'response_times\\['us-east'\\]' must be >= 0"
    ):
        failover_attempts(Q_(6, "s"), regions, {"us-east": Q_(-1, "s")})  # was 'ok'
    with pytest.raises(InputError, match="argument 'budgets\\[0\\]' must be > 0"):
        failover_attempts(Q_(6, "s"), regions, {"us-east": Q_(1, "s")}, budgets=[Q_(-2, "s")])
    ok = failover_attempts(Q_(6, "s"), regions, {"us-east": None, "us-west": Q_(1, "s")})
    assert (ok.region, ok.result) == ("us-west", "ok")  # None still means unavailable


def test_a_bulkhead_never_allocates_a_negative_pool():
    from calculator.tenancy import bulkhead_partition

    rate = "request/s"
    with pytest.raises(
        InputError, match="bulkhead_partition\\(\\): argument 'dedicated\\['enterprise'\\]' must be >= 0"
    ):
        bulkhead_partition(Q_(1000, rate), {"enterprise": Q_(-100, rate)}, {"pro": 0.5})  # was -100 request/s
    with pytest.raises(InputError, match="bulkhead_partition\\(\\): argument 'capacity' must be >= 0"):
        bulkhead_partition(Q_(-1000, rate), {}, {"pro": 0.5})
    parts = bulkhead_partition(Q_(1000, rate), {"enterprise": Q_(400, rate)}, {"pro": 0.7, "free": 0.3})
    assert all(value.magnitude >= 0 for value in parts.values())


def test_the_fraction_of_no_keys_is_refused_not_nan():
    from calculator.routing import ConsistentHashRing, remapped_fraction

    ring = ConsistentHashRing(["a", "b", "c"])
    with pytest.raises(InputError, match="remapped_fraction\\(\\): argument 'keys' must list at least one key"):
        remapped_fraction(ring, ring.with_server("d"), [])  # was NaN
    assert 0 < remapped_fraction(ring, ring.with_server("d"), np.arange(2000)) < 0.5


# ------------------------------------------------------------------ registry= and seed=


def test_a_registry_that_is_not_a_registry_is_named():
    with pytest.raises(
        InputError, match="argument 'registry' must be a Registry \\(load_registry\\(\\)\\) or None, got 'abc'"
    ):
        c.weights_source("llama-3.1-8b", "fp8", "vllm", registry="abc")  # was an AttributeError


def test_every_public_function_taking_registry_refuses_a_string_or_a_number():
    # The shared check (calculator._support.registry_or_none) at every place ids resolve: no AttributeError,
    # and every function that resolved through the bad registry names it.
    refused, problems = [], []
    for name, function in sorted(public_functions().items()):
        call = valid_call(name) if "registry" in inspect.signature(function).parameters else None
        for hostile in ("abc", 42) if call is not None else ():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    function(**{**call, "registry": hostile})
            except CalculatorError as error:
                refused.append(name)
                if "'registry'" not in str(error):
                    problems.append(f"{name}({hostile!r}): {error}")
            except Exception as error:
                problems.append(f"{name}({hostile!r}): {type(error).__name__}: {error}")
    assert not problems, problems
    assert len(set(refused)) >= 40, sorted(set(refused))


@pytest.mark.parametrize("seed", [math.nan, -1, 2**70, 0.5, True, "1"])
def test_a_seed_is_a_whole_number_below_2_to_the_63(seed):
    from calculator.parallelism import simulate_expert_overflow
    from calculator.queueing import arrival_times
    from calculator.routing import ConsistentHashRing, compare_routing_policies, simulate_max_load

    calls = {
        "arrival_times": lambda: arrival_times(Q_(5, "request/s"), 10, seed=seed),
        "simulate_max_load": lambda: simulate_max_load(10, trials=5, seed=seed),
        "simulate_expert_overflow": lambda: simulate_expert_overflow(64, 8, 2, trials=5, seed=seed),
        "ConsistentHashRing": lambda: ConsistentHashRing(["a", "b"], seed=seed),
        "compare_routing_policies": lambda: compare_routing_policies(
            Q_(50, "request/s"), [100], 2, Q_(20, "ms"), Q_(0.2, "ms"), requests=20, seed=seed
        ),
    }
    for name, call in calls.items():
        with pytest.raises(
            InputError, match=f"{name}\\(\\): argument 'seed' must be a whole number in \\[0, 2\\*\\*63\\)"
        ):
            call()


def test_the_seed_checker_takes_whole_numbers_of_any_integer_type():
    from calculator._support import random_seed

    assert [random_seed("f", "seed", v) for v in (0, np.int64(7), 3.0, 2**63 - 1)] == [0, 7, 3, 2**63 - 1]


# ------------------------------------------------------------------ array-valued targets


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: c.Targets(Q_([1, 2], "s"), Q_(50, "ms")), "Targets: 'ttft' must be one time"),
        (lambda: c.Targets(Q_(1, "s"), Q_([50, 60], "ms")), "Targets: 'tpot' must be one time"),
        (
            lambda: c.slo_attainment(Q_([0.1, 0.4], "s"), Q_([0.03, 0.03], "s"), Q_([0.3, 0.5], "s"), Q_(50, "ms")),
            "slo_attainment\\(\\): argument 'ttft_target' must be one number",
        ),
        (
            lambda: c.simulate_dynamic_batching(
                Q_([0, 0.1, 0.2], "s"),
                Q_(10, "ms"),
                4,
                Q_(1, "ms"),
                Q_(1, "ms"),
                slo=Q_([1, 2], "s"),
                control_interval=Q_(1, "s"),
            ),
            "simulate_dynamic_batching\\(\\): argument 'slo' must be one number",
        ),
        (
            lambda: c.reasoning_budget(Q_(100, "ms"), Q_([10, 20], "s"), 128),
            "reasoning_budget\\(\\): argument 'latency_budget' must be one number",
        ),
        (
            lambda: c.pipeline_sustains(Q_([5, 18], "ms"), Q_([20, 30], "ms")),
            "pipeline_sustains\\(\\): argument 'frame_interval' must be one number",
        ),
        (lambda: c.Workload(Q_([5, 6], "request/s"), 1000, 200), "Workload: 'arrival_rate' must be one rate"),
        (
            lambda: c.latency_budget({"network": Q_(1, "ms")}, Q_([1, 2], "ms")),
            "latency_budget\\(\\): argument 'budget' must be one number",
        ),
        (
            lambda: c.uncached_item_latency(Q_(1, "ms"), 0.1, Q_(5, "ms"), Q_([1, 2], "ms")),
            "uncached_item_latency\\(\\): argument 'budget' must be one number",
        ),
        (
            lambda: c.two_tower_freshness(Q_(1, "h"), Q_(1, "min"), Q_([1, 2], "h")),
            "two_tower_freshness\\(\\): argument 'ingestion_target' must be one number",
        ),
        (
            lambda: c.compare_precisions("llama-3.1-8b", Q_([80, 40], "GB"), 4096),
            "compare_precisions\\(\\): argument 'capacity' must be one number",
        ),
        (
            lambda: c.min_tensor_parallel("llama-3.1-8b", Q_([80, 40], "GB"), 4096),
            "min_tensor_parallel\\(\\): argument 'capacity' must be one number",
        ),
        (
            lambda: c.warm_pool(Q_([10, 20], "request/s"), 2, 1.2, Q_(5, "request/s"), Q_(1, "request/s")),
            "warm_pool\\(\\): argument 'baseline_capacity' must be one number",
        ),
    ],
)
def test_an_array_where_one_target_is_meant_is_refused_by_name(call, named):
    # These raised "The truth value of an array with more than one element is ambiguous" (or, for
    # slo_attainment, compared request i with target i and returned a meaningless share).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(InputError, match=named):
            call()
