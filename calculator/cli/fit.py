"""``servecalc fit``: whether a model fits on a tensor-parallel group, and how many sequences at once.

The command prints one :class:`~calculator.memory.MemoryFit` (:func:`~calculator.memory.model_memory_fit`):
the JSON/CSV columns carry its field names, each with the meaning the result's docstring gives (per-device
figures are one device's); the table labels them for people, per device beside the whole model's.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from ..precision import DEFAULT_PRECISION
from ._app import (
    ExtraOption,
    Format,
    FormatOption,
    JsonOption,
    OutOption,
    WeightPrecisionOption,
    _emit,
    _format,
    _library_errors,
    _load,
    app,
    tokens,
)
from ._tables import sections
from .sizing import EngineOption, KvPrecisionOption, _quantity


class Basis(StrEnum):
    """The capacity bases of an accelerator's memory (:func:`~calculator.memory.model_memory_fit`)."""

    physical = "physical"
    nameplate = "nameplate"


#: How each field of the fit is shown in the table (the JSON keeps the library's base units).
FIT_UNITS = {
    "capacity": "GB",
    "weights": "GB",
    "reserve": "GB",
    "kv": "GB",
    "available": "GB",
    "free": "GB",
    "missing": "GB",
    "kv_per_token": "kB/token",
    "kv_per_request": "GB",
}


@app.command("fit")
def fit_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Registry model id or alias.")],
    accelerator: Annotated[str, typer.Option("--accelerator", "-a", metavar="GPU", help="Accelerator id.")],
    context: Annotated[
        int,
        typer.Option(metavar="TOKENS", parser=tokens(), help="Tokens per sequence, prompt + output (128K is 131,072)."),
    ],
    precision: WeightPrecisionOption = DEFAULT_PRECISION,
    tensor_parallel: Annotated[int, typer.Option("--tp", metavar="INT", min=1, help="GPUs the model splits over.")] = 1,
    batch: Annotated[int, typer.Option(metavar="INT", min=0, help="Sequences held at once (0: weights only).")] = 1,
    kv_precision: KvPrecisionOption = None,
    engine: EngineOption = None,
    reserve: Annotated[
        str, typer.Option(metavar="BYTES", help="Memory kept back per device (activations, CUDA graphs), e.g. '2 GB'.")
    ] = "2 GB",
    basis: Annotated[
        Basis, typer.Option(help="Capacity: physical (registered bytes, 80 GiB) or nameplate (80 GB).")
    ] = Basis.physical,
    block_size: Annotated[int, typer.Option("--block", metavar="TOKENS", min=1, help="KV page size.")] = 16,
    data_parallel: Annotated[
        int,
        typer.Option(
            metavar="INT",
            min=1,
            help="Mixture of experts: attention ranks of --tp GPUs each; batch and max_batch are then every rank's.",
        ),
    ] = 1,
    extra: ExtraOption = None,
    as_json: JsonOption = False,
    output_format: FormatOption = None,
    out: OutOption = None,
) -> None:
    """Whether MODEL fits on --tp GPUs at a context, and how many sequences at once (section 10.7.1).

    Prints whether the batch fits served by --engine (generic without one) under its memory policy, the
    largest batch at this context and the longest context at this batch there (what the predictor, the
    sizer and the simulator hold); then the chapter's formula with --reserve: the weights, reserve and KV
    cache per device and the KV bytes of one sequence. Exits with status 1 when it does not fit.
    """
    from ..memory import model_memory_fit
    from ..performance import engine_memory_fit, kv_cache_precision

    fmt = _format(output_format, as_json)
    registry = _load(None, extra)
    kept = _quantity("reserve", reserve, "GB")
    with _library_errors():
        spec, device = registry.model(model), registry.accelerator(accelerator)
        kv = kv_precision or kv_cache_precision(spec, device, precision, engine, served=model, registry=registry)
        fit = model_memory_fit(
            spec, device, context, batch, precision, kv, tensor_parallel, kept, basis.value, block_size,
            data_parallel=data_parallel, registry=registry,
        )  # fmt: skip
        whole = model_memory_fit(spec, device, context, batch, precision, kv, 1, kept, basis.value, block_size)
        held = engine_memory_fit(
            spec, device, precision, context, tensor_parallel, batch=max(batch, 1), engine=engine, kv_precision=kv,
            data_parallel=data_parallel, registry=registry,
        )  # fmt: skip
    header = {
        "model": spec.id,
        "accelerator": device.id,
        "precision": precision,
        "kv_precision": kv,
        "kv_precision_basis": "given" if kv_precision else f"{engine or 'generic'} engine default",
        "data_parallel": data_parallel,
        "gpus": tensor_parallel * data_parallel,
    }
    served = {
        "engine": held.engine,
        "memory_policy": held.memory_policy,
        "engine_weights_fit": held.weights_fit,
        "engine_max_batch": held.sequences,
        "engine_max_context": held.max_context,
        "engine_kv_block_tokens": held.block,
    }

    def table() -> str:
        first = _answer(held, spec, device, context, batch, data_parallel, tensor_parallel)
        return "\n".join([first, _formula(fit, kept), "", _sections(header, fit, whole, held)])

    _emit(
        fmt,
        out,
        (lambda: json.dumps({**header, **fit.to_json_dict(), **served}, indent=2)) if fmt is Format.json else table,
        lambda: _frame({**header, **served}, fit),
        models=["memory.model_memory_fit"],
        registry_ids=[spec.id, device.id],
        inputs={**header, "context": context, "batch": batch, "tensor_parallel": tensor_parallel, "reserve": kept},
        registry=registry,
    )
    raise typer.Exit(0 if held.weights_fit and batch <= held.sequences else 1)


