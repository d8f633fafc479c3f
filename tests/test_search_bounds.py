"""The fleet sizer bounds before it evaluates: its bounds are lower bounds, and its plan is the exhaustive one."""

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from calculator import Q_
from calculator.fleet import (
    Costs,
    SearchSpace,
    ServingOptions,
    Speculation,
    Targets,
    Workload,
    search,
    size_fleet,
)
from calculator.fleet.evaluate import _evaluate, _Grid, _Latencies, _occupancy, _rate_bound, _StepGrid
from calculator.fleet.families import _families
from calculator.fleet.problem import _Problem
from calculator.performance import engine_profile
from calculator.registry import load_registry

_spec = importlib.util.spec_from_file_location(
    "bench_fleet", Path(__file__).parents[1] / "benchmarks" / "bench_fleet.py"
)
bench_fleet = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_fleet)


@dataclasses.dataclass(frozen=True)
class _Exhaustive(search._Search):
    exhaustive: bool = True


def _both(monkeypatch, model, workload, targets, space, **kwargs):
    """The plan of the bounded search and of the exhaustive one (every candidate evaluated)."""
    pruned = size_fleet(model, workload, targets, space, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(search, "_Search", _Exhaustive)
        full = size_fleet(model, workload, targets, space, **kwargs)
    return pruned, full


def _assert_same_plan(pruned, full):
    """Every field the same, every rejection the same but those the bounds left, which the exhaustive search confirms."""
    assert dataclasses.replace(pruned, rejected={}, rejections=()) == dataclasses.replace(
        full, rejected={}, rejections=()
    )
    assert list(pruned.rejected) == list(full.rejected)  # the same families, in the same order
    exhaustive = {r.family: r for r in full.rejections}
    for rejection in pruned.rejections:
        other = exhaustive[rejection.family]
        if rejection.code != "bound":
            assert rejection == other and pruned.rejected[rejection.family] == full.rejected[rejection.family]
            continue
        assert pruned.feasible  # only a plan found can leave a family unevaluated
        if other.code == "costlier":  # feasible: it costs at least its bound, and no less than the plan
            assert other.values["gpus"] >= rejection.values["gpus"]
            assert other.values["cost_per_hour"] >= rejection.values["cost_per_hour"] >= pruned.cost.per_hour
    return sum(r.code == "bound" for r in pruned.rejections)


@pytest.mark.parametrize("case", sorted(bench_fleet.CASES))
def test_the_bounded_search_plans_as_the_exhaustive_one_on_the_benchmark_grids(monkeypatch, case):
    model, workload, targets, space, kwargs = bench_fleet.CASES[case]
    pruned, full = _both(monkeypatch, model, workload, targets, space, **kwargs)
    assert pruned.feasible and pruned.candidates > 90_000
    bounded = _assert_same_plan(pruned, full)
    assert bounded > len(pruned.rejections) / 2  # the bounds leave most rows unevaluated


SMALL = tuple(range(1, 257, 3))
TRAFFIC = Workload(Q_(20, "request/s"), 1024, 256, input_cv=0.5, output_cv=0.5)


@pytest.mark.parametrize(
    ("model", "targets", "space", "kwargs"),
    [
        # nothing is feasible: every row is evaluated, the closest values and the reasons as before
        ("llama-3.1-70b", Targets(Q_(1, "s"), Q_(4, "ms")), SearchSpace(["h100-sxm", "h200-sxm"], ["fp8"], batches=SMALL), {}),
        ("llama-3.1-70b", Targets(Q_(30, "ms"), Q_(50, "ms")), SearchSpace(["h100-sxm", "l40s"], ["fp8", "int4"], batches=SMALL), {}),
        # tight targets at a percentile with a token gap, the registry's prices (a price per accelerator)
        ("llama-3.1-70b", Targets(Q_(400, "ms"), Q_(30, "ms"), tbt=Q_(120, "ms"), ttft_percentile=0.99),
         SearchSpace(["h100-sxm", "h200-sxm", "b200-sxm", "mi300x"], ["fp8", "int4"], batches=SMALL), {}),
        ("llama-3.1-8b", Targets(Q_(300, "ms"), Q_(15, "ms"), ttft_percentile=0.9, max_utilization=0.6),
         SearchSpace(["h100-sxm", "a100-sxm-80gb", "l40s"], ["bf16", "fp8"], batches=SMALL), {"engine": "vllm"}),
        # a prefill-first engine, an engine that does not chunk, speculation, a prefix cache, a random router
        ("llama-3.1-70b", Targets(Q_(1, "s"), Q_(50, "ms")), SearchSpace(["h100-sxm", "h200-sxm"], ["fp8", "bf16"], batches=SMALL),
         {"engine": "sglang", "costs": Costs({"h100-sxm": Q_(4, "USD/hour"), "h200-sxm": Q_(5, "USD/hour")})}),
        ("llama-3.1-8b", Targets(Q_(1, "s"), Q_(40, "ms")), SearchSpace(["h100-sxm", "l40s"], ["fp8"], batches=SMALL),
         {"engine": "trtllm", "serving": ServingOptions(speculation=Speculation("llama-3.2-1b", 3, 0.6))}),
        ("llama-3.1-70b", Targets(Q_(2, "s"), Q_(60, "ms"), ttft_percentile=0.95), SearchSpace(["h200-sxm", "b200-sxm"], ["fp8"], batches=SMALL),
         {"serving": ServingOptions(prefix_hit_rate=0.5, shared_prefix_tokens=512, router="random")}),
    ],
)  # fmt: skip
def test_the_bounded_search_plans_as_the_exhaustive_one_on_tight_and_infeasible_targets(
    monkeypatch, model, targets, space, kwargs
):
    pruned, full = _both(monkeypatch, model, TRAFFIC, targets, space, **kwargs)
    bounded = _assert_same_plan(pruned, full)
    if not pruned.feasible:
        assert bounded == 0 and pruned.reason == full.reason and pruned.closest == full.closest


def _random_families(count, seed=7):
    """(family, profile, workload, serving) drawn at random: models, accelerators, precisions, engines, lengths."""
    rng = np.random.default_rng(seed)
    reg = load_registry()
    models = ["llama-3.1-8b", "llama-3.1-70b", "qwen3-235b-a22b", "mixtral-8x7b"]
    accelerators = ["h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200-sxm", "l40s", "mi300x"]
    for _ in range(count):
        model = reg.model(str(rng.choice(models)))
        profile = engine_profile(rng.choice([None, "vllm", "sglang", "trtllm"]), reg)
        precision = str(rng.choice(["bf16", "fp8", "int4"]))
        space = SearchSpace(str(rng.choice(accelerators)), precision, moe_layouts=("tensor", "expert", "attention-dp"))
        serving = ServingOptions(
            speculation=Speculation("llama-3.2-1b", 3, 0.7)
            if rng.random() < 0.2 and model.id.startswith("llama")
            else None,
            chunk_size=int(rng.choice([512, 2048])) if rng.random() < 0.3 else None,
        )
        workload = Workload(
            Q_(float(rng.uniform(0.5, 200)), "request/s"), float(rng.integers(64, 8192)), float(rng.integers(2, 2048)),
            input_cv=float(rng.choice([0.0, 0.5, 1.0])),
        )  # fmt: skip
        families = _families(model, space, Costs(Q_(1, "USD/hour")), serving.speculation, reg, profile)
        yield families[int(rng.integers(len(families)))], profile, workload, serving


def test_the_decode_only_rate_bounds_every_caps_rate_for_random_families():
    # The bound the search prunes with: a replica's rate at a cap is at most its decode steps' alone, so the
    # replicas it needs are at least the bound's. It must hold at every cap, not only near the plan.
    checked = 0
    for family, profile, workload, serving in _random_families(40):
        tp, batch = np.meshgrid([1.0, 2.0, 4.0, 8.0], [1.0, 3.0, 16.0, 100.0, 256.0, 1024.0], indexing="ij")
        tp, batch = family.stage_tp(tp), family.caps(family.stage_tp(tp), batch)
        e = _evaluate(family, profile, workload, tp, batch, serving, max_utilization=0.8)
        bound = _rate_bound(family, profile, workload, tp, batch, serving)
        assert np.all(e.rate <= bound), (family.accelerator, family.precision, profile.name, workload)
        # and it is a bound, not the rate: the prompts' share of each iteration is what it leaves out
        assert np.all(e.rate[e.fits] < bound[e.fits])
        checked += int(e.fits.sum())
    assert checked > 100


def test_the_occupancy_by_running_sums_is_the_birth_death_table():
    # The running batch's distribution as a table per candidate (the sizer's former computation, written
    # out here with products instead of logs) against the running log-sum-exps per load
    batch = np.array([1.0, 4.0, 16.0, 64.0, 200.0])
    rate = np.array([0.5, 1.8, 6.0, 15.0, 22.0])
    caps = np.array([4.0, 16.0, 64.0, 200.0, 200.0, 16.0, 16.0])
    load = np.array([1.5, 1.5, 12.0, 12.0, 21.0, 5.0, 7.0])  # the last beyond its cap's rate: unstable
    mean, wait, full, drain = _occupancy(batch, rate, caps, load)
    assert mean[-1] == wait[-1] == np.inf and full[-1] == 1 and drain[-1] == pytest.approx(6.0 - 7.0)
    for k in range(len(caps) - 1):
        cap, lam = int(caps[k]), load[k]
        n = np.arange(cap + 1)
        mu = np.interp(n[1:], batch, rate)
        p = np.concatenate(([1.0], np.cumprod(lam / mu)))  # P(n) / P(0)
        rho = lam / mu[-1]
        tail = p[-1] * rho / (1 - rho)  # the waiting states beyond the cap
        total = p.sum() + tail
        assert mean[k] == pytest.approx(((n * p).sum() + cap * tail) / total, rel=1e-10)
        assert full[k] == pytest.approx((p[-1] + tail) / total, rel=1e-10)
        assert wait[k] == pytest.approx(p[-1] * rho / (1 - rho) ** 2 / total / lam, rel=1e-10)
        assert drain[k] == pytest.approx(mu[-1] - lam)


def test_a_candidates_latencies_do_not_depend_on_which_others_are_evaluated_with_it():
    # The search evaluates a row's caps a few cost levels at a time; the exhaustive search all at once. The
    # plans agree only if each candidate's values are the same bit for bit either way.
    reg = load_registry()
    profile = engine_profile("vllm", reg)
    space = SearchSpace("h100-sxm", "fp8")
    (family,) = _families(reg.model("llama-3.1-70b"), space, Costs(Q_(1, "USD/hour")), None, reg, profile)
    tp, batch = np.meshgrid([2.0, 4.0], np.arange(1.0, 400.0, 3.0), indexing="ij")
    grid = _Grid(_StepGrid(family, profile, TRAFFIC, tp, batch, ServingOptions(), 0.9, (1.0, 1.0)), 0.8, 20.0)
    whole = grid.latencies(np.ones(batch.shape, dtype=bool))
    rng = np.random.default_rng(3)
    pieces = _Latencies.empty(batch.shape)
    order = rng.permutation(batch.size)
    for part in np.array_split(order, 7):  # seven random subsets, one after another
        where = np.zeros(batch.size, dtype=bool)
        where[part] = True
        grid.latencies(where.reshape(batch.shape), pieces)
    for name in ("tpot", "ttft", "tbt_max", "running"):
        assert np.array_equal(getattr(pieces, name), getattr(whole, name)), name
    assert np.isfinite(whole.ttft).any() and len(np.unique(grid.sized.replicas)) > 5  # several loads per row


def test_progress_counts_every_family_once_whether_evaluated_bounded_or_rejected():
    calls = []
    space = SearchSpace(["h100-sxm", "h200-sxm", "l40s"], ["bf16", "fp8"], batches=SMALL)
    problem = _Problem.of("llama-3.1-70b", TRAFFIC, Targets(Q_(1, "s"), Q_(50, "ms")), space)
    plan = search._size(problem, progress=lambda done, total: calls.append((done, total)))
    assert plan.feasible and any(r.code == "bound" for r in plan.rejections)
    assert calls == [(done, 6) for done in range(1, 7)]
