"""The sizing options of ``size``, ``compare`` and ``simulate``, read into the sizer's inputs; a plan as text."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError
from ..precision import DEFAULT_PRECISION
from ..results import format_number as _number
from ..results import percentile_label
from ._app import ExtraOption, _fail, _library_errors, tokens

if TYPE_CHECKING:
    from ..fleet import Costs, SearchSpace, ServingOptions, Targets, Workload


def _quantity(name: str, text: str | None, unit: str, bare: str | None = None, *, positive: bool = False) -> Any:
    """A quantity from the command line, read by the library's strict parser (``units.parse_quantity``).

    A bare number is read in ``bare`` where the option's help says so (a rate in request/s); elsewhere a
    bare number is an error that names the option, so ``--tpot 40`` cannot become 40 seconds. With
    ``positive`` a value of zero or below is an error naming the option (before any sizing).
    """
    from ..errors import UnitsError
    from ..units import parse_quantity

    if text is None:
        raise _fail(f"option --{name} is required (a quantity like '1 {unit}')")
    try:
        value = parse_quantity(text, unit, what=f"option --{name}", bare=bare).to(unit)
    except UnitsError as exc:
        raise _fail(exc) from None
    if positive and not value.magnitude > 0:
        raise _fail(f"option --{name}: must be greater than zero, got {text!r}")
    return value


# The options. Each carries a metavar naming what to write; the sizing options are the fields of
# SizingFlags, declared once for size, simulate and compare.
ModelArgument = Annotated[
    str | None, typer.Argument(metavar="MODEL", help="Registry model id or alias.", show_default=False)
]
AcceleratorOption = Annotated[
    list[str], typer.Option("--accelerator", "-a", metavar="GPU", help="Candidate accelerator id (repeatable).")
]
PrecisionOption = Annotated[
    list[str],
    typer.Option("--precision", "-p", metavar="PRECISION", help="Candidate weight precision (repeatable)."),
]
EngineOption = Annotated[
    str | None,
    typer.Option(metavar="ENGINE", help="Serving engine profile: vllm, sglang or trtllm (default: generic)."),
]
#: The KV-cache precision of one configuration (``fit``, ``predict``); the sizing flags' own searches more.
KvPrecisionOption = Annotated[
    str | None,
    typer.Option(
        metavar="PRECISION",
        help="KV-cache precision (default: what the engine runs for these weights, from the checkpoint a "
        "checkpoint's repository given as MODEL picks: calculator.performance.KV_PRECISION_RULE, CHECKPOINT_RULE).",
        show_default=False,
    ),
]
TimeHelp = "with its unit, e.g. '{}' (a bare number is an error)"
#: The requests of a simulation (``size --verify`` and ``simulate``).
RequestsOption = Annotated[
    int | None,
    typer.Option(
        metavar="INT",
        min=1,
        max=2_000_000,
        help="Requests per seed and replica count (default 2,000 per replica, 6,000 to 60,000; at most 2,000,000).",
        show_default=False,
    ),
]


#: The CLI's wall clock for a simulation check: with imports and sizing the command answers in about 10 s.
#: A large plan needs more (``--time-limit``); a search the deadline cuts short says so in its verdict.
CLI_TIME_LIMIT = 8.0
#: ``--speculate`` (``predict``, ``size``, ``simulate``); the defaults it names are ``serving.DEFAULT_ACCEPTANCE``'s
#: (not imported with the CLI; ``tests/test_speculation_heads.py`` holds them equal).
SpeculateOption = Annotated[
    str | None,
    typer.Option(
        metavar="DRAFT:K:ALPHA",
        help="Speculative decoding: registry model DRAFT proposes K tokens per round (default 4), each accepted "
        "with probability ALPHA (default 0.7); e.g. 'llama-3.2-1b:4:0.7' or 'llama-3.2-1b'. 'mtp:K[:ALPHA]' drafts "
        "with the model's own multi-token-prediction layers (ALPHA default 0.85), 'eagle:K[:ALPHA]' with an "
        "EAGLE-3 head (default 0.68); ALPHA may list K per-position probabilities, e.g. 'mtp:3:0.85,0.7,0.6'.",
        show_default=False,
    ),
]
#: The wall clock of a simulation check (``size --verify`` and ``simulate``), for the whole call.
TimeLimitOption = Annotated[
    float,
    typer.Option(
        "--time-limit",
        metavar="SECONDS",
        min=0.1,
        max=86_400,
        help="Wall-clock seconds for the whole simulation check; a search cut short says so (give more for a "
        "plan of hundreds of replicas).",
    ),
]


@dataclasses.dataclass(frozen=True)
class SizingFlags:
    """The sizing options of ``size``, ``simulate`` and ``compare``, one field per flag, as typed.

    :func:`_sizing_options` adds them to a command's options; :func:`_sizing_inputs` turns them into
    the keyword arguments of :func:`~calculator.fleet.size_fleet`. Left out on purpose: ``batches``
    (the searched grid of batch caps), ``idle_power_fraction`` and ``electricity_price`` (they change
    only the energy estimate, not the plan; the API takes them).
    """

    rate: Annotated[
        str | None,
        typer.Option(
            metavar="RATE",
            help="Arrival rate, e.g. '20 request/s' (a bare number is request/s). Required unless --trace.",
            show_default=False,
        ),
    ] = None
    input_tokens: Annotated[
        float | None,
        typer.Option(
            "--input",
            metavar="TOKENS",
            parser=tokens(whole=False),
            help="Mean prompt length (tokens; 2K is 2,048).",
            show_default=False,
        ),
    ] = None
    output_tokens: Annotated[
        float | None,
        typer.Option(
            "--output",
            metavar="TOKENS",
            parser=tokens(whole=False),
            help="Mean output length (tokens).",
            show_default=False,
        ),
    ] = None
    trace: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            exists=True,
            dir_okay=False,
            help="A CSV request trace (columns arrival_time in s, input_tokens, output_tokens): the rate, the mean "
            "lengths and the three CVs are read from it, in place of --rate, --input, --output and the CVs.",
            show_default=False,
        ),
    ] = None
    ttft: Annotated[
        str | None, typer.Option(metavar="TIME", help="TTFT target " + TimeHelp.format("500 ms"), show_default=False)
    ] = None
    tpot: Annotated[
        str | None, typer.Option(metavar="TIME", help="TPOT target " + TimeHelp.format("40 ms"), show_default=False)
    ] = None
    tbt: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Longest gap between two streamed tokens " + TimeHelp.format("200 ms"),
            show_default=False,
        ),
    ] = None
    percentile: Annotated[
        str | None,
        typer.Option(
            "--percentile",
            "--ttft-percentile",
            metavar="PCT",
            help="Plan TTFT at this percentile: 99, p99 or 0.99 (a number below 1 is a fraction). Default: the mean.",
            show_default=False,
        ),
    ] = None
    tpot_percentile: Annotated[
        str | None,
        typer.Option(
            "--tpot-percentile",
            metavar="PCT",
            help="Plan each request's TPOT at this percentile of the requests (99, p99 or 0.99). Default: the mean.",
            show_default=False,
        ),
    ] = None
    tbt_percentile: Annotated[
        str | None,
        typer.Option(
            "--tbt-percentile",
            metavar="PCT",
            help="Read --tbt as this percentile of all token gaps (99, p99 or 0.99). Default: the longest gap.",
            show_default=False,
        ),
    ] = None
    accelerator: AcceleratorOption = dataclasses.field(default_factory=lambda: ["h100-sxm"])
    precision: PrecisionOption = dataclasses.field(default_factory=lambda: [DEFAULT_PRECISION])
    tensor_parallel: Annotated[
        list[int] | None,
        typer.Option(
            "--tp",
            metavar="INT",
            min=1,
            help="Candidate tensor-parallel degree (repeatable; default 1, 2, 4 and 8).",
        ),
    ] = None
    engine: EngineOption = None
    kv_precision: Annotated[
        str | None,
        typer.Option(
            metavar="PRECISION",
            help="KV-cache precision. Default: the one the engine runs for the weights' checkpoint (FP8 for FP8/FP4 "
            "weights under vLLM, TensorRT-LLM and the generic profile on GPUs with FP8, else 16-bit; "
            "docs/performance-model.md); the output's kv_precision says which.",
        ),
    ] = None
    moe_layout: Annotated[
        list[str] | None,
        typer.Option(
            "--moe-layout",
            metavar="LAYOUT",
            help="For a mixture of experts, how a replica's GPUs hold it: 'tensor' (each expert split over them), "
            "'expert' (whole experts spread over them, EP = TP) or 'attention-dp' (one attention rank per GPU, "
            "experts spread). Repeatable; default all three.",
            show_default=False,
        ),
    ] = None
    price: Annotated[
        list[str] | None,
        typer.Option(
            metavar="[GPU=]USD/h",
            help="GPU-hour price: '2.5 USD/hour' for every accelerator, or 'h100-sxm=2.5 USD/hour' for one "
            "(repeatable; a bare number is USD/hour). Default: the registry's price, shown in the output.",
            show_default=False,
        ),
    ] = None
    max_utilization: Annotated[
        float,
        typer.Option(
            metavar="FRACTION", min=0, max=1, help="Load each replica to at most this share of its throughput (> 0)."
        ),
    ] = 0.8
    arrival_cv: Annotated[
        float | None,
        typer.Option(metavar="CV", min=0, help="Inter-arrival time CV: 1 (the default) is Poisson, above 1 bursty."),
    ] = None
    input_cv: Annotated[
        float | None, typer.Option(metavar="CV", min=0, help="Prompt-length CV (default 0: one length).")
    ] = None
    output_cv: Annotated[
        float | None, typer.Option(metavar="CV", min=0, help="Output-length CV (default 0: one length).")
    ] = None
    prefix_hit: Annotated[
        float,
        typer.Option(
            "--prefix-hit",
            metavar="FRACTION",
            min=0,
            max=1,
            help="Prefix caching: share of requests whose prompt starts with the shared prefix (with --shared-prefix).",
        ),
    ] = 0.0
    shared_prefix: Annotated[
        float,
        typer.Option(
            "--shared-prefix",
            metavar="TOKENS",
            parser=tokens(0, whole=False),
            help="Prefix caching: tokens of the prefix those requests share, e.g. a system prompt (with --prefix-hit).",
        ),
    ] = 0.0
    speculate: SpeculateOption = None
    chunk: Annotated[
        int | None,
        typer.Option(
            "--chunk",
            metavar="TOKENS",
            parser=tokens(),
            help="Chunked prefill: prompt tokens per iteration.",
            show_default=False,
        ),
    ] = None
    router: Annotated[
        str | None,
        typer.Option(
            metavar="ROUTER",
            help="How requests are spread over the replicas: round_robin (the default; with simulate --plan, the "
            "plan's), random, join_shortest_queue, least_outstanding_tokens or power_of_two.",
            show_default=False,
        ),
    ] = None
    extra: ExtraOption = None

    def given(self) -> list[str]:
        """The flags given on the command line (a value other than the default), as spelled there."""
        defaults = SizingFlags()
        return [_flag(name) for name in _SIZING_FIELDS if getattr(self, name) != getattr(defaults, name)]


_SIZING_FIELDS = tuple(field.name for field in dataclasses.fields(SizingFlags))


def _flag(name: str) -> str:
    """The command-line spelling of a :class:`SizingFlags` field (``input_tokens`` -> ``--input``)."""
    info = typing.get_args(typing.get_type_hints(SizingFlags, include_extras=True)[name])[1]
    declared = (info.default, *(info.param_decls or ()))  # typer keeps the first name given as the default
    return next((d for d in declared if isinstance(d, str) and d.startswith("--")), "--" + name.replace("_", "-"))


def _sizing_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the :class:`SizingFlags` options; it receives them as one ``sizing`` argument.

    typer reads a command's options from its signature, so the returned function's signature is the
    command's arguments, then the sizing options, then the command's own options.
    """
    hints = typing.get_type_hints(SizingFlags, include_extras=True)
    keyword = inspect.Parameter.KEYWORD_ONLY
    defaults = SizingFlags()
    flags = [
        inspect.Parameter(name, keyword, annotation=hints[name], default=getattr(defaults, name))
        for name in _SIZING_FIELDS
    ]
    own = [
        parameter.replace(kind=keyword)
        for parameter in inspect.signature(command, eval_str=True).parameters.values()
        if parameter.name != "sizing"
    ]

    def is_argument(parameter: inspect.Parameter) -> bool:
        return any(isinstance(info, typer.models.ArgumentInfo) for info in typing.get_args(parameter.annotation)[1:])

    parameters = [*filter(is_argument, own), *flags, *(p for p in own if not is_argument(p))]

    @functools.wraps(command)
    def with_sizing(**values: Any) -> None:
        sizing = SizingFlags(**{name: values.pop(name) for name in _SIZING_FIELDS})
        command(sizing=sizing, **values)

    with_sizing.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    with_sizing.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
    return with_sizing