def _answer(held: Any, spec: Any, device: Any, context: int, batch: int, ranks: int, tp: int) -> str:
    """The first line: the verdict under the engine's memory policy, on which GPUs, the largest batch and context."""
    asked = f"{batch:,} sequence{'s' if batch != 1 else ''} of {context:,} tokens"
    layout = f"TP {tp}" + (f", {ranks} attention ranks" if ranks > 1 else "")
    gpus = f"{tp * ranks} x {device.id} ({layout})"
    if not held.weights_fit:
        return f"answer: {asked} do not fit on {gpus} served by {held.engine}: {held.reason}"
    limit = " (the model's limit)" if held.max_context == spec.max_context else ""
    verdict = "fit" if batch <= held.sequences else "do not fit"
    return (
        f"answer: {asked} {verdict} on {gpus} served by {held.engine}: up to {held.sequences:,} sequences at this "
        f"context, or {held.max_context:,} tokens{limit} at this batch, under its memory policy "
        f"({held.memory_policy}); the predictor, the sizer and the simulator hold the same"
    )


def _formula(fit: Any, reserve: Any) -> str:
    """The second line: the chapter's formula (section 10.7.1) with the reserve given."""
    head = f"the chapter's formula (device memory less the weights and a {_value('reserve', reserve)} reserve)"
    also = f"up to {fit.max_batch:,} sequences at this context, or {fit.max_context:,} tokens at this batch"
    if fit.fits:
        return f"{head}: the batch fits with {_value('free', fit.free)} free per device; {also}"
    return f"{head}: the batch does not fit, {_value('missing', fit.missing)} short per device; {also}"


#: The memory rows of the table: (label, field of :class:`~calculator.memory.MemoryFit`, shown for the model too).
MEMORY_ROWS = (
    ("capacity", "capacity", False),
    ("weights", "weights", True),
    ("reserve (activations, CUDA graphs)", "reserve", False),
    ("KV cache of the batch", "kv", True),
    ("available for the KV cache", "available", False),
    ("free after the batch", "free", False),
    ("missing", "missing", False),
    ("KV cache per token", "kv_per_token", True),
    ("KV cache per sequence", "kv_per_request", True),
)


def _sections(header: dict[str, Any], fit: Any, whole: Any, held: Any) -> str:
    """The configuration, the memory per device beside the whole model's, and the limits of both policies.

    ``whole`` is the chapter's formula on one GPU (``--tp 1``): the model's own weights and KV bytes,
    which the per-device figures are a share of.
    """
    gpus = header["gpus"]
    setup = [
        ("model", header["model"]),
        ("accelerator", f"{gpus} x {header['accelerator']} (TP {fit.tensor_parallel}"
         + (f", {header['data_parallel']} attention ranks)" if header["data_parallel"] > 1 else ")")),
        ("weight precision", header["precision"]),
        ("KV-cache precision", f"{header['kv_precision']} ({header['kv_precision_basis']})"),
        ("batch x context", f"{fit.batch:,} x {fit.context:,} tokens"),
        ("capacity basis", fit.capacity_basis),
    ]  # fmt: skip
    memory = [
        (
            f"{label} [{FIT_UNITS[key]}]",
            _amount(key, getattr(fit, key)),
            _amount(key, getattr(whole, key)) if total else "",
        )
        for label, key, total in MEMORY_ROWS
    ]
    limits = [
        ("fits", "yes" if fit.fits else "no", "yes" if held.weights_fit and fit.batch <= held.sequences else "no"),
        ("largest batch at this context", f"{fit.max_batch:,}", f"{held.sequences:,}"),
        ("longest context at this batch [tokens]", f"{fit.max_context:,}", f"{held.max_context:,}"),
        ("KV page [tokens]", "", f"{held.block:,}"),
    ]
    return sections(
        [
            ("configuration", ("", ""), setup),
            ("memory (the chapter's formula)", ("", "per device", "whole model"), memory),
            ("limits", ("", "chapter's formula", f"{held.engine} engine's memory policy"), limits),
        ]
    )


def _amount(key: str, value: Any) -> str:
    """A memory field in its :data:`FIT_UNITS` unit, without the unit (the row's label carries it)."""
    from ..results import format_number

    return format_number(float(value.m_as(FIT_UNITS[key])))


def _value(key: str, value: Any) -> str:
    from .sizing import _shown

    if key in FIT_UNITS:
        value = value.to(FIT_UNITS[key])
    return _shown(key, value)


def _frame(header: dict[str, Any], fit: Any) -> Any:
    """One row: the header columns, then the fit's columns in :data:`FIT_UNITS`."""
    frame = fit.to_frame(FIT_UNITS)
    for position, (key, value) in enumerate(header.items()):
        frame.insert(position, key, value)
    return frame
