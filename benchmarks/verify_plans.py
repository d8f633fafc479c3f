"""Check the fleet sizer's plans by simulation on varied scenarios (the table in ``docs/simulation.md``).

For each scenario: ``size_fleet`` (analytical), then ``verify_plan`` (simulation, 2 seeds): does the
plan meet its targets in simulation, and does one replica fewer miss them (a tight plan)?

Run from the repository root: ``python benchmarks/verify_plans.py [--markdown] [--max-utilization=0.8]``
(about 2-3 minutes).
"""

import sys
import time

sys.path.insert(0, ".")

from calculator.fleet import Costs, SearchSpace, ServingOptions, Targets, Workload, size_fleet
from calculator.simulation import verify_plan
from calculator.units import Q_

# model, accelerator, precision, rate (req/s), input, output, TTFT target (ms), TPOT target (ms),
# TTFT percentile (None: mean), engine (None: generic), router, input CV, output CV
SCENARIOS = [
    ("llama-3.1-8b", "h100-sxm", "fp8", 20, 1024, 256, 500, 30, None, None, "round_robin", 0.0, 0.0),
    ("llama-3.1-8b", "h100-sxm", "fp8", 60, 2048, 256, 1000, 40, 0.99, "vllm", "round_robin", 0.5, 0.5),
    ("llama-3.1-70b", "h100-sxm", "fp8", 10, 1024, 256, 1000, 50, None, "vllm", "random", 0.0, 0.0),
    ("llama-3.1-70b", "h200-sxm", "bf16", 5, 2048, 512, 2000, 60, 0.9, "sglang", "round_robin", 0.5, 0.5),
    ("qwen3-32b", "h100-sxm", "fp8", 30, 512, 512, 800, 40, 0.99, "trtllm", "join_shortest_queue", 0.5, 1.0),
    ("llama-3.1-8b", "a100-sxm-80gb", "bf16", 40, 1024, 128, 600, 50, 0.9, "vllm", "power_of_two", 0.5, 0.5),
    ("qwen3-8b", "h200-sxm", "fp8", 200, 1024, 128, 500, 25, None, None, "least_outstanding_tokens", 1.0, 1.0),
    ("llama-3.1-70b", "h100-sxm", "fp8", 20, 4096, 256, 3000, 60, 0.99, "vllm", "random", 0.5, 0.5),
    ("qwen3-30b-a3b", "h100-sxm", "fp8", 40, 1024, 512, 1000, 30, None, "vllm", "round_robin", 0.5, 0.5),
    ("llama-3.1-8b", "l40s", "fp8", 10, 1024, 256, 1000, 60, 0.9, None, "round_robin", 0.5, 0.5),
    ("mistral-7b", "h100-sxm", "bf16", 100, 512, 256, 300, 25, 0.99, "vllm", "join_shortest_queue", 0.8, 0.8),
    ("llama-3.1-8b", "b200-sxm", "fp8", 150, 2048, 512, 800, 20, 0.9, "trtllm", "round_robin", 0.5, 0.5),
    ("llama-3.1-70b", "b200-sxm", "fp8", 30, 1024, 512, 1500, 40, None, "sglang", "random", 0.5, 0.5),
    ("qwen3-14b", "h100-sxm", "bf16", 25, 3000, 300, 2000, 40, 0.99, None, "power_of_two", 0.5, 0.5),
    ("llama-3.1-8b", "h100-sxm", "bf16", 5, 8192, 128, 2000, 40, 0.9, "vllm", "round_robin", 0.3, 0.5),
    ("qwen3-32b", "h200-sxm", "fp8", 15, 1024, 1024, 1000, 35, None, "vllm", "least_outstanding_tokens", 0.5, 1.0),
    ("llama-3.1-8b", "h100-sxm", "fp8", 100, 256, 64, 200, 20, 0.99, "sglang", "round_robin", 0.5, 0.5),
    ("llama-3.1-70b", "h200-sxm", "fp8", 50, 2048, 256, 2000, 60, 0.9, "trtllm", "join_shortest_queue", 0.5, 0.5),
    ("qwen3-8b", "l40s", "fp8", 20, 512, 256, 800, 50, None, "vllm", "random", 0.5, 0.5),
    ("llama-3.1-8b", "h100-sxm", "fp8", 80, 1024, 256, 600, 30, 0.99, None, "random", 0.5, 0.5),
    # Mixtures of experts at scale: attention ranks on one node, and a model larger than one node.
    ("deepseek-v3", "h200-sxm", "fp8", 100, 1024, 1024, 5000, 100, None, "trtllm", "round_robin", 0.5, 0.5),
    ("deepseek-v3", "h100-sxm", "fp8", 50, 1024, 256, 2000, 60, None, "sglang", "least_outstanding_tokens", 0.5, 0.5),
]


