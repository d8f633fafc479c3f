"""Cost: lifetime cost and the serving-vs-training crossover, unit cost, cost per request and per token, savings."""

import numpy as np
import streamlit as st

from app_pages import _common as ui
from calculator import Q_
from calculator.economics import (
    break_even_volume,
    cost_per_million_tokens,
    crossover_time,
    cumulative_cost_curve,
    lifetime_cost,
    serving_cost,
    serving_cost_rate,
    serving_training_ratio,
    unit_cost_at_volume,
    unit_cost_savings,
)
from calculator.plots import cost_curves_figure, unit_cost_figure
from calculator.regions import cost_per_completed_request

#: Figure 2's constructed curves (``calculator.economics.unit_cost_at_volume`` documents them):
#: unit cost in USD per 1,000 tokens at 10^6 requests/day, and the exponent.
FIGURE_2 = {
    "optimized serving": (0.02, 0.55),
    "multi-GPU batching": (0.08, 0.45),
    "single GPU, unbatched": (0.15, 0.30),
}


def main():
    st.title("Cost")
    st.caption(
        "What serving costs over a model's life, when it passes the training bill, and what a unit-cost cut saves "
        "(sections 10.1-10.4 and 10.9.5; `calculator.economics`, `calculator.regions`)."
    )
    sc = ui.Scenario("cost")
    # The answer comes first: the lifetime scenario's inputs sit in the sidebar (collapsed on a phone), its
    # cost and crossover at the top; the other questions are tabs below.
    with st.sidebar:
        st.subheader("Lifetime scenario")
        training = sc.number("Training cost [USD]", "training", 2e6, min_value=1.0, max_value=1e12, step=1e5)
        per_query = sc.number(
            "Serving cost per query [USD/request]", "per_query", 0.001, min_value=1e-9, max_value=100.0,
            step=0.0001, format="%.6f",
        )  # fmt: skip
        rate = sc.number("Queries per day [request/day]", "per_day", 50e6, min_value=1.0, max_value=1e13, step=1e6)
        months = sc.number("Deployment [month]", "months", 12, min_value=1, max_value=240, integer=True)
    scenario = (Q_(training, "USD"), Q_(per_query, "USD/request"), Q_(rate, "request/day"), Q_(months, "month"))
    spend = _lifetime_answer(*scenario)
    sc.answered()
    life, unit, per_token, savings = sc.tabs(
        [
            "Lifetime and crossover (Figure 3)",
            "Unit cost vs volume (Figure 2)",
            "Per request and per 1M tokens",
            "Savings",
        ]
    )
    if life.open:
        with life:
            _lifetime(*scenario, spend)
    if unit.open:
        with unit:
            _unit_cost(sc)
    if per_token.open:
        with per_token:
            _per_request(sc)
    if savings.open:
        with savings:
            _savings(sc, *scenario[1:])


def _lifetime_answer(training, per_query, rate, duration):
    """The page's headline: lifetime cost, serving over training, the crossover and the serving spend."""
    total = lifetime_cost(training, per_query, duration, rate)
    ratio = serving_training_ratio(training, per_query, duration, rate)
    spend = serving_cost_rate(per_query, rate)
    crossover = crossover_time(training, spend)
    # Two rows of two: in a row of four at 1440x900 the lifetime cost ("20.26 million USD") was cut off.
    first, second = st.columns(2), st.columns(2)
    first[0].metric("Lifetime cost", ui.fmt(total, "USD", 4))
    first[1].metric("Serving / training", f"{ui.number(ratio, 3)}×")
    second[0].metric("Crossover after", ui.fmt(crossover, "day", 4))
    second[1].metric("Serving spend", ui.fmt(spend, "USD/day", 4))
    return spend


def _lifetime(training, per_query, rate, duration, spend):
    # The chart ends with the deployment (it ran to 36 months whatever the duration); the crossover metric says
    # when serving passes training if that is later.
    curve = cumulative_cost_curve(training, per_query, rate, duration)
    st.plotly_chart(cost_curves_figure({"scenario": curve}, time_unit="month"), key="cost-curves")
    ui.show_math(lifetime_cost, training, per_query, duration.to("day"), rate, title="lifetime cost (Eq. 2)")
    ui.show_math(serving_training_ratio, training, per_query, duration.to("day"), rate)
    ui.show_math(crossover_time, training, spend.to("USD/day"), title="crossover time")


