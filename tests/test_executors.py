"""Seeds and sweep points through an executor: a real dask cluster gives the in-process results.

Issue 24, item 10: ``simulate`` and ``verify_plan`` run their seeds, and ``sweep_fleet`` its points,
through any :class:`concurrent.futures.Executor`. The cluster here is a ``dask.distributed``
``LocalCluster`` of two worker processes (the tasks and their results are pickled, as on a remote
cluster), started once for the module and closed at its end.
"""

from __future__ import annotations

from concurrent.futures import Executor, ThreadPoolExecutor

import pandas as pd
import pytest

from calculator import Q_
from calculator.errors import InputError
from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
from calculator.registry import load_registry
from calculator.simulation import SimulationSetup, Traffic, simulate, verify_plan
from calculator.sweeps import sweep_fleet

TARGETS = Targets(Q_(1, "s"), Q_(50, "ms"))

SETUP = SimulationSetup("llama-3.1-8b", "h100-sxm", "fp8", engine="vllm")
TRAFFIC = Traffic(Q_(20, "request/s"), 512, 128, input_cv=0.5, requests=300)
SWEEP = ("llama-3.1-8b", ["h100-sxm", "h200-sxm"], "fp8", Q_([2, 40], "request/s"), [512, 2048], 256,
         Q_(1, "s"), Q_(50, "ms"))  # fmt: skip


class Counting(Executor):
    """An executor that hands every task to another and counts them (to see that the cluster ran them)."""

    def __init__(self, inner: Executor) -> None:
        self.inner, self.submitted = inner, 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return self.inner.submit(fn, *args, **kwargs)


@pytest.fixture(scope="module")
def dask_executor():
    """A dask executor over a local cluster of two single-threaded worker processes."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local,
        distributed.Client(local) as client,
    ):
        yield client.get_executor()


@pytest.fixture
def cluster(dask_executor):
    """The cluster's executor, counting the tasks each test sends it."""
    return Counting(dask_executor)


def test_seeds_on_a_dask_cluster_equal_the_in_process_run(cluster):
    on_cluster = simulate(SETUP, TRAFFIC, seeds=[4, 5], executor=cluster)
    with ThreadPoolExecutor(2) as threads:
        in_process = simulate(SETUP, TRAFFIC, seeds=[4, 5], executor=threads)
    pd.testing.assert_frame_equal(on_cluster.requests, in_process.requests)
    pd.testing.assert_frame_equal(on_cluster.summary, in_process.summary)
    assert on_cluster.seeds == (4, 5) and set(on_cluster.requests.seed) == {4, 5}
    assert cluster.submitted == 2  # one task per seed


def test_a_plan_verified_on_a_dask_cluster_equals_the_in_process_check(cluster):
    plan = size_fleet("llama-3.1-8b", Workload(Q_(30, "request/s"), 512, 128), TARGETS, SearchSpace("h100-sxm", "fp8"))
    on_cluster = verify_plan(plan, requests=600, seeds=2, executor=cluster)
    with ThreadPoolExecutor(2) as threads:
        in_process = verify_plan(plan, requests=600, seeds=2, executor=threads)
    pd.testing.assert_frame_equal(on_cluster.table, in_process.table)
    assert on_cluster.simulated_replicas == in_process.simulated_replicas
    assert on_cluster.verdict == in_process.verdict
    assert cluster.submitted == 2 * len(on_cluster.results)  # two seeds per replica count simulated


def test_a_fleet_sweep_on_a_dask_cluster_equals_the_in_process_sweep(cluster):
    on_cluster = sweep_fleet(*SWEEP, executor=cluster)
    in_process = sweep_fleet(*SWEEP)
    assert len(on_cluster) == 8 and on_cluster["feasible"].all()
    pd.testing.assert_frame_equal(on_cluster, in_process)
    assert on_cluster.attrs["provenance"].registry_ids == in_process.attrs["provenance"].registry_ids
    assert cluster.submitted == 8  # one task per point


def test_workers_resolve_ids_in_the_users_registry_files(cluster):
    # The registry object does not pickle; the workers load the same user file by its path.
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "my_registry.yaml"
    registry = load_registry(extra=[example])
    grid = ("llama-3.1-8b", "example-gpu", "fp8", Q_([5, 20], "request/s"), 1024, 256, Q_(1, "s"), Q_(50, "ms"))
    on_cluster = sweep_fleet(*grid, registry=registry, executor=cluster)
    pd.testing.assert_frame_equal(on_cluster, sweep_fleet(*grid, registry=registry))
    assert (on_cluster["cost.per_hour [USD/h]"] == on_cluster["gpus"] * 2.75).all()
    assert cluster.submitted == 2


@pytest.mark.parametrize("executor", ["processes", 4, ThreadPoolExecutor])
def test_an_executor_that_is_not_one_is_an_error_naming_it(executor):
    with pytest.raises(InputError, match=r"simulate\(\): argument 'executor' must be a concurrent.futures.Executor"):
        simulate(SETUP, TRAFFIC, executor=executor)
    plan = size_fleet("llama-3.1-8b", Workload(Q_(5, "request/s"), 512, 128), TARGETS, SearchSpace("h100-sxm", "fp8"))
    with pytest.raises(InputError, match=r"verify_plan\(\): argument 'executor'"):
        verify_plan(plan, requests=100, seeds=1, executor=executor)
    with pytest.raises(InputError, match=r"sweep_fleet\(\): argument 'executor'"):
        sweep_fleet(*SWEEP, executor=executor)


def test_a_sweep_through_an_executor_takes_no_progress_callback():
    with ThreadPoolExecutor(1) as threads, pytest.raises(InputError, match="'progress' reports from this process"):
        sweep_fleet(*SWEEP, executor=threads, progress=lambda done, total: None)
