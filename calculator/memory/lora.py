"""LoRA adapters (section 10.7.9, eq. 7): parameters per projection, per adapter, and resident bytes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import bits_of, checked, transformer_of
from ..errors import InputError
from ..formula import formula, var
from ..types import Count, ModelRef, Precision
from ..units import shown
from .weights import weight_bytes

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "lora_parameters",
    "lora_adapter_parameters",
    "lora_adapter_bytes",
]


# ============================================================================================
# LoRA adapters (section 10.7.9)


@formula(
    result=var("", r"N_{\mathrm{LoRA}}", description="adapter parameters of one projection"),
    reference="Eq. 7, section 10.7.9",
    input_width=var("", r"d_{\mathrm{in}}", "positive_integer", "projection input width"),
    output_width=var("", r"d_{\mathrm{out}}", "positive_integer", "projection output width"),
    rank=var("", "r", "positive_integer", "adapter rank"),
    example={"input_width": 8192, "output_width": 8192, "rank": 16},
)
def lora_parameters(input_width, output_width, rank):
    r"""Parameters a rank-``r`` LoRA adapter adds to one ``d_in x d_out`` projection.

    Parameters
    ----------
    input_width, output_width : int
    rank : int

    Returns
    -------
    float

    Notes
    -----
    .. math:: N_{\mathrm{LoRA}} = r \, (d_{\mathrm{in}} + d_{\mathrm{out}})

    Equation 7: :math:`A \in \mathbb{R}^{r \times d_{in}}`, :math:`B \in \mathbb{R}^{d_{out} \times r}`,
    instead of a full :math:`d_{in} d_{out}` matrix.

    Examples
    --------
    >>> lora_parameters(8192, 8192, 16)
    262144.0
    """
    return rank * (input_width + output_width)


_PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")


def _projection_shapes(model: Any) -> dict[str, tuple[int, int]]:
    hidden = model.hidden_size
    shapes: dict[str, tuple[int, int]] = {}
    if model.attention != "mla" and model.head_dim is not None and hidden is not None:
        q_width = model.attention_heads * model.head_dim
        kv_width = model.kv_heads * model.head_dim
        shapes |= {"q": (hidden, q_width), "k": (hidden, kv_width), "v": (hidden, kv_width), "o": (q_width, hidden)}
    if model.experts == 1 and model.intermediate_size is not None and hidden is not None:
        inner = model.intermediate_size
        shapes |= {"gate": (hidden, inner), "up": (hidden, inner), "down": (inner, hidden)}
    return shapes


@checked()
def lora_adapter_parameters(
    model: ModelRef, rank: Count, projections: Iterable[str] = ("q", "k", "v", "o"), *, registry: Registry | None = None
) -> int:
    """Parameters of one LoRA adapter applied to the given projections of every layer.

    Parameters
    ----------
    model : str or Model
        Needs ``hidden_size`` (and ``intermediate_size`` for the MLP projections).
    rank : int
        Adapter rank ``r`` (one number).
    projections : iterable of str
        Any of ``q, k, v, o`` (attention; MHA/GQA/MQA) and ``gate, up, down`` (dense MLP).
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    int

    Raises
    ------
    InputError
        For a projection the model's registry entry cannot size: MLA attention projections and
        mixture-of-experts MLPs (give their widths to :func:`lora_parameters` directly).

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=8e9, layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    ...     attention="gqa")
    >>> lora_adapter_parameters(m, 16)
    13631488
    """
    name = "lora_adapter_parameters"
    resolved = transformer_of(model, name, registry=registry)
    if np.ndim(rank):
        raise InputError(f"{name}(): argument 'rank' must be one number, got {shown(rank)}")
    shapes = _projection_shapes(resolved)
    total = 0.0
    for projection in projections:
        if projection not in _PROJECTIONS:
            raise InputError(f"{name}(): unknown projection {projection!r}; choose from {_PROJECTIONS}")
        if projection not in shapes:
            raise InputError(
                f"{name}(): cannot size projection {projection!r} of model '{resolved.id}' from its registry entry "
                f"(needs hidden_size/intermediate_size; MLA attention and MoE MLPs are not covered)"
            )
        input_width, output_width = shapes[projection]
        total += lora_parameters.numeric(input_width=input_width, output_width=output_width, rank=rank)
    return int(total * resolved.layers)


@checked(adapters="nonnegative_integer")
def lora_adapter_bytes(
    model: ModelRef,
    rank: Count,
    projections: Iterable[str] = ("q", "k", "v", "o"),
    precision: Precision = "fp16",
    adapters: Count = 1,
    *,
    registry: Registry | None = None,
) -> Any:
    """Resident bytes of ``adapters`` LoRA adapters of one rank (section 10.7.9's adapter budget).

    Parameters
    ----------
    model, rank, projections
        As for :func:`lora_adapter_parameters`.
    precision : str or float
        Adapter weight precision or bits.
    adapters : int or array of int
        Simultaneously loaded adapters.
    registry : Registry, optional
        Where a model id resolves (default: the packaged registry).

    Returns
    -------
    Quantity [information]

    Examples
    --------
    >>> from calculator.registry import Model
    >>> m = Model(id="m", name="m", provenance="user", sources=[{"source": "u", "fields": ["layers"]}],
    ...     parameters=8e9, layers=32, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
    ...     attention="gqa")
    >>> lora_adapter_bytes(m, 16, adapters=100).to("GB")
    <Quantity(2.7262976, 'gigabyte')>
    """
    parameters = lora_adapter_parameters(model, rank, projections, registry=registry)
    return weight_bytes(
        parameters * np.asarray(adapters, dtype=float), bits_of("lora_adapter_bytes", "precision", precision)
    )
