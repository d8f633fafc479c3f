"""Serving economics: lifetime cost and the serving/training balance (sections 10.1-10.5, 10.9.5).

Equation 2 and its parts (request volume, serving cost and its rate, the serving-to-training
ratio, the crossover time of Figure 3), training-cost composition, cost per million useful tokens
(Table 14), the constructed unit-cost curves of Figure 2 and their break-even volume, and the serving
hierarchy of Table 5. The unit cost with billed idle, startup and reserved capacity is
:func:`calculator.regions.cost_per_completed_request`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

from ._support import check_broadcast, checked, count, magnitude
from .errors import InputError
from .formula import formula, var
from .results import Result, plain
from .types import Count, Dimension, Money, MoneyPerRequest, Number, Rate, Time
from .units import Q_, shown

__all__ = [
    "user_request_rate",
    "request_volume",
    "serving_cost_rate",
    "serving_cost",
    "lifetime_cost",
    "piecewise_lifetime_cost",
    "serving_training_ratio",
    "unit_cost_savings",
    "training_cost",
    "cost_per_million_tokens",
    "crossover_time",
    "CostCurve",
    "cumulative_cost_curve",
    "unit_cost_at_volume",
    "break_even_volume",
    "SERVING_HIERARCHY",
    "serving_hierarchy_level",
]

#: The most samples :func:`cumulative_cost_curve` draws (a million points is far past any plot's resolution).
MAX_CURVE_POINTS = 1_000_000


@formula(
    result=var("request/day", r"\lambda", description="model requests per day"),
    reference="Napkin Math 10.1; section 10.5.1 (count model calls per interaction)",
    users=var("", "U", "nonnegative", "active users"),
    requests_per_user=var("request/day", "r_{u}", "nonnegative", "requests (interactions) per user per day"),
    calls_per_request=var("", "k", "positive", "model calls each request triggers"),
    example={"users": 1e6, "requests_per_user": "50 request/day", "calls_per_request": 1},
)
def user_request_rate(users, requests_per_user, calls_per_request):
    r"""Model request rate from the user base: users x requests per user x model calls per request.

    Parameters
    ----------
    users : float
        Active users (daily active users for a per-day rate).
    requests_per_user : Quantity [request / time]
        Requests or interactions per user per unit time.
    calls_per_request : float
        Model calls one request triggers (1 for one call; a page load or one LLM action can trigger
        several, §10.5.1).

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: \lambda = U \, r_u \, k

    Napkin Math 10.1 (§10.3.2): 10^6 users x 50 requests a day. Section 10.5.1: capacity
    planning counts the model work each interaction triggers, not the user count.

    Examples
    --------
    >>> user_request_rate(1e6, Q_(50, "request/day"), 1)
    <Quantity(50000000.0, 'request / day')>
    """
    return users * requests_per_user * calls_per_request


@formula(
    result=var("request", "N", "nonnegative", "requests served over a period"),
    reference="Napkin Math 10.1 (annual inference volume)",
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average served request rate"),
    duration=var("s", "T", "nonnegative", "period"),
    example={"arrival_rate": "10000 request/s", "duration": "730 day"},
)
def request_volume(arrival_rate, duration):
    r"""Requests served over a period at an average rate.

    Parameters
    ----------
    arrival_rate : Quantity [request / time]
        Average served rate.
    duration : Quantity [time]
        The period (pass 365 days for the chapter's year).

    Returns
    -------
    Quantity [request]

    Notes
    -----
    .. math:: N = \lambda T

    Napkin Math 10.1 (§10.3.2): about 18.25B requests a year; §10.3.2: 6.31e11 queries over
    730 days at 10,000 QPS.

    Examples
    --------
    >>> request_volume(Q_(10_000, "request/s"), Q_(730, "day"))
    <Quantity(6.3072e+11, 'request')>
    """
    return arrival_rate * duration


@formula(
    result=var("USD/s", r"\dot{C}_{\mathrm{serve}}", "nonnegative", "serving spend per unit time"),
    reference="Eq. 2, section 10.4 (recurring serving expense)",
    cost_per_query=var("USD/request", "c_{q}", "nonnegative", "average serving cost per served query"),
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average served query rate"),
    example={"cost_per_query": "0.001 USD/request", "arrival_rate": "50e6 request/day"},
)
def serving_cost_rate(cost_per_query, arrival_rate):
    r"""Serving spend per unit time: unit cost times served rate.

    Parameters
    ----------
    cost_per_query : Quantity [currency / request]
        Average cost per served query, billed idle and reserved capacity included.
    arrival_rate : Quantity [request / time]
        Served rate, counting the same queries used to estimate the unit cost.

    Returns
    -------
    Quantity [currency / time]

    Notes
    -----
    .. math:: \dot C_{\mathrm{serve}} = c_q \lambda

    Examples
    --------
    >>> serving_cost_rate(Q_(0.001, "USD/request"), Q_(50e6, "request/day")).to("USD/day")
    <Quantity(50000.0, 'USD / day')>
    """
    return cost_per_query * arrival_rate


@formula(
    result=var("USD", r"C_{\mathrm{serve}}", "nonnegative", "serving cost over a period"),
    reference="Eq. 2, section 10.4 (the serving term); Napkin Math 10.1",
    cost_per_query=var("USD/request", "c_{q}", "nonnegative", "average serving cost per served query"),
    duration=var("s", r"T_{\mathrm{deploy}}", "nonnegative", "period"),
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average served query rate"),
    example={"cost_per_query": "0.001 USD/request", "duration": "365 day", "arrival_rate": "50e6 request/day"},
)
def serving_cost(cost_per_query, duration, arrival_rate):
    r"""Serving cost over a period: unit cost times the requests served (Eq. 2's recurring term).

    Parameters
    ----------
    cost_per_query : Quantity [currency / request]
        Average cost per served query.
    duration : Quantity [time]
        The period.
    arrival_rate : Quantity [request / time]
        Average served rate.

    Returns
    -------
    Quantity [currency]

    Notes
    -----
    .. math:: C_{\mathrm{serve}} = c_q \, T_{\mathrm{deploy}} \, \lambda

    Napkin Math 10.1 (§10.3.2): 18.25B requests x $0.001 = $18,250,000 a year.

    Examples
    --------
    >>> serving_cost(Q_(0.001, "USD/request"), Q_(365, "day"), Q_(50e6, "request/day")).to("USD")
    <Quantity(18250000.0, 'USD')>
    """
    return cost_per_query * request_volume.func(arrival_rate, duration)


@formula(
    result=var("USD", r"C_{\mathrm{life}}", "nonnegative", "lifetime cost of one model version"),
    reference="Eq. 2, section 10.4",
    training_cost=var("USD", r"C_{\mathrm{train}}", "nonnegative", "cost to train this model version"),
    cost_per_query=var("USD/request", "c_{q}", "nonnegative", "average serving cost per served query"),
    duration=var("s", r"T_{\mathrm{deploy}}", "nonnegative", "deployment duration"),
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average rate of served queries"),
    example={
        "training_cost": "2e6 USD",
        "cost_per_query": "0.001 USD/request",
        "duration": "365 day",
        "arrival_rate": "50e6 request/day",
    },
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
    interval separately and add them (:func:`piecewise_lifetime_cost`). The unit cost must include
    billed idle and reserved capacity (:func:`calculator.regions.cost_per_completed_request`).

    Examples
    --------
    Napkin Math 10.1: 1M daily users x 50 requests at $0.001 for a year, on a $2M training bill.

    >>> from calculator.units import Q_
    >>> rate = Q_(1e6 * 50, "request/day")
    >>> lifetime_cost(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(365, "day"), rate).to("USD")
    <Quantity(20250000.0, 'USD')>
    """
    return training_cost + serving_cost.func(cost_per_query, duration, arrival_rate)


@checked()
def piecewise_lifetime_cost(
    training_cost: Money, cost_per_query: MoneyPerRequest, duration: Time, arrival_rate: Rate
) -> Money:
    r"""Eq. 2 over intervals whose unit cost or rate differ: training plus the sum of each interval's serving.

    Parameters
    ----------
    training_cost : Quantity [currency]
        One-time training cost.
    cost_per_query : Quantity [currency / request], array (intervals,)
        Unit cost of each interval.
    duration : Quantity [time], array (intervals,)
        Length of each interval.
    arrival_rate : Quantity [request / time], array (intervals,)
        Served rate of each interval (the three arrays broadcast against each other).

    Returns
    -------
    Quantity [currency]

    Notes
    -----
    .. math:: C_{\mathrm{life}} = C_{\mathrm{train}} + \sum_k c_{q,k} T_k \lambda_k

    §10.3.2: a changing mix, fleet or price is evaluated as separate intervals rather than one
    constant unit cost.

    Examples
    --------
    A launch quarter at $0.002 then three quarters at $0.001, at 50M requests a day:

    >>> piecewise_lifetime_cost(Q_(2e6, "USD"), Q_([0.002, 0.001], "USD/request"), Q_([91.25, 273.75], "day"),
    ...                         Q_(50e6, "request/day")).to("USD")
    <Quantity(24812500.0, 'USD')>
    """
    pieces = {"cost_per_query": cost_per_query, "duration": duration, "arrival_rate": arrival_rate}
    shapes = {name: np.shape(getattr(value, "magnitude", value)) for name, value in pieces.items()}
    check_broadcast(
        "piecewise_lifetime_cost",
        shapes,
        "the interval arguments must have one length (or be one number for every interval)",
    )
    spent = serving_cost(Q_(cost_per_query, "USD/request"), Q_(duration, "s"), Q_(arrival_rate, "request/s"))
    total = spent.sum() if np.ndim(spent.magnitude) else spent  # one phase or several
    return (Q_(plain(training_cost), "USD") + total).to("USD")


@formula(
    result=var("", "R", "nonnegative", "lifetime serving cost over training cost"),
    reference="section 10.4 (serving cost multiplier); Napkin Math 10.1",
    training_cost=var("USD", r"C_{\mathrm{train}}", "positive", "one-time training cost"),
    cost_per_query=var("USD/request", "c_{q}", "nonnegative", "average serving cost per served query"),
    duration=var("s", r"T_{\mathrm{deploy}}", "nonnegative", "deployment duration"),
    arrival_rate=var("request/s", r"\lambda", "nonnegative", "average served query rate"),
    example={
        "training_cost": "2e6 USD",
        "cost_per_query": "0.001 USD/request",
        "duration": "365 day",
        "arrival_rate": "50e6 request/day",
    },
)
def serving_training_ratio(training_cost, cost_per_query, duration, arrival_rate):
    r"""How many times the training cost a deployment spends on serving.

    Parameters
    ----------
    training_cost : Quantity [currency]
        One-time training cost (> 0).
    cost_per_query : Quantity [currency / request]
        Average cost per served query.
    duration : Quantity [time]
        Deployment duration.
    arrival_rate : Quantity [request / time]
        Average served rate.

    Returns
    -------
    float

    Notes
    -----
    .. math:: R = \frac{c_q \, T_{\mathrm{deploy}} \, \lambda}{C_{\mathrm{train}}}

    §10.3.2 ("9.1x"), §10.3.2 ("788.4x"), self-check answer §10.18 ("126.1x"). Not a universal
    ratio: it follows from traffic, unit cost, lifetime and training expense, not model size
    (answer §10.18); below 1 training dominates.

    Examples
    --------
    >>> round(serving_training_ratio(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(365, "day"),
    ...                              Q_(50e6, "request/day")), 3)
    9.125
    """
    return serving_cost.func(cost_per_query, duration, arrival_rate) / training_cost


@formula(
    result=var("USD", r"\Delta C", "nonnegative", "serving cost saved"),
    reference="Napkin Math 10.1; self-check answer §10.18",
    serving_cost=var("USD", r"C_{\mathrm{serve}}", "nonnegative", "serving cost over the period"),
    reduction=var("", "f", "probability", "fractional cut in cost per request"),
    example={"serving_cost": "18.25e6 USD", "reduction": 0.1},
)
def unit_cost_savings(serving_cost, reduction):
    r"""Serving cost saved by cutting the cost per request, at unchanged volume and quality.

    Parameters
    ----------
    serving_cost : Quantity [currency]
        Serving cost over the period (:func:`serving_cost`).
    reduction : float
        Fractional reduction of the cost per completed request at the SLO.

    Returns
    -------
    Quantity [currency]

    Notes
    -----
    .. math:: \Delta C = f \, C_{\mathrm{serve}}

    Real only if request volume and service quality stay fixed and billed capacity actually
    falls; lower latency alone does not reduce the bill (§10.3.2, answer §10.18).

    Examples
    --------
    >>> unit_cost_savings(Q_(18.25e6, "USD"), 0.10)
    <Quantity(1825000.0, 'USD')>
    """
    return reduction * serving_cost


@formula(
    result=var("USD", r"C_{\mathrm{train}}", "nonnegative", "training cost including engineering"),
    reference="section 10.4 (DLRM scenario, §10.3.2)",
    gpu_hours=var("h", r"H_{\mathrm{GPU}}", "nonnegative", "GPU-hours of training compute"),
    gpu_price=var("USD/h", "p", "nonnegative", "price per GPU-hour"),
    engineering_multiplier=var("", "m", "nonnegative", "engineering cost as a multiple of the hardware cost"),
    example={"gpu_hours": "1000 h", "gpu_price": "2 USD/h", "engineering_multiplier": 3},
)
def training_cost(gpu_hours, gpu_price, engineering_multiplier):
    r"""Training cost: GPU-hours times price, plus engineering as a multiple of that hardware cost.

    Parameters
    ----------
    gpu_hours : Quantity [time]
        GPU-hours (a GPU-hour is one GPU for one hour).
    gpu_price : Quantity [currency / time]
        Price per GPU-hour.
    engineering_multiplier : float
        Data, experimentation and engineering cost as a multiple of the hardware cost.

    Returns
    -------
    Quantity [currency]

    Notes
    -----
    .. math:: C_{\mathrm{train}} = H_{\mathrm{GPU}} \, p \, (1 + m)

    §10.3.2: 1,000 GPU-hours at $2 is $2,000 of hardware, "plus 3x additional engineering cost",
    $8,000 in all.

    Examples
    --------
    >>> training_cost(Q_(1000, "h"), Q_(2, "USD/h"), 3)
    <Quantity(8000.0, 'USD')>
    """
    return gpu_hours * gpu_price * (1 + engineering_multiplier)


@formula(
    result=var("USD/megatoken", r"c_{\mathrm{M}}", "nonnegative", "cost per million useful tokens"),
    reference="Table 14, section 10.9.5",
    gpus=var("", r"N_{\mathrm{GPU}}", "positive", "billed GPUs of the replica"),
    price_per_gpu_hour=var("USD/hour", r"p_{\mathrm{GPU}}", "nonnegative", "price of one GPU-hour"),
    throughput=var("megatoken/hour", r"r_{\mathrm{tok}}", description="useful (SLO-compliant) tokens per unit time"),
    example={"gpus": 8, "price_per_gpu_hour": "2.16 USD/hour", "throughput": "2000 token/s"},
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


@formula(
    result=var("s", r"t^{*}", "nonnegative", "time until serving spend equals the training cost"),
    reference="Figure 3, section 10.4 (serving cost crossover)",
    training_cost=var("USD", r"C_{\mathrm{train}}", "nonnegative", "one-time training cost"),
    serving_cost_rate=var("USD/s", r"\dot{C}_{\mathrm{serve}}", "positive", "serving spend per unit time"),
    example={"training_cost": "2e6 USD", "serving_cost_rate": "50000 USD/day"},
)
def crossover_time(training_cost, serving_cost_rate):
    r"""When cumulative serving spend equals the one-time training cost.

    Parameters
    ----------
    training_cost : Quantity [currency]
        One-time training cost.
    serving_cost_rate : Quantity [currency / time]
        Serving spend per unit time (:func:`serving_cost_rate`).

    Returns
    -------
    Quantity [time]

    Notes
    -----
    .. math:: t^{*} = C_{\mathrm{train}} / \dot C_{\mathrm{serve}}

    Figure 3 (§10.3.2): within days for the recommendation scenario, roughly six weeks for the
    70B LLM. Beyond the deployment horizon, training stays the larger cost.

    Examples
    --------
    >>> crossover_time(Q_(2e6, "USD"), Q_(50_000, "USD/day")).to("day")
    <Quantity(40.0, 'day')>
    """
    return training_cost / serving_cost_rate


@dataclass(frozen=True, repr=False)
class CostCurve(Result):
    """Cumulative cost of one deployment scenario over time (Figure 3).

    Attributes
    ----------
    elapsed : Quantity [time], array
        Time since deployment.
    cumulative_cost : Quantity [currency], array
        Training plus serving to date (Eq. 2 at each elapsed time).
    serving_cost : Quantity [currency], array
        The serving part.
    training_cost : Quantity [currency]
    crossover : Quantity [time]
        When serving equals training (:func:`crossover_time`).
    crosses_within_horizon : bool
        Whether that happens within the plotted horizon.
    """

    elapsed: Time
    cumulative_cost: Money
    serving_cost: Money
    training_cost: Money
    crossover: Time
    crosses_within_horizon: bool


@checked(horizon="unchecked")
def cumulative_cost_curve(
    training_cost: Money, cost_per_query: MoneyPerRequest, arrival_rate: Rate, horizon: Time, points: Count = 361
) -> CostCurve:
    """Cumulative training-plus-serving cost over a horizon, and the crossover (Figure 3).

    Parameters
    ----------
    training_cost : Quantity [currency]
        One-time training cost.
    cost_per_query : Quantity [currency / request]
        Average unit cost (a scenario given as a monthly spend ``S`` is ``c_q lambda = S``).
    arrival_rate : Quantity [request / time]
        Served rate.
    horizon : Quantity [time]
        Plotted period (the chapter's Figure 3 spans 36 months).
    points : int, default 361
        Samples of the curve (2 to :data:`MAX_CURVE_POINTS`).

    Returns
    -------
    CostCurve

    Examples
    --------
    >>> c = cumulative_cost_curve(Q_(2e6, "USD"), Q_(0.001, "USD/request"), Q_(50e6, "request/day"),
    ...                           Q_(36 * 30, "day"))
    >>> c.crossover.to("day"), c.crosses_within_horizon
    (<Quantity(40.0, 'day')>, True)
    """
    scalars = {"training_cost": training_cost, "cost_per_query": cost_per_query, "arrival_rate": arrival_rate}
    for name, value in {**scalars, "points": points}.items():
        if np.ndim(value):
            raise InputError(f"cumulative_cost_curve(): argument '{name}' must be one number, got {shown(value)}")
    samples = count("cumulative_cost_curve", "points", points, minimum=2, maximum=MAX_CURVE_POINTS)
    # The horizon keeps its unit: the curve's elapsed times and crossover are shown in it.
    end = magnitude("cumulative_cost_curve", "horizon", horizon, "s", "positive")
    if np.ndim(end):
        raise InputError(f"cumulative_cost_curve(): argument 'horizon' must be one number, got {shown(horizon)}")
    training = Q_(plain(training_cost), "USD")
    cost, rate_served = Q_(plain(cost_per_query), "USD/request"), Q_(plain(arrival_rate), "request/s")
    elapsed = Q_(np.linspace(0.0, end, samples), "s").to(horizon.units)
    total = lifetime_cost(training, cost, elapsed, rate_served)
    rate = serving_cost_rate(cost, rate_served)
    crossover = crossover_time(training, rate) if rate.magnitude > 0 else Q_(np.inf, "s")
    return CostCurve(
        elapsed=elapsed,
        cumulative_cost=total,
        serving_cost=total - training,
        training_cost=training,
        crossover=crossover.to(horizon.units),
        crosses_within_horizon=bool(crossover.m_as("s") <= end),
    )


@formula(
    result=var("USD/token", "c(V)", "positive", "unit cost at a daily volume"),
    reference="Figure 2, section 10.4 (constructed unit-cost curves)",
    daily_volume=var("request/day", "V", "positive", "requests per day"),
    reference_cost=var("USD/token", "a", "positive", "unit cost at the reference volume"),
    reference_volume=var("request/day", "V_{0}", "positive", "reference volume"),
    exponent=var("", "p", "positive", "economy-of-scale exponent"),
    example={
        "daily_volume": "1e7 request/day",
        "reference_cost": "2e-5 USD/token",
        "reference_volume": "1e6 request/day",
        "exponent": 0.55,
    },
)
def unit_cost_at_volume(daily_volume, reference_cost, reference_volume, exponent):
    r"""A constructed unit-cost curve that falls with daily volume as a power law (Figure 2).

    Parameters
    ----------
    daily_volume : Quantity [request / time]
        Request volume.
    reference_cost : Quantity [currency / token]
        Unit cost at the reference volume.
    reference_volume : Quantity [request / time]
        The reference volume.
    exponent : float
        How fast the unit cost falls with volume (batching and utilization gains).

    Returns
    -------
    Quantity [currency / token]

    Notes
    -----
    .. math:: c(V) = a \left(\frac{V_0}{V}\right)^{p}

    Figure 2 (§10.3.2) crosses a $0.05 per 1,000-token price near 2e5 requests a day
    (optimized) and 4e7 (unbatched single GPU); the chapter does not print its curves. The book's
    public figure code used this form with :math:`V_0` = 1e6 requests/day and
    :math:`(a, p)` = ($0.02/1K, 0.55) optimized, ($0.08/1K, 0.45) multi-GPU batching and
    ($0.15/1K, 0.30) single GPU, which reproduce the printed crossings. Constructed curves, not
    measured profitability.

    Examples
    --------
    >>> unit_cost_at_volume(Q_(1e6, "request/day"), Q_(0.02 / 1000, "USD/token"), Q_(1e6, "request/day"), 0.55)
    <Quantity(2e-05, 'USD / token')>
    """
    return reference_cost * (reference_volume / daily_volume) ** exponent


#: A unit cost per token (the unit-cost curves of Figure 2).
MoneyPerToken = Annotated[Any, Dimension("USD/token")]


@checked(price="positive", reference_cost="positive", reference_volume="positive", exponent="positive")
def break_even_volume(
    price: MoneyPerToken, reference_cost: MoneyPerToken, reference_volume: Rate, exponent: Number
) -> Rate:
    r"""Daily volume at which a :func:`unit_cost_at_volume` curve falls to a price.

    Parameters
    ----------
    price : Quantity [currency / token]
        Price charged.
    reference_cost, reference_volume, exponent
        As for :func:`unit_cost_at_volume` (the curve).

    Returns
    -------
    Quantity [request / time]

    Notes
    -----
    .. math:: V^{*} = V_0 \left(\frac{a}{\mathrm{price}}\right)^{1/p}

    :func:`unit_cost_at_volume` solved for the volume. A constructed break-even: a deployment
    needs its own token mix, occupied capacity and cost boundary (§10.3.2).

    Examples
    --------
    >>> break_even_volume(Q_(0.05 / 1000, "USD/token"), Q_(0.02 / 1000, "USD/token"),
    ...                   Q_(1e6, "request/day"), 0.55).to("request/day")
    <Quantity(189004.7..., 'request / day')>
    """
    return unit_cost_at_volume.solve_for(
        "daily_volume",
        unit_cost_at_volume=Q_(plain(price), "USD/token"),
        reference_cost=Q_(plain(reference_cost), "USD/token"),
        reference_volume=Q_(plain(reference_volume), "request/s"),
        exponent=plain(exponent),
    )


#: Table 5 (§10.5.2): the serving hierarchy from the most granular level to the platform,
#: with each level's optimization target and key techniques (Checkpoint 10.2 adds response caching
#: at the request level and KV-cache paging at the replica level).
SERVING_HIERARCHY: dict[str, tuple[str, tuple[str, ...]]] = {
    "request": ("per-request latency", ("dynamic batching", "response caching", "tokenization")),
    "replica": (
        "throughput, utilization",
        ("kv-cache paging", "kernel fusion", "gpu memory allocation", "continuous batching"),
    ),
    "service": ("aggregate capacity", ("load balancing", "routing", "autoscaling")),
    "platform": ("resource efficiency", ("multi-tenancy", "scheduling", "placement", "tenant isolation")),
}


def serving_hierarchy_level(technique: str) -> str:
    """The level of the serving hierarchy that owns a technique (Table 5).

    Parameters
    ----------
    technique : str
        A technique named in Table 5 or Checkpoint 10.2 (case and hyphens ignored).

    Returns
    -------
    str
        ``"request"``, ``"replica"``, ``"service"`` or ``"platform"`` (the order of
        :data:`SERVING_HIERARCHY`, from the most granular level up).

    Notes
    -----
    Section 10.5.2 (§10.5.2; self-check answers §10.18). Each level owns a distinct
    bottleneck and measurement boundary; effects still cross levels (§10.5.2).

    Examples
    --------
    >>> serving_hierarchy_level("Autoscaling")
    'service'
    """
    wanted = " ".join(str(technique).lower().replace("-", " ").split())
    for level, (_, techniques) in SERVING_HIERARCHY.items():
        if wanted in {t.replace("-", " ") for t in techniques}:
            return level
    known = sorted(t for _, techniques in SERVING_HIERARCHY.values() for t in techniques)
    raise InputError(f"serving_hierarchy_level(): unknown technique {technique!r}; known: {known}")