def _prices(texts: list[str]) -> Any:
    """``--price`` values: one price for every accelerator, or ``GPU=price`` pairs (one per accelerator)."""
    pairs = [text.split("=", 1) for text in texts]
    if all(len(pair) == 1 for pair in pairs):
        if len(texts) > 1:
            raise _fail("give one --price for all accelerators, or --price GPU=PRICE for each")
        return _quantity("price", texts[0], "USD/hour", bare="USD/hour", positive=True)
    if not all(len(pair) == 2 for pair in pairs):
        raise _fail("--price: mix of 'GPU=PRICE' and a bare price; give GPU=PRICE for each")
    prices: dict[str, Any] = {}
    for name, text in pairs:
        if name.strip() in prices:
            raise _fail(f"--price names {name.strip()} twice")
        prices[name.strip()] = _quantity(f"price {name.strip()}", text, "USD/hour", bare="USD/hour", positive=True)
    return prices


def _percentile(text: str | None, option: str = "--percentile") -> float | None:
    """A percentile ``option``: ``99``, ``p99`` or ``0.99`` as the fraction the sizer takes (``None``: the mean)."""
    if text is None:
        return None
    raw = text.strip().lower()
    try:
        value = float(raw.removeprefix("p"))
    except ValueError:
        value = float("nan")
    fraction = value / 100 if raw.startswith("p") or value >= 1 else value
    if not 0 < fraction < 1:
        raise _fail(f"option {option}: expected a percentile between 0 and 100 such as 99, p99 or 0.99, got {text!r}")
    return fraction


