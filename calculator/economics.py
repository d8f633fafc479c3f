"""Serving economics: lifetime cost and the serving-to-training balance (section 10.4); cost per token (10.9.5)."""

from __future__ import annotations

from .formula import formula, var

__all__ = ["lifetime_cost", "cost_per_million_tokens"]


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


@formula(
    result=var("USD/megatoken", r"c_{\mathrm{M}}", "nonnegative", "cost per million useful tokens"),
    reference="Table 14, section 10.9.5",
    gpus=var("", r"N_{\mathrm{GPU}}", "positive", "billed GPUs of the replica"),
    price_per_gpu_hour=var("USD/hour", r"p_{\mathrm{GPU}}", "nonnegative", "price of one GPU-hour"),
    throughput=var("megatoken/hour", r"r_{\mathrm{tok}}", description="useful (SLO-compliant) tokens per unit time"),
)
def cost_per_million_tokens(gpus, price_per_gpu_hour, throughput):
    r"""Cost per million useful tokens of a replica: billed GPU time over completed tokens.

    Parameters
    ----------
    gpus : float
        GPUs billed for the replica.
    price_per_gpu_hour : Quantity [currency / time]
        Price of one GPU for one hour.
    throughput : Quantity [token / time]
        Useful tokens the replica completes (SLO-compliant, at the target quality).

    Returns
    -------
    Quantity [currency / token]
        In USD per million tokens.

    Notes
    -----
    .. math:: c_{\mathrm{M}} = \frac{N_{\mathrm{GPU}} \, p_{\mathrm{GPU}}}{r_{\mathrm{tok}}}

    Table 14 (section 10.9.5): at equal GPU prices and unchanged useful throughput, cost falls in
    proportion to the GPU count (8 -> 4 -> 2 A100s: $2.40 -> $1.20 -> $0.60); if the smaller replica
    completes fewer qualifying tokens per second, the cost falls by less and can rise.

    Examples
    --------
    >>> from calculator.units import Q_
    >>> cost_per_million_tokens(8, Q_(2.16, "USD/hour"), Q_(2000, "token/s"))
    <Quantity(2.4, 'USD / megatoken')>
    """
    return gpus * price_per_gpu_hour / throughput