def _unit_cost(sc):
    st.caption(
        "Constructed curves (the chapter does not print its data): unit cost falls with volume as a power law. "
        "Below the price line an approach is profitable; the break-even volume is where its curve crosses the price."
    )
    price = sc.number(
        "Price charged [USD per 1,000 tokens]", "price", 0.05, min_value=1e-6, max_value=100.0, step=0.01, format="%.4f"
    )
    volumes = Q_(np.geomspace(1e4, 1e9, 101), "request/day")
    reference_volume = Q_(1e6, "request/day")
    curves, breaks, chosen = {}, {}, {}
    columns = st.columns(len(FIGURE_2))
    for column, (name, (cost, exponent)) in zip(columns, FIGURE_2.items(), strict=True):
        slug = name.split()[0].lower().replace(",", "")
        column.markdown(f"**{name}**")
        cost = sc.number(
            "Unit cost at 10⁶ request/day [USD/1K token]", f"{slug}.cost", cost, min_value=1e-6, max_value=100.0,
            step=0.01, format="%.4f", where=column,
        )  # fmt: skip
        exponent = sc.number(
            "Exponent", f"{slug}.exponent", exponent, min_value=0.01, max_value=3.0, step=0.05, where=column
        )
        reference = Q_(cost, "USD/ktoken")
        chosen[name] = (reference, reference_volume, exponent)
        curves[name] = unit_cost_at_volume(volumes, reference, reference_volume, exponent)
        breaks[name] = break_even_volume(Q_(price, "USD/ktoken"), reference, reference_volume, exponent)
    st.plotly_chart(unit_cost_figure(volumes, curves, price=Q_(price, "USD/ktoken")), key="unit-cost")
    ui.table(
        ui.rows({f"break-even volume, {name}": volume for name, volume in breaks.items()}, dict.fromkeys(
            (f"break-even volume, {name}" for name in breaks), "request/day"
        )),
        "break-even-volumes",
    )  # fmt: skip
    name = next(iter(FIGURE_2))
    ui.show_math(
        unit_cost_at_volume,
        Q_(1e7, "request/day"),
        *chosen[name],
        title=f"unit cost of {name} at 10⁷ request/day",
    )


def _per_request(sc):
    st.markdown("**Cost per million tokens (Table 14)**")
    a, b, c = st.columns(3)
    gpus = sc.number("GPUs billed", "gpus", 8, min_value=1, max_value=1_000_000, integer=True, where=a)
    price = sc.number("Price [USD/h per GPU]", "gpu_price", 2.16, min_value=0.0, max_value=1000.0, step=0.1, where=b)
    tokens = sc.number(
        "Useful throughput [token/s]", "tokens", 2000.0, min_value=0.001, max_value=1e9, step=100.0, where=c
    )
    per_million = cost_per_million_tokens(gpus, Q_(price, "USD/hour"), Q_(tokens, "token/s"))
    st.metric("Cost per 1M useful tokens", ui.fmt(per_million, "USD/megatoken", 4))
    ui.show_math(
        cost_per_million_tokens, gpus, Q_(price, "USD/hour"), Q_(tokens, "token/s").to("megatoken/hour"),
        title="cost per million tokens",
    )  # fmt: skip

    st.markdown("**Cost per completed request (section 10.14: billed time and transfer over useful work)**")
    a, b, c, d = st.columns(4)
    busy = sc.number("Busy time [h]", "busy", 1.0, min_value=0.001, max_value=1e5, step=0.5, where=a)
    idle = sc.number("Billed idle time [h]", "idle", 0.0, min_value=0.0, max_value=1e5, step=0.5, where=b)
    startup = sc.number("Billed startup time [h]", "startup", 0.0, min_value=0.0, max_value=1e5, step=0.1, where=c)
    useful = sc.number(
        "Useful requests per GPU [request/s]", "useful", 2.0, min_value=1e-6, max_value=1e6, step=0.5, where=d
    )
    e, f, g = st.columns(3)
    transfer_gb = sc.number("Data transferred [GB]", "transfer", 0.0, min_value=0.0, max_value=1e9, step=10.0, where=e)
    transfer_price = sc.number(
        "Transfer price [USD/GB]", "transfer_price", 0.0, min_value=0.0, max_value=10.0, step=0.01, where=f
    )
    retries = sc.slider("Wasted on retries", "retries", 0.0, min_value=0.0, max_value=0.95, step=0.05, where=g)
    args = (
        Q_(price, "USD/hour"),
        gpus,
        Q_(busy, "hour"),
        Q_(useful, "request/s"),
        Q_(startup, "hour"),
        Q_(idle, "hour"),
        Q_(transfer_gb, "GB"),
        Q_(transfer_price, "USD/GB"),
        retries,
    )
    per_request = cost_per_completed_request(*args)
    cols = st.columns(2)
    cols[0].metric("Cost per completed request", ui.fmt(per_request, "USD/request", 4))
    cols[1].metric("Per 1,000 requests", ui.fmt(per_request.to("USD/krequest"), "USD/krequest", 4))
    ui.show_math(cost_per_completed_request, *args, title="cost per completed request")


def _savings(sc, per_query, rate, duration):
    st.caption(
        "Cutting the cost per completed request saves that fraction of the serving bill, if volume and quality "
        "stay fixed and billed capacity actually falls (section 10.4). Volume and duration come from the lifetime "
        "scenario in the sidebar."
    )
    reduction = sc.slider("Unit-cost cut", "cut", 0.10, min_value=0.0, max_value=1.0, step=0.01)
    bill = serving_cost(per_query, duration, rate)
    saved = unit_cost_savings(bill, reduction)
    cols = st.columns(2)
    cols[0].metric("Serving bill over the deployment", ui.fmt(bill, "USD", 4))
    cols[1].metric("Saved", ui.fmt(saved, "USD", 4))
    ui.show_math(serving_cost, per_query, duration.to("day"), rate, title="serving bill")
    ui.show_math(unit_cost_savings, bill, reduction, title="savings")


ui.run(main)