def _why(plan, check) -> str:
    """Why the simulated minimum differs from the plan (empty when they agree)."""
    simulated, replicas = check.simulated_replicas, plan.replicas
    if simulated == replicas:
        return ""
    if simulated is not None and simulated < replicas:
        fewer = plan.service.utilization * replicas / (replicas - 1)
        if fewer > plan.max_utilization:
            return (
                f"headroom: {replicas - 1} replicas would run at {fewer:.2f} of the cap's throughput, "
                f"above max_utilization {plan.max_utilization}"
            )
        return "the closed forms are conservative here"
    row = check.table[check.table.replicas == replicas].iloc[0]
    return f"the closed forms are optimistic here: {row.verdict}"


def main(markdown: bool = False, max_utilization: float = 0.8) -> None:
    rows = []
    for scenario in SCENARIOS:
        model, gpu, precision, rate, inputs, outputs, ttft, tpot, pct, engine, router, icv, ocv = scenario
        start = time.perf_counter()
        plan = size_fleet(
            model,
            Workload(Q_(rate, "request/s"), inputs, outputs, input_cv=icv, output_cv=ocv),
            Targets(Q_(ttft, "ms"), Q_(tpot, "ms"), ttft_percentile=pct, max_utilization=max_utilization),
            SearchSpace(gpu, precision),
            engine=engine,
            serving=ServingOptions(router=router),
            costs=Costs(Q_(3, "USD/hour")),
        )
        if not plan.feasible:
            rows.append((scenario, None, None, plan.reason, time.perf_counter() - start))
            continue
        check = verify_plan(plan, seeds=2)
        rows.append((scenario, plan, check, "", time.perf_counter() - start))
        print(f"{model} {gpu} {precision} {rate}/s: {check.verdict} ({rows[-1][-1]:.0f} s)", file=sys.stderr)
    meets = sum(1 for r in rows if r[2] is not None and r[2].meets_targets)
    tight = sum(1 for r in rows if r[2] is not None and r[2].meets_targets and r[2].tight)
    checked = sum(1 for r in rows if r[2] is not None)
    if markdown:
        print("| Scenario | Targets | Router | Plan | Simulated minimum | Meets | Tight | Binding | Why they differ |")
        print("|---|---|---|---|---|---|---|---|---|")
    for scenario, plan, check, reason, _ in rows:
        model, gpu, precision, rate, inputs, outputs, ttft, tpot, pct, engine, router, icv, ocv = scenario
        name = f"{model} {precision} on {gpu}, {engine or 'generic'}, {rate}/s, {inputs}/{outputs} (CV {icv}/{ocv})"
        target = f"{'mean' if pct is None else f'p{pct * 100:g}'} {ttft} ms, TPOT {tpot} ms"
        if check is None:
            print(f"| {name} | {target} | {router} | infeasible: {reason} | | | | | |")
            continue
        parts = plan.layout
        layout = "".join(
            f", {label} {value}"
            for label, value in (
                ("DP", parts.data_parallel),
                ("EP", parts.expert_parallel),
                ("PP", parts.pipeline_parallel),
            )
            if value > 1
        ) + (f" over {parts.nodes} nodes" if parts.nodes > 1 else "")
        plan_text = f"{plan.replicas} x TP{parts.stage_gpus}{layout} (cap {plan.batch})"
        print(
            f"| {name} | {target} | {router} | {plan_text} | {check.simulated_replicas} | "
            f"{'yes' if check.meets_targets else 'no'} | {'yes' if check.tight else 'no'} | "
            f"{plan.binding_constraint} | {_why(plan, check)} |"
        )
    print(f"\n{checked} plans checked: {meets} meet their targets in simulation, {tight} of them tight.")


if __name__ == "__main__":
    utilization = [float(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--max-utilization=")]
    main("--markdown" in sys.argv, *utilization)