def _speculation(text: str | None, registry: Any) -> Any:
    """``--speculate DRAFT:K:ALPHA``, ``mtp:K:ALPHA`` or ``eagle:K:ALPHA`` as a :class:`~calculator.fleet.Speculation`.

    K and ALPHA may be left out; ALPHA is one probability or K of them separated by commas (one per position).
    """
    from ..errors import CalculatorError
    from ..fleet import Speculation

    if text is None:
        return None
    parts = text.split(":")
    example = (
        "such as 'llama-3.2-1b:4:0.7' (draft model id, draft tokens per round, acceptance probability), 'mtp:1:0.85' "
        "or 'eagle:3:0.8,0.7,0.6'"
    )
    try:
        if not 1 <= len(parts) <= 3 or not parts[0].strip():
            raise ValueError
        first = parts[0].strip()
        values: dict[str, Any] = {"method": first} if first in ("mtp", "eagle") else {"draft_model": first}
        if len(parts) > 1:
            values["draft_length"] = int(parts[1])
        if len(parts) > 2:
            alphas = [float(a) for a in parts[2].split(",")]
            values["acceptance"] = alphas[0] if len(alphas) == 1 else alphas
    except ValueError:
        raise _fail(f"option --speculate: expected DRAFT:K:ALPHA {example}, got {text!r}") from None
    try:
        speculation = Speculation(**values)
        if speculation.draft_model is not None:
            registry.model(speculation.draft_model)
    except (CalculatorError, KeyError) as exc:
        raise _fail(f"option --speculate: {exc}") from None
    return speculation


