"""The serving tax (section 10.3.2, Eq. 1): inference, network, serialization, coordination and queueing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._support import checked
from ..errors import InputError
from ..formula import formula, var
from ..parallelism import point_to_point_time
from ..results import Result, plain
from ..types import Time
from ..units import Q_

__all__ = [
    "end_to_end_latency",
    "network_latency",
    "coordination_latency",
    "ServingTaxBudget",
    "serving_tax_budget",
]


# --------------------------------------------------------------------------------------------
# Section 10.3.2: the serving tax (Eq. 1)


@formula(
    result=var("s", r"L_{\mathrm{e2e}}", "nonnegative", "end-to-end request latency"),
    reference="Eq. 1, section 10.3.2",
    inference=var("s", r"L_{\mathrm{inf}}", "nonnegative", "model execution"),
    network=var("s", r"L_{\mathrm{net}}", "nonnegative", "exposed network transfers"),
    serialization=var("s", r"L_{\mathrm{ser}}", "nonnegative", "exposed serialization"),
    coordination=var("s", r"L_{\mathrm{coord}}", "nonnegative", "exposed coordination (critical path)"),
    queueing=var("s", r"L_{\mathrm{queue}}", "nonnegative", "queueing delay"),
    example={
        "inference": "70 ms",
        "network": "2 ms",
        "serialization": "1 ms",
        "coordination": "3 ms",
        "queueing": "10 ms",
    },
)
def end_to_end_latency(inference, network, serialization, coordination, queueing):
    r"""End-to-end request latency as model execution plus the exposed serving tax (Eq. 1).

    Parameters
    ----------
    inference : Quantity [time]
        Model execution on the request's critical path.
    network : Quantity [time]
        Exposed network transfer time (see :func:`network_latency`).
    serialization : Quantity [time]
        Exposed serialization and deserialization.
    coordination : Quantity [time]
        Exposed coordination, e.g. a fan-out's join (see :func:`coordination_latency`).
    queueing : Quantity [time]
        Waiting for busy resources.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{e2e}} = L_{\mathrm{inf}} + L_{\mathrm{net}} + L_{\mathrm{ser}}
              + L_{\mathrm{coord}} + L_{\mathrm{queue}}

    Equation 1 (§10.3.1). Each term is an *exposed* contribution on the critical path, so work
    that overlaps is not counted twice. The serving tax is :math:`L_{\mathrm{e2e}} - L_{\mathrm{inf}}`.

    Examples
    --------
    >>> end_to_end_latency(Q_(70, "ms"), Q_(2, "ms"), Q_(1, "ms"), Q_(3, "ms"), Q_(10, "ms")).to("ms")
    <Quantity(86.0, 'millisecond')>
    """
    return inference + network + serialization + coordination + queueing


@formula(
    result=var("s", r"L_{\mathrm{net}}", "nonnegative", "exposed network latency"),
    reference="section 10.3.2 (sequential exchanges; alpha-beta transfer model)",
    exchanges=var("", "n", "nonnegative", "sequential exchanges on the critical path"),
    startup_latency=var("s", r"\alpha", "nonnegative", "fixed cost of one exchange"),
    payload=var("B", "M", "nonnegative", "bytes moved per exchange"),
    bandwidth=var("B/s", r"\beta", "positive", "link bandwidth"),
    example={"exchanges": 1, "startup_latency": "0 s", "payload": "100 MB", "bandwidth": "32 GB/s"},
)
def network_latency(exchanges, startup_latency, payload, bandwidth):
    r"""Exposed network latency of sequential exchanges, each a startup cost plus a transfer.

    Parameters
    ----------
    exchanges : float
        Sequential (non-overlapping) exchanges on the request's critical path.
    startup_latency : Quantity [time]
        Fixed cost per exchange (the alpha of the alpha-beta model).
    payload : Quantity [information]
        Bytes per exchange; 0 for a latency-only estimate.
    bandwidth : Quantity [information / time]
        Link bandwidth (the beta), in the direction the payload travels.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: L_{\mathrm{net}} = n \, (\alpha + M / \beta)

    Each exchange is :func:`calculator.parallelism.point_to_point_time`. Section 10.3.2 (§10.3.1):
    four sequential exchanges of 50-500 us expose 200 us to 2 ms.
    Example 10.2 (§10.6.5) uses the bandwidth-only term (``n = 1``, ``alpha = 0``). Real collectives
    also depend on topology, contention and rounds; check the implementation before charging one
    round trip per collective.

    Examples
    --------
    >>> network_latency(1, Q_(0, "s"), Q_(100, "MB"), Q_(32, "GB/s")).to("ms")
    <Quantity(3.125, 'millisecond')>
    """
    return exchanges * point_to_point_time.func(payload, bandwidth, startup_latency)


@checked()
def coordination_latency(branch_latencies: Time, join_overhead: Time) -> Time:
    """Critical path of a fan-out: the join's own overhead plus the slowest required branch.

    Parameters
    ----------
    branch_latencies : Quantity [time], array (..., branches)
        Latency of each concurrent branch (feature stores, retrieval, rankers).
    join_overhead : Quantity [time]
        Exposed coordination work at the join.

    Returns
    -------
    Quantity [time]

    Notes
    -----
    Section 10.3.2 (§10.3.1): independent calls run concurrently, so the critical path includes
    the slowest branch, not the sum of the branches.

    Examples
    --------
    >>> coordination_latency(Q_([4, 9, 6], "ms"), Q_(1, "ms")).to("ms")
    <Quantity(10.0, 'millisecond')>
    """
    branches = np.asarray(branch_latencies)
    if branches.ndim == 0 or branches.shape[-1] == 0:
        raise InputError("coordination_latency(): argument 'branch_latencies' needs at least one branch")
    return Q_(plain(join_overhead + branches.max(axis=-1)), "s")


@dataclass(frozen=True, repr=False)
class ServingTaxBudget(Result):
    """A request's latency budget split by Eq. 1, with the slack left for queueing.

    Attributes
    ----------
    slo : Quantity [time]
        The end-to-end target.
    inference, network, serialization, coordination : Quantity [time]
        The exposed terms of Eq. 1 other than queueing.
    non_compute_slack : Quantity [time]
        ``slo - inference``: what routing, transfers, serialization, coordination and queueing share.
    serving_tax : Quantity [time]
        ``network + serialization + coordination`` (the tax before any queueing).
    queueing_slack : Quantity [time]
        What remains for queueing (and batch formation); negative when the budget is already spent.
    feasible : bool or ndarray
        ``queueing_slack >= 0``.
    """

    slo: Time
    inference: Time
    network: Time
    serialization: Time
    coordination: Time
    non_compute_slack: Time
    serving_tax: Time
    queueing_slack: Time
    feasible: bool | np.ndarray


@checked(slo="positive")
def serving_tax_budget(
    slo: Time,
    inference: Time,
    network: Time | None = None,
    serialization: Time | None = None,
    coordination: Time | None = None,
) -> ServingTaxBudget:
    """Spend a latency target on Eq. 1's terms and report the slack left for queueing.

    Parameters
    ----------
    slo : Quantity [time]
        End-to-end latency target.
    inference : Quantity [time]
        Model execution time on an idle replica.
    network, serialization, coordination : Quantity [time], optional
        Exposed serving-tax terms (zero when omitted).

    Returns
    -------
    ServingTaxBudget

    Notes
    -----
    Eq. 1 (§10.3.1) read as a budget: ``queueing_slack = slo - (inference + network +
    serialization + coordination)``. For a budget over arbitrary named stages see
    :func:`calculator.cases.latency_budget`. Section 10.3.2 (§10.3.1): a 100 ms target with 70 ms of
    execution leaves 30 ms for everything else; four exchanges can claim up to 2 ms of it (§10.3.1).

    Examples
    --------
    >>> b = serving_tax_budget(Q_(100, "ms"), Q_(70, "ms"), network=Q_(2, "ms"))
    >>> b.non_compute_slack.to("ms"), b.queueing_slack.to("ms")
    (<Quantity(30.0, 'millisecond')>, <Quantity(28.0, 'millisecond')>)
    """
    parts = {
        "inference": inference,
        "network": 0.0 if network is None else network,
        "serialization": 0.0 if serialization is None else serialization,
        "coordination": 0.0 if coordination is None else coordination,
    }
    before_queueing = end_to_end_latency.numeric(queueing=0.0, **parts)
    slack = slo - before_queueing
    return ServingTaxBudget(
        slo=Q_(plain(slo), "s"),
        **{k: Q_(plain(v), "s") for k, v in parts.items()},
        non_compute_slack=Q_(plain(slo - inference), "s"),
        serving_tax=Q_(plain(before_queueing - inference), "s"),
        queueing_slack=Q_(plain(slack), "s"),
        feasible=plain(slack >= 0),
    )
