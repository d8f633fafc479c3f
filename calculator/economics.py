"""Serving economics: lifetime cost and the serving-to-training balance (chapter section 10.4)."""

from __future__ import annotations

from .formula import formula, var

__all__ = ["lifetime_cost"]


@formula(
    result=var("USD", r"C_{\mathrm{life}}", "nonnegative", "lifetime cost of one model version"),
    reference="Eq. 2, section 10.4",
    training_cost=var("USD", r"C_{\mathrm{train}}", "nonnegative", "cost to train this model version"),
    cost_per_query=var("USD/request", "c_{q}", "nonnegative", "average serving cost per served query"),
    duration=var("s", r"T_{\mathrm{deploy}}", "nonnegative", "deployment duration"),
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average rate of served queries"),
)
def lifetime_cost(training_cost, cost_per_query, duration, arrival_rate):
    r"""Lifetime cost of a model version: training plus serving over its deployment.

    Parameters
    ----------
    training_cost : Quantity [currency]
        Cost to train this version.
    cost_per_query : Quantity [currency / request]
        Average cost per served query, including billed idle and reserved capacity.
    duration : Quantity [time]
        Deployment duration. Pass days explicitly (the chapter's year is 365 days).
    arrival_rate : Quantity [request / time]
        Average rate of served queries, counting the same queries used to estimate the unit cost.

    Returns
    -------
    Quantity [currency]

    Notes
    -----
    .. math:: C_{\mathrm{life}} = C_{\mathrm{train}} + c_q \, T_{\mathrm{deploy}} \, \lambda

    Equation 2 of the chapter (section 10.4). It holds for one model version at a fixed query rate
    and a fixed average unit cost; when the mix, the fleet or the price changes, evaluate each
    interval separately and add them.

    Examples
    --------
    Napkin Math 10.1: 1M daily users x 50 requests at $0.001 for a year, on a $2M training bill.

    >>> from calculator.units import Q_
    >>> rate = Q_(1e6 * 50, "request/day")
    >>> lifetime_cost(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(365, "day"), rate).to("USD")
    <Quantity(20250000.0, 'USD')>
    """
    return training_cost + cost_per_query * duration * arrival_rate