def _speculation_text(spec: Any) -> str:
    """How the header line names the plan's speculative decoding (its drafter, draft length and acceptance)."""
    drafter = {"draft": f"draft {spec.draft_model}", "mtp": "the model's MTP layers", "eagle": "an EAGLE-3 head"}
    alphas = spec.acceptance if isinstance(spec.acceptance, tuple) else (spec.acceptance,)
    alpha = ", ".join(f"{a:g}" for a in alphas)
    return (
        f"; speculative decoding with {drafter[spec.method]} ({spec.draft_length} tokens per round, acceptance {alpha})"
    )


#: The traffic flags --trace replaces (with the Workload field each sets).
_TRAFFIC = {
    "rate": "arrival_rate",
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "arrival_cv": "arrival_cv",
    "input_cv": "input_cv",
    "output_cv": "output_cv",
}


def _missing(model: str | None, sizing: SizingFlags, rate_known: bool = False) -> list[str]:
    """The required sizing inputs not given: MODEL, the traffic (unless --trace) and the two targets."""
    needed: dict[str, Any] = {"MODEL": model, "--ttft": sizing.ttft, "--tpot": sizing.tpot}
    if sizing.trace is None:
        needed |= {"--rate": sizing.rate or rate_known or None, "--input": sizing.input_tokens,
                   "--output": sizing.output_tokens}  # fmt: skip
    order = ("MODEL", "--rate", "--input", "--output", "--ttft", "--tpot")
    return [name for name in order if name in needed and needed[name] is None]


