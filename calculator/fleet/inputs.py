"""What the fleet sizer plans for: the traffic, speculative decoding, GPU-hour prices and the default grid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._support import count, scalar
from ..errors import InputError
from ..results import Result
from ..types import AcceleratorRef
from ..units import Q_, ureg
from ._common import _read_trace

if TYPE_CHECKING:
    from ..registry import Registry

__all__ = [
    "DEFAULT_BATCHES",
    "DEFAULT_TENSOR_PARALLEL",
    "Speculation",
    "Workload",
    "default_price",
    "default_price_entry",
]

DEFAULT_TENSOR_PARALLEL = (1, 2, 4, 8)
#: The largest coefficient of variation of a length or of inter-arrival times (traces measure 0.5 to about 5).
MAX_CV = 100.0
#: The longest draft a speculation round proposes (engines use 1 to about 10; the gain peaks well below this).
MAX_DRAFT_LENGTH = 256
#: Operating batches searched: every size to 16, then steps that keep the grid about 90 points.
DEFAULT_BATCHES = tuple(sorted({*range(1, 17), *range(18, 65, 2), *range(68, 257, 4), *range(264, 1025, 8)}))


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, repr=False)
class Workload(Result):
    """Traffic as a capacity planner has it: a rate and request lengths with their variability.

    Attributes
    ----------
    arrival_rate : Quantity [request / time]
        Mean request rate to serve.
    input_tokens, output_tokens : float
        Mean prompt and output lengths.
    input_cv, output_cv : float
        Coefficients of variation of the lengths (0 for fixed lengths).
    arrival_cv : float
        Coefficient of variation of inter-arrival times (1 for Poisson, > 1 for bursty traffic).
    """

    arrival_rate: Any
    input_tokens: float
    output_tokens: float
    input_cv: float = 0.0
    output_cv: float = 0.0
    arrival_cv: float = 1.0

    def __post_init__(self) -> None:
        rate = self.arrival_rate
        if not isinstance(rate, ureg.Quantity) or rate.dimensionality != ureg.parse_units("request/s").dimensionality:
            raise InputError(f"Workload: 'arrival_rate' must be a rate in request/s, got {rate!r}")
        if not rate.magnitude > 0 or not np.isfinite(rate.magnitude):
            raise InputError(f"Workload: 'arrival_rate' must be a finite rate > 0, got {rate!r}")
        for name in ("input_tokens", "output_tokens"):
            # A length is a token count: a plain number or a quantity of tokens.
            tokens = scalar("Workload", name, getattr(self, name), "token", "positive")
            if not tokens >= 1:
                raise InputError(f"Workload: '{name}' must be >= 1 token, got {getattr(self, name)!r}")
            object.__setattr__(self, name, tokens)
        for name in ("input_cv", "output_cv", "arrival_cv"):
            cv = scalar("Workload", name, getattr(self, name))
            if not cv <= MAX_CV:
                raise InputError(f"Workload(): argument '{name}' must be at most {MAX_CV:g}, got {cv:g}")
            object.__setattr__(self, name, cv)

    @classmethod
    def from_trace(
        cls, trace: Any, *, time: str = "arrival_time", inputs: str = "input_tokens", outputs: str = "output_tokens"
    ) -> Workload:
        """A workload from a request trace (CSV path or DataFrame with arrival times in seconds).

        The rate is the number of requests over the span of arrivals, the lengths' means and CVs
        come from the columns, and the arrival CV from the inter-arrival times.
        """
        frame = _read_trace(trace, (time, inputs, outputs))
        times = np.sort(frame[time].to_numpy(dtype=float))
        span = times[-1] - times[0]
        if len(times) < 2 or span <= 0:
            raise InputError("Workload.from_trace(): the trace needs at least two distinct arrival times")
        gaps = np.diff(times)
        lengths_in = frame[inputs].to_numpy(dtype=float)
        lengths_out = frame[outputs].to_numpy(dtype=float)
        return cls(
            arrival_rate=Q_((len(times) - 1) / span, "request/s"),
            input_tokens=float(lengths_in.mean()),
            output_tokens=float(lengths_out.mean()),
            input_cv=float(lengths_in.std() / lengths_in.mean()),
            output_cv=float(lengths_out.std() / lengths_out.mean()),
            arrival_cv=float(gaps.std() / gaps.mean()) if gaps.mean() > 0 else 0.0,
        )


@dataclass(frozen=True, repr=False)
class Speculation(Result):
    """Speculative decoding with a draft model (section 10.7.6).

    Attributes
    ----------
    draft_model : str
        Registry id of the draft model (it runs on the same devices as the target).
    draft_length : int
        Draft tokens proposed per round, ``K``.
    acceptance : float
        Per-token acceptance probability, ``alpha``.
    """

    draft_model: str
    draft_length: int = 4
    acceptance: float = 0.7

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "draft_length", count("Speculation", "draft_length", self.draft_length, 1, MAX_DRAFT_LENGTH)
        )
        object.__setattr__(self, "acceptance", scalar("Speculation", "acceptance", self.acceptance, "", "probability"))


def default_price(accelerator: AcceleratorRef, registry: Registry | None = None) -> Any:
    """A GPU-hour price for ``accelerator`` from the registry: the cheapest published on-demand price.

    Falls back to the chapter's scenario prices; raises :class:`InputError` when the registry has
    none (pass ``price=`` to :func:`size_fleet`). :func:`default_price_entry` gives the entry.
    ``registry`` defaults to :func:`~calculator.registry.load_registry`.
    """
    return default_price_entry(accelerator, registry).price


def default_price_entry(accelerator: AcceleratorRef, registry: Registry | None = None) -> Any:
    """The registry price entry :func:`default_price` reads (to cite it as a source)."""
    from ..registry import load_registry

    reg = registry if registry is not None else load_registry()
    device = reg.accelerator(accelerator)
    prices = [p for p in reg.prices.values() if p.accelerator == device.id and p.market == "on_demand"]
    published = [p for p in prices if p.provenance == "published"] or prices
    if not published:
        raise InputError(
            f"the registry has no on-demand price for accelerator '{device.id}'; pass price= (USD/hour per GPU)"
        )
    return min(published, key=lambda p: p.price.m_as("USD/hour"))
