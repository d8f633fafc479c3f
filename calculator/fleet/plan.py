"""The fleet sizer's answer: the plan, why each family is not it, and the plan in a line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..results import Result
from ..simulation.inputs import DEFAULT_ROUTER
from ..units import shown

__all__ = ["FleetPlan", "Rejection", "plan_summary"]


# --------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True, repr=False)
class Rejection(Result):
    """Why one (accelerator, precision, TP) family is not the plan: a reason code and its values.

    Attributes
    ----------
    family : str
        ``accelerator/precision/tpN``.
    accelerator, precision : str
    tensor_parallel : int
    code : str
        ``"memory"`` (the weights leave no room for one sequence's KV cache), ``"tpot"``, ``"ttft"``
        or ``"tbt"`` (no batch cap meets that target), ``"joint"`` (each target is met by some cap,
        none meets all), ``"fleet_size"`` (the load needs more GPUs than the sizer plans, ``MAX_FLEET_GPUS``)
        or ``"costlier"`` (feasible, but not the cheapest).
    values : dict
        The numbers behind the code: ``weights_per_device`` and ``usable_per_device`` (memory), the
        ``best`` value reached and the ``target`` (tpot, ttft), or ``gpus``, ``batch`` and
        ``cost_per_hour`` (costlier).
    """

    family: str
    accelerator: str
    precision: str
    tensor_parallel: int
    code: str
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The reason in a sentence, as the front ends show it."""
        v = self.values
        if self.code == "memory":
            return (
                f"memory: {v['weights_per_device'].m_as('GB'):.1f} GB of weights per device leave no room for one "
                f"sequence's KV cache in {v['usable_per_device'].m_as('GB'):.1f} GB usable"
            )
        if self.code == "tpot":
            return f"TPOT: at best {v['best'].m_as('ms'):.1f} ms, above the {v['target'].m_as('ms'):g} ms target"
        if self.code == "ttft":
            return f"TTFT: at best {v['best'].m_as('ms'):.0f} ms, above the {v['target'].m_as('ms'):g} ms target"
        if self.code == "tbt":
            return "token gap: every batch stalls a decode step longer than the target"
        if self.code == "joint":
            return "no batch meets the TPOT and TTFT targets together"
        if self.code == "fleet_size":
            return f"fleet size: the load needs more than {v['limit']:,} GPUs"
        return (
            f"feasible but not the cheapest: {v['gpus']} GPUs at batch {v['batch']}, "
            f"{v['cost_per_hour'].m_as('USD/hour'):.2f} USD/hour"
        )


@dataclass(frozen=True, repr=False)
class FleetPlan(Result):
    """The cheapest feasible configuration for the workload, or why there is none.

    Attributes
    ----------
    feasible : bool
        Whether any candidate meets every target.
    reason : str
        Why the plan is what it is (binding constraint), or why nothing is feasible.
    model, accelerator, precision, engine : str
        The chosen configuration.
    kv_precision : str
        The KV cache's precision the plan assumed: the one asked for, or the engine's default for the
        weights (:func:`~calculator.performance.kv_cache_precision`).
    tensor_parallel, batch, replicas, gpus : int
        Devices per replica, the cap on sequences running on a replica (the engine's
        ``max_num_seqs`` to configure), replicas, and total GPUs.
    running_batch : float
        Sequences running on a replica on average at the planned load (Little's law); TPOT and
        TTFT are evaluated there.
    utilization : float
        Load of each replica as a fraction of its throughput at the batch cap.
    max_utilization : float
        The planning ceiling on that load (headroom).
    ttft, tpot, tbt_max : Quantity [time]
        Predicted TTFT (mean, or the requested percentile), TPOT, and the longest gap between
        streamed tokens (a prefill or chunk landing in a decode step).
    ttft_interval, tpot_interval : tuple of Quantity
        ``(low, high)``: the performance model's 80 % interval around TTFT and TPOT
        (:mod:`calculator.uncertainty`).
    gpus_interval : tuple of int
        GPUs the plan's own configuration (accelerator, precision, TP; its batch cap re-chosen) needs
        if the step times sit at the low and at the high end of the model's step-time (TPOT) interval:
        its search rerun with prefill and decode times scaled. It always contains ``gpus``; the high
        end is ``None`` when the configuration meets the targets at no batch cap there.
    replica_throughput : Quantity [request / time]
        What one replica sustains with its batch cap full.
    binding_constraint : str
        ``"memory"``, ``"tpot"``, ``"ttft"`` or ``"throughput"``.
    cost_per_hour, cost_per_million_tokens : Quantity [currency / time], [currency]
        Fleet cost and cost per million output tokens.
    power, energy_per_million_tokens, electricity_cost_per_million_tokens : Quantity
        Fleet power draw, energy and electricity cost per million output tokens.
    rejected : dict
        Per family ``accelerator/precision/tpN``: why it cannot serve the workload (or its best cost),
        in a sentence; ``rejections`` has the same as records.
    closest : dict
        When infeasible: the lowest TTFT and TPOT any candidate reaches.
    candidates : int
        Configurations evaluated.
    router : str
        The dispatch policy assumed (``size_fleet``'s ``router``, round robin unless told).
    workload : Workload
        The traffic planned for.
    targets : dict
        ``ttft``, ``tpot``, ``tbt`` (Quantity or None), ``ttft_percentile`` (None for the mean),
        ``kv_precision`` and ``chunk_size``: what a simulation needs to check the plan.
    rejections : tuple of Rejection
        The families not chosen, each with a reason code and the values behind it.
    simulated_replicas : int or None
        With ``verify=True``: the fewest replicas that meet the targets in simulation.
    verification : PlanVerification or None
        With ``verify=True``: the simulations behind ``simulated_replicas``.
    """

    feasible: bool
    reason: str
    model: str = ""
    accelerator: str = ""
    precision: str = ""
    engine: str = ""
    kv_precision: str = ""
    tensor_parallel: int = 0
    batch: int = 0
    replicas: int = 0
    gpus: int = 0
    utilization: float = 0.0
    max_utilization: float = 0.0
    ttft: Any = None
    tpot: Any = None
    tbt_max: Any = None
    ttft_interval: Any = None
    tpot_interval: Any = None
    gpus_interval: Any = None
    replica_throughput: Any = None
    binding_constraint: str = ""
    cost_per_hour: Any = None
    cost_per_million_tokens: Any = None
    power: Any = None
    energy_per_million_tokens: Any = None
    electricity_cost_per_million_tokens: Any = None
    rejected: dict[str, str] = field(default_factory=dict)
    closest: dict[str, Any] = field(default_factory=dict)
    candidates: int = 0
    running_batch: float = 0.0
    router: str = DEFAULT_ROUTER
    workload: Any = None
    targets: dict[str, Any] = field(default_factory=dict)
    rejections: tuple[Rejection, ...] = ()
    simulated_replicas: int | None = None
    verification: Any = None


def plan_summary(plan: FleetPlan) -> str:
    """The answer in a line, with the model's error band: ``8 x h100-sxm (TP 2): 4-16 GPUs at ...``.

    Examples
    --------
    >>> plan = FleetPlan(True, "", accelerator="h100-sxm", precision="fp8", tensor_parallel=2, gpus=8)
    >>> import dataclasses
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, 12))))
    8 x h100-sxm at fp8 (TP 2); 6-12 GPUs at the ends of the model's 80% error interval
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, None))))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (TP 2); 6 GPUs at the low end of the model's 80% error interval,
    and no candidate meets the targets at the high end
    >>> checked = dataclasses.replace(plan, gpus_interval=(6, 12), simulated_replicas=3, verification=object())
    >>> print(plan_summary(checked))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (TP 2); 6-12 GPUs at the ends of the model's 80% error interval;
    in simulation 6 GPUs (3 replicas) meet the targets
    """
    if not isinstance(plan, FleetPlan):
        raise InputError(f"plan_summary(): argument 'plan' must be a FleetPlan (from size_fleet), got {shown(plan)}")
    head = f"{plan.gpus} x {plan.accelerator} at {plan.precision} (TP {plan.tensor_parallel})"
    if not plan.feasible or plan.gpus_interval is None:
        return head
    low, high = plan.gpus_interval
    if high is None:
        line = (
            f"{head}; {low} GPUs at the low end of the model's 80% error interval, "
            "and no candidate meets the targets at the high end"
        )
    else:
        line = f"{head}; {low}-{high} GPUs at the ends of the model's 80% error interval"
    if plan.verification is not None:
        simulated = plan.simulated_replicas
        line += (
            f"; in simulation {simulated * plan.tensor_parallel} GPUs ({simulated} replicas) meet the targets"
            if simulated is not None
            else "; in simulation no replica count tried meets the targets"
        )
    return line