@dataclasses.dataclass(frozen=True)
class SizingInputs:
    """What the sizing flags say: the model, the engine and :func:`~calculator.fleet.size_fleet`'s parts.

    ``defaults`` lists the registry price entries :func:`_fill_prices` took for the accelerators
    given no ``--price``.
    """

    model: str
    engine: str | None
    workload: Workload
    targets: Targets
    space: SearchSpace
    serving: ServingOptions
    costs: Costs
    defaults: tuple[str, ...] = ()

    def parts(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~calculator.fleet.size_fleet` (and of the sizers beside it)."""
        return {"model": self.model, "workload": self.workload, "targets": self.targets, "space": self.space,
                "engine": self.engine, "serving": self.serving, "costs": self.costs}  # fmt: skip

    def record(self, *parts: str) -> dict[str, Any]:
        """The inputs as the provenance of an export lists them: ``workload.arrival_rate``, ``targets.tpot``, ...

        Only the named parts (default every one); unset values are left out.
        """
        from ..results import flatten

        chosen = parts or ("workload", "targets", "space", "serving", "costs")
        fields = flatten({name: getattr(self, name) for name in chosen})
        head = {"model": self.model, "engine": self.engine}
        return {k: v for k, v in {**head, **fields}.items() if v is not None}


def _sizing_inputs(model: str | None, sizing: SizingFlags, registry: Any, rate: Any = None) -> SizingInputs:
    """:func:`~calculator.fleet.size_fleet`'s parts from the sizing options.

    ``rate`` (a quantity) stands in for a missing ``--rate`` (``size --demand`` sizes at the curve's peak).
    Every check that names a flag runs here, before any sizing; each part checks its own fields.
    """
    from ..fleet import Costs, SearchSpace, ServingOptions, Targets, Workload

    if model is None:
        raise _fail("missing MODEL")
    if sizing.trace is not None:
        given = [_flag(name) for name in _TRAFFIC if getattr(sizing, name) is not None]
        if given:
            raise _fail(f"--trace gives the rate, the lengths and their CVs; leave out {', '.join(given)}")
        with _library_errors():
            workload = Workload.from_trace(sizing.trace)
    else:
        arrival = _quantity("rate", sizing.rate, "request/s", bare="request/s", positive=True) if sizing.rate else rate
        flags = {field: getattr(sizing, name) for name, field in _TRAFFIC.items()}
        traffic = {field: value for field, value in flags.items() if value is not None}
        with _library_errors():
            workload = Workload(**{**traffic, "arrival_rate": arrival})
    if sizing.max_utilization == 0:
        raise _fail("option --max-utilization: must be greater than zero (at most 1), got 0")
    if (sizing.prefix_hit > 0) != (sizing.shared_prefix > 0):
        raise _fail(
            "--prefix-hit and --shared-prefix go together: the share of requests that hit the prefix cache, "
            "and the tokens of the prefix they share"
        )
    if sizing.shared_prefix > workload.input_tokens:
        raise _fail(
            f"--shared-prefix {sizing.shared_prefix:g} is longer than the mean prompt "
            f"({workload.input_tokens:g} tokens)"
        )
    targets = {
        "ttft": _quantity("ttft", sizing.ttft, "s", positive=True),
        "tpot": _quantity("tpot", sizing.tpot, "s", positive=True),
        "tbt": _quantity("tbt", sizing.tbt, "s", positive=True) if sizing.tbt is not None else None,
        "ttft_percentile": _percentile(sizing.percentile),
        "max_utilization": sizing.max_utilization,
        "tpot_percentile": _percentile(sizing.tpot_percentile, "--tpot-percentile"),
        "tbt_percentile": _percentile(sizing.tbt_percentile, "--tbt-percentile"),
    }
    if targets["tbt_percentile"] is not None and targets["tbt"] is None:
        raise _fail("option --tbt-percentile needs --tbt, the token gap at that percentile")
    space: dict[str, Any] = {"accelerators": sizing.accelerator, "precisions": sizing.precision,
                             "kv_precision": sizing.kv_precision}  # fmt: skip
    if sizing.tensor_parallel:
        space["tensor_parallel"] = tuple(sizing.tensor_parallel)
    if sizing.moe_layout:
        space["moe_layouts"] = tuple(sizing.moe_layout)
    serving: dict[str, Any] = {
        "prefix_hit_rate": sizing.prefix_hit,
        "shared_prefix_tokens": sizing.shared_prefix,
        "speculation": _speculation(sizing.speculate, registry),
        "chunk_size": sizing.chunk,
    }
    if sizing.router is not None:
        serving["router"] = sizing.router
    price = _prices(sizing.price) if sizing.price else None
    with _library_errors():
        return SizingInputs(
            model,
            sizing.engine,
            workload,
            Targets(**targets),
            SearchSpace(**space),
            ServingOptions(**serving),
            Costs(price),
        )


def _fill_prices(inputs: SizingInputs, registry: Any) -> SizingInputs:
    """``inputs`` with every candidate's price: the one given with --price, else the registry's (its entry noted)."""
    from ..fleet import default_price_entry

    given, accelerators = inputs.costs.gpu_hour, inputs.space.accelerators
    if isinstance(given, dict) and set(given) - set(accelerators):
        raise _fail(f"--price names {', '.join(sorted(set(given) - set(accelerators)))}, not a candidate (-a)")
    hourly, defaults = {}, []
    for name in accelerators:
        chosen = given.get(name) if isinstance(given, dict) else given
        if chosen is None:
            try:
                entry = default_price_entry(name, registry)
            except InputError:
                raise _fail(
                    f"the registry has no on-demand price for {name}; give one with --price {name}=USD/h "
                    f"(e.g. --price '{name}=2.5 USD/hour')"
                ) from None
            chosen = entry.price
            defaults.append(entry.id)
        hourly[name] = chosen
    costs = dataclasses.replace(inputs.costs, gpu_hour=hourly)
    return dataclasses.replace(inputs, costs=costs, defaults=tuple(defaults))


def _size_plan(inputs: SizingInputs, bar: Any, registry: Any, verify_options: dict[str, Any] | None = None) -> Any:
    """:func:`~calculator.fleet.size_fleet` of the inputs, with a task on the rich progress ``bar``.

    With ``verify_options`` the plan is also checked by simulation
    (:func:`calculator.simulation.verify_plan` with those options) and records the simulated replica count.
    """
    # the sizer's resolved problem and search, private to calculator.fleet: the progress bar follows the families,
    # which size_fleet (eight parameters, the parts) does not report
    from ..fleet.problem import _Problem
    from ..fleet.search import _size

    task = bar.add_task("searching configurations", total=None)
    problem = _Problem.of(**inputs.parts(), registry=registry)
    plan = _size(problem, progress=lambda done, total: bar.update(task, completed=done, total=total))
    if verify_options is not None:
        from ..simulation import verify_plan

        checked = verify_plan(plan, **verify_options)
        plan = dataclasses.replace(plan, simulated_replicas=checked.simulated_replicas, verification=checked)
    return plan


# ------------------------------------------------------------------------------------------- showing a plan


def _replicas(count: int) -> str:
    """``1 replica``, ``3 replicas``: a count of replicas. Every output writes GPUs as ``N x accelerator``."""
    return f"{count:,} replica{'' if count == 1 else 's'}"


def _shown(key: str, value: Any) -> str:
    """A field's value as text: quantities in the unit of :data:`calculator.sweeps.PLAN_UNITS` (not compacted)."""
    from ..sweeps import PLAN_UNITS
    from ..units import ureg

    if isinstance(value, ureg.Quantity):
        # a disaggregated plan's ttft and tpot in the service's units; an interval in its ends'
        units = {**PLAN_UNITS, "kv_handoff": "ms", "saving": "USD/hour"}
        unit = units.get(key) or units.get(f"service.{key}") or units.get(f"{key}.low")
        value = value.to(unit) if unit else value
        return f"{_number(float(value.magnitude))} {value.units:~P}"
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, tuple | list):
        return "(" + ", ".join("none" if item is None else _shown(key, item) for item in value) + ")"
    if isinstance(value, dict):
        return ", ".join(f"{name} {_shown(name, item)}" for name, item in value.items())
    return str(value)


def _field_lines(result: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """A plan's fields in sections, the plan's own first and then one per part (``layout``, ``service``, ...).

    Each row is the field's name as the JSON and CSV write it (a part's as ``part.name``), its value
    and unit, and the performance model's 80 % range where the plan has one (``service.ttft_interval``
    beside ``service.ttft``, ``gpus_interval`` beside ``gpus``). An infeasible plan shows no zeros.
    """
    from ..fleet.plan import PLAN_PARTS
    from ._tables import sections

    parts: dict[str, dict[str, Any]] = {"": {}}
    for key, value in result.to_dict().items():
        if key in PLAN_PARTS and isinstance(value, dict):
            parts[key] = {f"{key}.{name}": item for name, item in value.items()}
        else:
            parts[""][key] = value
    rows = {part or "plan": _field_rows(values, result, skip) for part, values in parts.items()}
    # a sentence (the reason, the kernels' basis, the serving options) reads better on its own line
    sentences = [f"{row[0]}: {row[1]}" for part in rows.values() for row in part if len(row[1]) > 40]
    tables = [
        (part, ("", "value", "unit", "80 % range"), [row for row in part_rows if len(row[1]) <= 40])
        for part, part_rows in rows.items()
    ]
    return [sections(tables, left=True), *sentences, ""]


def _field_rows(values: dict[str, Any], result: Any, skip: tuple[str, ...]) -> list[list[str]]:
    """The rows of one section of :func:`_field_lines`: name, value, unit and the interval of the value."""
    rows = []
    for key, value in values.items():
        if (
            key in skip
            or key.endswith("_interval")
            or value is None
            or (isinstance(value, str | dict | tuple) and not value)
            or not (result.feasible or isinstance(value, bool) or not isinstance(value, int | float) or value != 0)
        ):
            continue
        text, unit = _value_and_unit(key, value)
        span = values.get(f"{key}_interval")
        low, high = (_value_and_unit(key, end)[0] if end is not None else "none" for end in span or (None, None))
        rows.append([key, text, unit, f"{low}-{high}" if span else ""])
    return rows


def _value_and_unit(key: str, value: Any) -> tuple[str, str]:
    """A field's value as :func:`_shown` writes it, its unit apart (``147.1``, ``ms``); a flag is yes or no."""
    if isinstance(value, bool):
        return ("yes" if value else "no"), ""
    text = _shown(key, value)
    from ..units import ureg

    if isinstance(value, ureg.Quantity):
        number, _, unit = text.partition(" ")
        return number, unit
    return text, ""


def _understood(inputs: SizingInputs, trace: Path | None = None) -> list[str]:
    """The first lines of the output: the workload, the targets and the prices, as the command read them."""
    w, t, serving = inputs.workload, inputs.targets, inputs.serving
    lines = [
        f"workload: {_number(w.arrival_rate.m_as('request/s'))} request/s; "
        f"{_number(w.input_tokens)} prompt tokens -> {_number(w.output_tokens)} output tokens "
        f"(arrival CV {w.arrival_cv:.3g}, prompt-length CV {w.input_cv:.3g}, output-length CV {w.output_cv:.3g})"
        + (f"; read from the trace {trace.name}" if trace is not None else "")
        + (
            f"; prefix-cache hit rate {serving.prefix_hit_rate:g} on a {_number(serving.shared_prefix_tokens)}"
            "-token shared prefix"
            if serving.prefix_hit_rate
            else ""
        )
        + (f"; chunked prefill at {serving.chunk_size:,} tokens" if serving.chunk_size else "")
        + (_speculation_text(serving.speculation) if serving.speculation is not None else "")
    ]
    at = percentile_label(t.ttft_percentile)
    gap_at = "longest" if t.tbt_percentile is None else percentile_label(t.tbt_percentile)
    gap = f", token gap {_number(t.tbt.m_as('ms'))} ms ({gap_at})" if t.tbt is not None else ""
    lines.append(
        f"targets: TTFT {_number(t.ttft.m_as('ms'))} ms ({at}), "
        f"TPOT {_number(t.tpot.m_as('ms'))} ms ({percentile_label(t.tpot_percentile)}){gap}; "
        f"utilization at most {t.max_utilization:g}"
    )
    prices = inputs.costs.gpu_hour if isinstance(inputs.costs.gpu_hour, dict) else {}
    shown = ", ".join(f"{name} {_number(price.m_as('USD/hour'))} USD/hour" for name, price in prices.items())
    defaults = inputs.defaults
    lines.append(f"prices: {shown}" + (f" (registry entries: {', '.join(defaults)})" if defaults else " (given)"))
    return lines
