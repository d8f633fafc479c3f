"""The fleet sizer's answer: the plan, why each family is not it, and the plan in a line."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError, UnitsError
from ..registry import ID_PATTERN, RegistryDocument
from ..results import Result
from ..serving import Layout, ServingOptions, Speculation, Targets, Workload
from ..types import Bytes, Count, Energy, Money, MoneyRate, Power, Rate, Time
from ..units import Q_, shown, ureg

if TYPE_CHECKING:  # the check a plan records, as the serving vocabulary names it (a simulation.PlanVerification)
    from ..serving import PlanCheck as PlanVerification

__all__ = [
    "Alternative", "FleetPlan", "Layout", "PlanCost", "PlanEnergy", "PlanService", "Rejection", "interval_note",
    "plan_summary", "tie_lines",
]  # fmt: skip


#: The largest plan file :meth:`FleetPlan.from_json_file` reads (a plan written by ``size --json`` is a few kilobytes).
MAX_PLAN_FILE_BYTES = 10_000_000


@dataclass(frozen=True, repr=False)
class PlanService(Result):
    """The service a plan predicts for each replica at the planned load.

    Attributes
    ----------
    ttft, tpot, tbt_max : Quantity [time]
        Predicted TTFT (mean, or the targets' percentile), TPOT, and the longest gap between
        streamed tokens (a prefill or chunk landing in a decode step).
    ttft_interval, tpot_interval : tuple of Quantity [time]
        ``(low, high)``: the performance model's 80 % interval around TTFT and TPOT
        (:mod:`calculator.uncertainty`).
    replica_throughput : Quantity [request / time]
        What one replica sustains with its batch cap full.
    running_batch : float
        Sequences running on a replica on average at the planned load (Little's law); TPOT and
        TTFT are evaluated there.
    utilization : float
        Load of each replica as a fraction of its throughput at the batch cap (at most
        ``targets.max_utilization``).
    kernel_basis : str
        What the step times rest on, in words: the accelerator's measured kernel tables, or the generic
        efficiency curve and how far it carried to GPUs it had not seen (:func:`calculator.uncertainty.kernel_basis`).
    tpot_tail, tbt_tail : Quantity [time], optional
        A request's TPOT at ``targets.tpot_percentile`` and the token gap at ``targets.tbt_percentile``
        (the closed form of ``docs/fleet-sizer.md``); None where the targets ask none (and in plan files
        written before them).
    """

    ttft: Time
    tpot: Time
    tbt_max: Time
    ttft_interval: tuple[Time, Time]
    tpot_interval: tuple[Time, Time]
    replica_throughput: Rate
    running_batch: float
    utilization: float
    kernel_basis: str = ""
    tpot_tail: Time | None = None
    tbt_tail: Time | None = None


@dataclass(frozen=True, repr=False)
class PlanCost(Result):
    """What a plan's fleet costs.

    Attributes
    ----------
    per_hour, per_month : Quantity [currency / time]
        Fleet cost per hour and per month (a month of 730.5 hours: a twelfth of a 365.25-day year).
    per_million_output_tokens : Quantity [currency]
        Fleet cost per million output tokens (the chapter's unit cost, Table 14,
        :func:`~calculator.economics.cost_per_million_tokens`); also read as ``plan.cost_per_million_tokens``.
    per_million_total_tokens : Quantity [currency]
        Fleet cost per million prompt and output tokens together (what a per-token price list counts).
    """

    per_hour: MoneyRate
    per_month: MoneyRate
    per_million_output_tokens: Money
    per_million_total_tokens: Money


@dataclass(frozen=True, repr=False)
class PlanEnergy(Result):
    """What a plan's fleet draws and spends on electricity.

    Attributes
    ----------
    power : Quantity [power]
        Fleet power draw.
    per_million_output_tokens : Quantity [energy]
        Energy per million output tokens.
    electricity_cost_per_million_output_tokens : Quantity [currency]
        Electricity cost per million output tokens.
    """

    power: Power
    per_million_output_tokens: Energy
    electricity_cost_per_million_output_tokens: Money


#: The parts of a plan, by field name: each None on an infeasible plan.
PLAN_PARTS: dict[str, type[Result]] = {
    "layout": Layout,
    "service": PlanService,
    "cost": PlanCost,
    "energy": PlanEnergy,
}


# --------------------------------------------------------------------------------------------
# Plan


@dataclass(frozen=True, repr=False)
class Rejection(Result):
    """Why one (accelerator, precision, TP) family is not the plan: a reason code and its values.

    Attributes
    ----------
    family : str
        ``accelerator/precision/tpN``, with ``/epN`` where a mixture of experts spreads its experts.
    accelerator, precision : str
    tensor_parallel : int
    code : str
        ``"memory"`` (the weights and one sequence's KV cache do not fit), ``"load"`` (the engine quantizes the
        16-bit checkpoint as it loads it and its memory policy cannot hold the 16-bit weights), ``"batch"`` (one
        sequence fits,
        but the KV cache holds fewer than every batch cap searched), ``"tpot"``, ``"ttft"``
        or ``"tbt"`` (no batch cap meets that target), ``"joint"`` (each target is met by some cap,
        none meets all), ``"fleet_size"`` (the load needs more GPUs than the sizer plans, ``MAX_FLEET_GPUS``),
        ``"layout"`` (experts spread over a TP degree that does not divide them; plan files of versions that
        placed no copies of experts), ``"nodes"`` (a replica
        wider than the accelerator's scale-up domain without a scale-out link), ``"costlier"``
        (feasible, but not the cheapest) or ``"bound"`` (a lower bound on its cost from its
        throughput already reaches the plan's, so the search did not evaluate it further).
    values : dict
        The numbers behind the code: ``weights_per_device``, ``usable_per_device``, ``kv_per_sequence``
        (one sequence's whole KV cache at the workload's held context) and ``kv_shards_max`` (memory), the
        ``capacity`` in sequences (batch), the
        ``best`` value reached and the ``target`` (tpot, ttft), ``gpus``, ``batch`` and
        ``cost_per_hour`` (costlier), or the bounds ``gpus`` and ``cost_per_hour`` (bound).
    """

    family: str
    accelerator: str
    precision: str
    tensor_parallel: int
    code: str
    values: dict[str, Time | Bytes | MoneyRate | Count] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The reason in a sentence, as the front ends show it."""
        v = self.values
        if self.code == "memory":
            from ..memory.kv import kv_shards

            weights, usable = v["weights_per_device"].m_as("GB"), v["usable_per_device"].m_as("GB")
            kv = v["kv_per_sequence"].m_as("GB") / float(kv_shards(self.tensor_parallel, v["kv_shards_max"]))
            return (
                f"memory: {weights:,.1f} GB of weights and {kv:,.3g} GB of one sequence's KV cache per device "
                f"exceed the {usable:,.1f} GB usable"
            )
        if self.code == "load":
            return (
                f"load: the engine loads the 16-bit checkpoint (no {self.precision} checkpoint in the registry) and "
                f"quantizes it as it loads; {v['weights_per_device'].m_as('GB'):,.1f} GB of 16-bit weights per device "
                f"exceed the {v['usable_per_device'].m_as('GB'):,.1f} GB its memory policy uses"
            )
        if self.code == "batch":
            return (
                f"batch: the KV cache holds {v['capacity']:,} sequences, fewer than every batch cap searched; "
                "search smaller caps"
            )
        if self.code == "layout":
            return f"layout: {v['experts']} experts do not spread evenly over {self.tensor_parallel} GPUs"
        if self.code == "nodes":
            return (
                f"nodes: {self.tensor_parallel} GPUs span more than one scale-up domain of {v['node_gpus']}, and "
                f"{self.accelerator} has no scale-out link in the registry"
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
        if self.code == "bound":
            return f"no cheaper than the plan: its throughput needs at least {v['gpus']} GPUs (not evaluated further)"
        return (
            f"feasible but not the cheapest: {v['gpus']} GPUs at batch {v['batch']}, "
            f"{v['cost_per_hour'].m_as('USD/hour'):.2f} USD/hour"
        )


@dataclass(frozen=True, repr=False)
class Alternative(Result):
    """A near tie of a plan: the cheapest candidate of another (accelerator, precision, TP, layout) within its slack.

    Attributes
    ----------
    family : str
        ``accelerator/precision/tpN`` as in :attr:`FleetPlan.rejected`.
    accelerator, precision : str
    layout : Layout
        How a replica's GPUs run the model.
    batch, replicas, gpus : int
        The batch cap, replicas and GPUs, as a plan's.
    cost_per_hour : Quantity [currency / time]
        The fleet's GPU-hour cost.
    ttft, tpot : Quantity [time]
        TTFT (as the targets state it: mean or percentile) and TPOT at the planned load.
    """

    family: str
    accelerator: str
    precision: str
    layout: Layout
    batch: int
    replicas: int
    gpus: int
    cost_per_hour: MoneyRate
    ttft: Time
    tpot: Time


def tie_lines(plan: FleetPlan) -> list[str]:
    """Each near tie of a feasible plan in a line, with what differs from the plan: GPUs, cost, TTFT and TPOT.

    Examples
    --------
    >>> plan = FleetPlan(True, "", accelerator="h100-sxm", precision="fp8", gpus=12, replicas=6,
    ...                  layout=Layout(tensor_parallel=2), cost=PlanCost(*[Q_(45.36, "USD/hour")] * 4),
    ...                  service=PlanService(*[Q_(0.3, "s"), Q_(20, "ms")] + [None] * 6))
    >>> tie = Alternative("h200-sxm/fp8/tp2", "h200-sxm", "fp8", Layout(tensor_parallel=2), 64, 5, 10,
    ...                   Q_(45.40, "USD/hour"), Q_(0.25, "s"), Q_(18, "ms"))
    >>> print(tie_lines(dataclasses.replace(plan, alternatives=(tie,)))[0])  # doctest: +NORMALIZE_WHITESPACE
    10 x h200-sxm at fp8 (5 replicas of TP 2, batch 64): 45.40 USD/hour (+0.04, +0.1%), 2 GPUs fewer,
    TTFT 250 ms (plan 300 ms), TPOT 18.0 ms (plan 20.0 ms)
    """
    if not isinstance(plan, FleetPlan):
        raise InputError(f"tie_lines(): argument 'plan' must be a FleetPlan (size_fleet's), got {shown(plan)}")
    if not plan.feasible or plan.cost is None or plan.service is None:
        return []
    cost, service = plan.cost.per_hour.m_as("USD/hour"), plan.service
    lines = []
    for tie in plan.alternatives:
        other = tie.cost_per_hour.m_as("USD/hour")
        more = tie.gpus - plan.gpus
        gpus = "as many GPUs" if more == 0 else f"{abs(more)} GPU{'' if abs(more) == 1 else 's'} "
        gpus += "" if more == 0 else ("more" if more > 0 else "fewer")
        replicas = f"{tie.replicas} replica{'' if tie.replicas == 1 else 's'} of {layout_text(tie.layout)}"
        ttft, tpot = tie.ttft.m_as("ms"), tie.tpot.m_as("ms")
        lines.append(
            f"{tie.gpus} x {tie.accelerator} at {tie.precision} ({replicas}, batch {tie.batch}): {other:.2f} USD/hour "
            f"({other - cost:+.2f}, {(other / cost - 1) * 100:+.1f}%), {gpus}, TTFT {ttft:.0f} ms (plan "
            f"{service.ttft.m_as('ms'):.0f} ms), TPOT {tpot:.1f} ms (plan {service.tpot.m_as('ms'):.1f} ms)"
        )
    return lines


@dataclass(frozen=True, repr=False)
class FleetPlan(Result):
    """The cheapest feasible configuration for the workload, or why there is none.

    The plan is in parts: the configuration and its counts at the top, then how a replica's GPUs run
    the model (:attr:`layout`), the service predicted (:attr:`service`), the cost (:attr:`cost`) and
    the energy (:attr:`energy`). An infeasible plan has no parts (each is ``None``, never zeros that
    read as answers) and says why in :attr:`reason`.

    Attributes
    ----------
    feasible : bool
        Whether any candidate meets every target.
    reason : str
        Why the plan is what it is (binding constraint), or why nothing is feasible.
    model, accelerator, precision, engine : str
        The chosen configuration.
    engine_release : str
        The engine release the plan was priced as (``EngineProfile.for_release``); None: the current defaults. The
        simulator checks the plan as that release, and the launch command asks for what it priced.
    served_model : str
        The Hugging Face repository the model was named by where that is one of its registry aliases
        (``meta-llama/Llama-3.1-70B-Instruct`` for ``llama-3.1-70b``): the launch serves it at 16 bits. None: the
        entry's own first repository alias.
    kv_precision : str
        The KV cache's precision the plan assumed: the one asked for, or the engine's default for the
        weights (:func:`~calculator.performance.kv_cache_precision`).
    batch, replicas, gpus : int
        The cap on sequences running on a replica (the engine's ``max_num_seqs`` to configure),
        replicas, and total GPUs (``replicas x layout.gpus``).
    binding_constraint : str
        ``"memory"``, ``"tpot"``, ``"ttft"`` or ``"throughput"``.
    layout : Layout or None
        How a replica's GPUs run the model: GPUs of an attention rank (``tensor_parallel``), attention
        ranks (``data_parallel``; attention data parallelism), the GPUs its routed experts spread over
        (``expert_parallel``; the sizer searches the layouts of ``SearchSpace.moe_layouts``), pipeline
        stages (``pipeline_parallel``, searched for replicas over several nodes, one stage per node)
        and scale-up domains (``nodes``, its collectives then crossing ``Accelerator.scale_out``).
        ``layout.stage_gpus`` is what the outputs call the replica's TP.
    service : PlanService or None
        TTFT, TPOT, the longest token gap and their intervals, the replica throughput, the running batch
        and the utilization predicted at the planned load.
    cost : PlanCost or None
        Fleet cost per hour, per month, per million output tokens and per million total tokens.
    energy : PlanEnergy or None
        Fleet power, energy and electricity cost per million output tokens.
    gpus_interval : tuple of int
        GPUs the plan's own configuration (accelerator, precision, TP; its batch cap re-chosen) needs
        if the step times sit at the low and at the high end of the model's step-time (TPOT) interval:
        its search rerun with prefill and decode times scaled. It always contains ``gpus``; the high
        end is ``None`` when the configuration meets the targets at no batch cap there.
    rejected : dict
        Per family ``accelerator/precision/tpN``: why it cannot serve the workload (or its best cost),
        in a sentence; ``rejections`` has the same as records.
    closest : dict
        When infeasible: the TTFT and TPOT (``"ttft"``, ``"tpot"``) of the candidate nearest to meeting both
        targets (the smallest of its two ratios to the targets, the larger one), at whatever fleet size the search
        reached (``reason`` names the target it misses); empty where no candidate fits in memory at all
        (``reason`` says why). :func:`~calculator.fleet.explain_infeasible` gives plans that meet each target.
    alternatives : tuple of Alternative
        The near ties of a feasible plan: the cheapest candidate of each other (accelerator, precision, TP,
        layout) whose cost is within ``size_fleet``'s ``near_tie`` of the plan's, cheapest first
        (:func:`tie_lines` says what differs). Empty when infeasible or when none is that close.
    candidates : int
        Configurations evaluated.
    workload : Workload
        The traffic planned for.
    targets : Targets
        The targets planned for (TTFT and its percentile, TPOT, token gap, headroom).
    serving : ServingOptions
        The serving features assumed (prefix caching, speculative decoding, chunked prefill, router).
    registry_documents : tuple of RegistryDocument
        The user registry files the plan's ids resolve in, beside the packaged registry, by content
        (``load_registry(extra=plan.registry_documents)``); empty for the packaged registry alone. A plan
        names no path, so loading one opens no file (docs/hardening.md, Plan files).
    rejections : tuple of Rejection
        The families not chosen, each with a reason code and the values behind it.
    simulated_replicas : int or None
        With a verification: the fewest replicas that meet the targets in simulation.
    verification : PlanVerification or None
        The simulations behind ``simulated_replicas``.
    """

    feasible: bool
    reason: str
    model: str = ""
    accelerator: str = ""
    precision: str = ""
    engine: str = ""
    kv_precision: str = ""
    batch: int = 0
    replicas: int = 0
    gpus: int = 0
    binding_constraint: str = ""
    layout: Layout | None = None
    service: PlanService | None = None
    cost: PlanCost | None = None
    energy: PlanEnergy | None = None
    gpus_interval: tuple[int, int | None] | None = None
    rejected: dict[str, str] = field(default_factory=dict)
    closest: dict[str, Time] = field(default_factory=dict)
    candidates: int = 0
    workload: Workload | None = None
    targets: Targets | None = None
    serving: ServingOptions = field(default_factory=ServingOptions)
    registry_documents: tuple[RegistryDocument, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    simulated_replicas: int | None = None
    verification: PlanVerification | None = None
    served_model: str | None = None
    engine_release: str | None = None
    alternatives: tuple[Alternative, ...] = ()

    def _frame_values(self) -> dict[str, Any]:
        """The fields, an absent part (an infeasible plan's) as its fields missing: frames of plans line up."""
        values = self.to_dict()
        for name, part in PLAN_PARTS.items():
            if values[name] is None:
                values[name] = dict.fromkeys(f.name for f in dataclasses.fields(part))  # type: ignore[arg-type]
        for name in ("served_model", "engine_release"):  # how to launch it, in the plan's JSON, not its table row
            values.pop(name)
        layout = values["layout"]
        if not layout.get("redundant_experts"):  # a row names copies of experts only where the plan places some
            values["layout"] = {k: v for k, v in layout.items() if k != "redundant_experts"}
        service = values["service"]
        for name in ("tpot_tail", "tbt_tail"):  # a row carries a stream tail only where a target asked for one
            if service.get(name) is None:
                service.pop(name, None)
        return values

    @property
    def cost_per_million_tokens(self) -> Money | None:
        """The chapter's name for ``cost.per_million_output_tokens`` (Table 14 counts output tokens)."""
        return self.cost.per_million_output_tokens if self.cost is not None else None

    @property
    def router(self) -> str:
        """The dispatch policy assumed (``serving.router``)."""
        return self.serving.router

    @property
    def max_utilization(self) -> float:
        """The planning ceiling on each replica's load (``targets.max_utilization``; 0 without targets)."""
        return self.targets.max_utilization if self.targets is not None else 0.0

    @classmethod
    def from_json_file(cls, path: Any) -> FleetPlan:
        """The plan ``servecalc size --json`` wrote to ``path``: read safely, then :meth:`from_json_dict`.

        The file is read as the calculator reads every user file (a regular file, at most
        :data:`MAX_PLAN_FILE_BYTES`, UTF-8, JSON without a repeated key); the plan is rebuilt as it was
        sized, not sized again. Raises :class:`InputError`: the file's fault in a line (never its
        content), or the field a hand-edited file got wrong.
        """
        from .._files import load_json, read_text
        from ..errors import CalculatorError

        try:
            data = load_json(read_text(path, MAX_PLAN_FILE_BYTES, "the file"), "the file")
        except CalculatorError as exc:  # not a regular file, too large, not UTF-8 or not JSON
            raise InputError(f"does not hold a plan written by 'servecalc size --json' ({exc})") from None
        return cls.from_json_dict(data)

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> FleetPlan:
        """A plan from :meth:`~calculator.results.Result.to_json_dict` (``servecalc size --json``).

        A file of the earlier flat shape (``tensor_parallel``, ``ttft``, ``cost_per_hour``, ... at the top)
        is read into the parts (:data:`FLAT_PLAN_PARTS`). Raises :class:`InputError` naming what is missing
        or malformed (a file of an older version records no ``serving`` part: size it again).
        """
        if not isinstance(data, Mapping) or not {"feasible", "model", "replicas"} <= set(data):
            raise InputError("not a plan written by 'servecalc size --json'")
        if data.get("workload") is None or not data.get("targets") or not isinstance(data.get("serving"), Mapping):
            raise InputError(
                "the file does not record the plan's workload, targets and serving options (written by an older "
                "version?): size it again with 'servecalc size --json'"
            )
        names = {f.name for f in dataclasses.fields(cls)} - {"verification"}
        if data.get("registry_files"):  # an older file: it named its registry files by path
            raise InputError(
                "the plan names its registry files by path (written by an older version); a plan's paths are not "
                "opened: give the files with --extra (load_registry(extra=...)), or size the plan again"
            )
        data = _parts_of_flat({OLD_PLAN_NAMES.get(key, key): value for key, value in data.items()})
        values = {key: _restore(value, key) for key, value in data.items() if key in names}
        _check_plan_values(values)
        try:
            values["workload"] = Workload(**values["workload"])
            values["targets"] = Targets(**values["targets"])
            serving = dict(values["serving"])
            if serving.get("speculation") is not None:
                serving["speculation"] = Speculation(**serving["speculation"])
            values["serving"] = ServingOptions(**serving)
            values["rejections"] = tuple(Rejection(**record) for record in values.get("rejections", ()))
            values["alternatives"] = tuple(
                Alternative(**{**record, "layout": Layout(**record["layout"])})
                for record in values.get("alternatives", ())
            )
            values["registry_documents"] = tuple(
                RegistryDocument(**record) for record in values.get("registry_documents", ())
            )
            for name, part in PLAN_PARTS.items():
                if values.get(name) is not None:
                    values[name] = part(**values[name])
        except (TypeError, KeyError) as exc:  # a part with a field it does not have, or without one it needs
            raise InputError(
                f"the plan's workload, targets, serving options, parts or rejections are malformed ({exc})"
            ) from None
        if values.get("gpus_interval") is not None:
            values["gpus_interval"] = tuple(values["gpus_interval"])
        return cls(**values)


#: Field names of plan files written before the cost fields said which tokens they count.
OLD_PLAN_NAMES = {
    "cost_per_million_tokens": "cost_per_million_output_tokens",
    "energy_per_million_tokens": "energy_per_million_output_tokens",
    "electricity_cost_per_million_tokens": "electricity_cost_per_million_output_tokens",
}

#: Where each field of a flat plan file (written before the plan had parts) goes: part, field in the part.
FLAT_PLAN_PARTS = {
    "tensor_parallel": ("layout", "tensor_parallel"),
    "data_parallel": ("layout", "data_parallel"),
    "expert_parallel": ("layout", "expert_parallel"),
    "pipeline_parallel": ("layout", "pipeline_parallel"),
    "nodes_per_replica": ("layout", "nodes"),
    **{
        name: ("service", name)
        for name in (
            "ttft",
            "tpot",
            "tbt_max",
            "ttft_interval",
            "tpot_interval",
            "replica_throughput",
            "running_batch",
            "utilization",
        )
    },
    "cost_per_hour": ("cost", "per_hour"),
    "cost_per_month": ("cost", "per_month"),
    "cost_per_million_output_tokens": ("cost", "per_million_output_tokens"),
    "cost_per_million_total_tokens": ("cost", "per_million_total_tokens"),
    "power": ("energy", "power"),
    "energy_per_million_output_tokens": ("energy", "per_million_output_tokens"),
    "electricity_cost_per_million_output_tokens": ("energy", "electricity_cost_per_million_output_tokens"),
}


def _parts_of_flat(data: dict[str, Any]) -> dict[str, Any]:
    """A plan file's fields in parts: a flat file's (the earlier shape) moved into them, a file in parts as it is.

    A flat file's ``tensor_parallel`` counted the GPUs of a pipeline stage: the layout's is that over the
    attention ranks. An infeasible flat plan's zeros and nulls become no parts.
    """
    flat = {key: data.pop(key) for key in list(data) if key in FLAT_PLAN_PARTS}
    if flat and any(name in data for name in PLAN_PARTS):
        raise InputError(
            f"the plan has parts ({', '.join(PLAN_PARTS)}) and the flat fields of an older file "
            f"({', '.join(sorted(flat))}): write one shape"
        )
    if data.get("feasible") is not True:
        return data
    parts: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        part, name = FLAT_PLAN_PARTS[key]
        parts.setdefault(part, {})[name] = value
    layout = parts.get("layout", {})
    stage, ranks = layout.get("tensor_parallel"), layout.get("data_parallel", 1)
    if _whole(stage) and _whole(ranks) and ranks >= 1 and stage % ranks == 0:
        layout["tensor_parallel"] = stage // ranks
    return {**data, **parts}


#: What a plan file's numbers must be: whole numbers in a range, by (dotted) field (a tampered file is refused).
PLAN_COUNTS = {
    "batch": (0, 1_000_000),
    "replicas": (0, 10_000_000),
    "gpus": (0, 10_000_000),
    "candidates": (0, 2**53),
    "simulated_replicas": (1, 10_000_000),
}
#: The whole numbers of a plan's layout, by field: each at least 1 and at most 4,096.
LAYOUT_COUNTS = ("tensor_parallel", "data_parallel", "expert_parallel", "pipeline_parallel", "nodes")
#: The dimension of each quantity field of a plan file, as an example unit (others: any dimension).
PLAN_DIMENSIONS = {
    **dict.fromkeys(
        ("service.ttft", "service.tpot", "service.tbt_max", "service.ttft_interval", "service.tpot_interval"), "s"
    ),
    "closest": "s",
    **dict.fromkeys(("alternatives.ttft", "alternatives.tpot"), "s"),
    "alternatives.cost_per_hour": "USD/hour",
    "service.replica_throughput": "request/s",
    **dict.fromkeys(("cost.per_hour", "cost.per_month"), "USD/hour"),
    **dict.fromkeys(
        (
            "cost.per_million_output_tokens",
            "cost.per_million_total_tokens",
            "energy.electricity_cost_per_million_output_tokens",
        ),
        "USD",
    ),
    "energy.power": "W",
    "energy.per_million_output_tokens": "J",
}


def _restore(value: Any, name: str) -> Any:
    """A JSON value back as the library holds it: ``{"value", "unit"}`` as a quantity, lists as tuples.

    Units are read by the one safe parser (:func:`~calculator.units.parse_quantity`), so a unit text
    such as ``9**9**9*second`` is an error naming the field rather than arithmetic for pint.
    """
    if isinstance(value, dict) and set(value) == {"value", "unit"}:
        return _quantity(value, name)
    if isinstance(value, dict):
        return {key: _restore(item, name if name == "closest" else f"{name}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return tuple(_restore(item, name) for item in value)
    return value


def _quantity(value: Mapping[str, Any], name: str) -> Any:
    from ..units import parse_quantity

    magnitude, unit = value["value"], value["unit"]
    if isinstance(magnitude, bool) or not isinstance(magnitude, int | float) or magnitude != magnitude:
        raise InputError(f"field '{name}': the value must be a number, got {shown(magnitude)}")
    if not isinstance(unit, str):
        raise InputError(f"field '{name}': the unit must be text like 's', got {shown(unit)}")
    expected = PLAN_DIMENSIONS.get(name)
    try:
        one = parse_quantity(f"1 {unit}", what=f"field '{name}'")
    except UnitsError:
        raise UnitsError(f"field '{name}': {shown(unit)} is not a unit (write one like '{expected or 's'}')") from None
    if expected is not None and one.dimensionality != Q_(1, expected).dimensionality:
        raise UnitsError(
            f"field '{name}': the unit {shown(unit)} has the wrong dimension (write one like '{expected}')"
        )
    return Q_(magnitude, one.units)


def _check_plan_values(values: dict[str, Any]) -> None:
    """A plan file's fields as the sizer writes them: kinds, whole counts in range, GPUs = replicas x layout."""
    if not isinstance(values.get("feasible"), bool):
        raise InputError(f"field 'feasible' must be true or false, got {shown(values.get('feasible'))}")
    for name in ("reason", "model", "accelerator", "precision", "engine", "kv_precision", "binding_constraint"):
        if name in values and not isinstance(values[name], str):
            raise InputError(f"field '{name}' must be text, got {shown(values[name])}")
    for name in ("model", "accelerator", "precision", "engine", "kv_precision"):  # ids: they reach emitted text
        if values.get(name) and not (len(values[name]) <= 80 and re.fullmatch(ID_PATTERN, values[name])):
            raise InputError(f"field '{name}' must be a registry id (a-z, 0-9, . _ -), got {shown(values[name])}")
    for name, (low, high) in PLAN_COUNTS.items():
        if values.get(name) is None and name == "simulated_replicas":
            continue  # not in every plan
        values[name] = _count(values, name, low, high)
    for name in PLAN_PARTS:
        if values.get(name) is not None and not isinstance(values[name], Mapping):
            raise InputError(f"field '{name}' must be an object or null, got {shown(values[name])}")
    if values["feasible"]:
        _check_feasible_parts(values)
    elif any(values.get(name) is not None for name in PLAN_PARTS):
        raise InputError(f"an infeasible plan has no parts: fields {', '.join(PLAN_PARTS)} must be null")
    for name in ("workload", "targets", "serving"):
        if not isinstance(values.get(name), Mapping):
            raise InputError(f"field '{name}' must be an object, got {shown(values.get(name))}")
    band = values.get("gpus_interval")
    if band is not None and not (
        isinstance(band, tuple) and len(band) == 2 and all(v is None or _whole(v) for v in band)
    ):
        raise InputError(f"field 'gpus_interval' must be a pair of GPU counts (low, high or null), got {shown(band)}")
    documents = values.get("registry_documents", ())
    if not (isinstance(documents, tuple) and all(isinstance(d, Mapping) for d in documents)):
        raise InputError(
            "field 'registry_documents' must be a list of registry documents (name, text, sha256), got "
            f"{shown(documents)}"
        )
    for name in ("rejected", "closest"):
        if not isinstance(values.get(name, {}), Mapping):
            raise InputError(f"field '{name}' must be an object, got {shown(values.get(name))}")
    for name in ("rejections", "alternatives"):
        if not isinstance(values.get(name, ()), tuple) or not all(isinstance(r, Mapping) for r in values.get(name, ())):
            raise InputError(f"field '{name}' must be a list of records, got {shown(values.get(name))}")


def _count(values: Mapping[str, Any], name: str, low: int, high: int, prefix: str = "") -> int:
    """A whole number of a plan file in ``[low, high]``, as an int; an error naming the (dotted) field."""
    value = values.get(name)
    if value is None:
        raise InputError(f"field '{prefix}{name}' is missing; size the plan again with 'servecalc size --json'")
    if not _whole(value) or not low <= value <= high:
        raise InputError(f"field '{prefix}{name}' must be a whole number in [{low:,}, {high:,}], got {shown(value)}")
    return int(value)


def _check_feasible_parts(values: dict[str, Any]) -> None:
    """A feasible plan file's parts: each present, its layout's counts whole, GPUs = replicas x layout.gpus."""
    for name in ("batch", "replicas"):
        if values[name] < 1:
            raise InputError(f"field '{name}' of a feasible plan must be at least 1, got {values[name]}")
    for name in PLAN_PARTS:
        if values.get(name) is None:
            raise InputError(f"field '{name}' of a feasible plan is missing; size the plan again")
    layout = values["layout"] = dict(values["layout"])
    for name in LAYOUT_COUNTS:
        if name in layout or name == "tensor_parallel":  # the others default to 1 (older files lack some)
            layout[name] = _count(layout, name, 1, 4096, "layout.")
    if "redundant_experts" in layout:  # older files place none
        layout["redundant_experts"] = _count(layout, "redundant_experts", 0, 65536, "layout.")
    width = Layout(**{k: v for k, v in layout.items() if k in LAYOUT_COUNTS}).gpus
    if values["gpus"] != values["replicas"] * width:
        raise InputError(
            f"field 'gpus' ({values['gpus']:,}) must be replicas x the layout's GPUs ({values['replicas']:,} x "
            f"{width:,}: tensor_parallel x data_parallel x pipeline_parallel)"
        )
    service = values["service"]
    for name in ("utilization", "running_batch"):
        value = service.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
            raise InputError(f"field 'service.{name}' must be a finite number >= 0, got {shown(value)}")
    for name in ("ttft_interval", "tpot_interval"):
        pair = service.get(name)
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(_is_time(v) for v in pair)):
            raise InputError(f"field 'service.{name}' must be a pair of times (low, high), got {shown(pair)}")


def _is_time(value: Any) -> bool:
    return isinstance(value, ureg.Quantity) and value.dimensionality == ureg.second.dimensionality


def _whole(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


def layout_text(layout: Layout | None) -> str:
    """A replica's layout in words: ``TP 8``, or ``TP 8, EP 8`` where the experts are spread.

    TP counts the GPUs of a pipeline stage (``layout.stage_gpus``), its attention ranks shown beside it.

    Examples
    --------
    >>> layout_text(Layout(tensor_parallel=1, data_parallel=8, expert_parallel=8)), layout_text(None)
    ('TP 8, attention DP 8, EP 8', 'no layout')
    """
    if layout is None:
        return "no layout"
    copies = f" with {layout.redundant_experts} redundant experts" if layout.redundant_experts else ""
    spread = f", EP {layout.expert_parallel}{copies}" if layout.expert_parallel > 1 else ""
    ranks = f", attention DP {layout.data_parallel}" if layout.data_parallel > 1 else ""
    stages = f", PP {layout.pipeline_parallel}" if layout.pipeline_parallel > 1 else ""
    nodes = f" over {layout.nodes} nodes" if layout.nodes > 1 else ""
    return f"TP {layout.stage_gpus}{stages}{ranks}{spread}{nodes}"


def interval_note(plan: FleetPlan) -> str:
    """Why a plan's GPU interval reaches low, in words: where its replicas run beyond the engine's fitted batch.

    The sizer's low end (``gpus_interval``) then stops the engine's per-sequence cost at the batch its costs were
    fitted on (``EngineProfile.fitted_batch``), as :func:`~calculator.performance.predict_benchmark`'s interval
    does; empty for a plan within the fit, an infeasible plan, or an engine without a packaged profile.

    Examples
    --------
    >>> import dataclasses
    >>> from calculator import Q_
    >>> service = PlanService(Q_(1, "s"), Q_(50, "ms"), Q_(60, "ms"), (Q_(1, "s"),) * 2, (Q_(50, "ms"),) * 2,
    ...                       Q_(1, "request/s"), running_batch=480.0, utilization=0.9)
    >>> plan = FleetPlan(True, "", accelerator="b200-sxm", engine="trtllm", layout=Layout(tensor_parallel=1),
    ...                  replicas=2, gpus=2, service=service, gpus_interval=(1, 3))
    >>> print(interval_note(plan))  # doctest: +NORMALIZE_WHITESPACE
    the trtllm engine's per-sequence cost (32.6 us) was fitted on benchmarks of at most 224 sequences a replica; this
    plan runs about 480 a replica, so the low end of its GPU interval stops that cost at 224 sequences
    >>> interval_note(dataclasses.replace(plan, service=dataclasses.replace(service, running_batch=200.0)))
    ''
    """
    from ..performance import engine_profile

    if not isinstance(plan, FleetPlan):
        raise InputError(f"interval_note(): argument 'plan' must be a FleetPlan (from size_fleet), got {shown(plan)}")
    if not plan.feasible or plan.service is None or plan.layout is None or plan.gpus_interval is None:
        return ""
    try:
        profile = engine_profile(plan.engine or None)
    except (InputError, KeyError):  # a user-registry engine: its own fit, not the packaged one's
        return ""
    fitted, cost = profile.fitted_batch, profile.efficiency_for(plan.accelerator).sequence_overhead
    ranks = plan.layout.data_parallel
    per_rank = plan.service.running_batch / ranks
    if fitted is None or cost.m <= 0 or per_rank <= fitted:
        return ""
    where = "a replica" if ranks == 1 else "an attention rank"
    return (
        f"the {profile.name} engine's per-sequence cost ({cost.m_as('us'):.3g} us) was fitted on benchmarks of at "
        f"most {fitted} sequences {where}; this plan runs about {per_rank:,.0f} {where}, so the low end of its GPU "
        f"interval stops that cost at {fitted} sequences"
    )


def plan_summary(plan: FleetPlan) -> str:
    """The answer in a line, with the model's error band: ``8 x h100-sxm (4 replicas of TP 2): 6-12 GPUs ...``.

    ``N x accelerator`` counts GPUs, here and in every output; replicas are counted in words.

    Examples
    --------
    >>> import dataclasses
    >>> layout = Layout(tensor_parallel=2)
    >>> plan = FleetPlan(True, "", accelerator="h100-sxm", precision="fp8", layout=layout, replicas=4, gpus=8)
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, 12))))
    8 x h100-sxm at fp8 (4 replicas of TP 2); 6-12 GPUs at the ends of the model's 80% error interval
    >>> print(plan_summary(dataclasses.replace(plan, gpus_interval=(6, None))))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (4 replicas of TP 2); 6 GPUs at the low end of the model's 80% error interval,
    and no candidate meets the targets at the high end
    >>> checked = dataclasses.replace(plan, gpus_interval=(6, 12), simulated_replicas=3, verification=object())
    >>> print(plan_summary(checked))  # doctest: +NORMALIZE_WHITESPACE
    8 x h100-sxm at fp8 (4 replicas of TP 2); 6-12 GPUs at the ends of the model's 80% error interval;
    in simulation 6 GPUs (3 replicas) meet the targets
    """
    if not isinstance(plan, FleetPlan):
        raise InputError(f"plan_summary(): argument 'plan' must be a FleetPlan (from size_fleet), got {shown(plan)}")
    replicas = f"{plan.replicas} replica{'' if plan.replicas == 1 else 's'} of " if plan.replicas else ""
    head = f"{plan.gpus} x {plan.accelerator} at {plan.precision} ({replicas}{layout_text(plan.layout)})"
    if not plan.feasible or plan.layout is None or plan.gpus_interval is None:
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
            f"; in simulation {simulated * plan.layout.gpus} GPUs "
            f"({simulated} replica{'' if simulated == 1 else 's'}) meet the targets"
            if simulated is not None
            else "; in simulation no replica count tried meets the targets"
        )
    return line
