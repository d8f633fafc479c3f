"""Dashboard entry point: builds the page navigation and runs the selected page."""

import streamlit as st

st.set_page_config(page_title="Serving capacity calculator", page_icon=":material/dns:", layout="wide")


def page(path: str, title: str, icon: str, url: str, **kwargs: object) -> st.Page:
    """A page of ``app_pages/`` with its title, Material icon and URL path."""
    return st.Page(f"app_pages/{path}.py", title=title, icon=f":material/{icon}:", url_path=url, **kwargs)


pages = {
    "Plan": [
        page("fleet_sizer", "Fleet sizer", "dns", "fleet", default=True),
        page("memory_fit", "Memory fit", "memory", "memory"),
        page("cost", "Cost", "payments", "cost"),
    ],
    "Chapter models": [
        page("batching_queueing", "Batching and queueing", "stacked_line_chart", "batching"),
        page("decode_speedups", "Decode speedups", "speed", "decode"),
        page("sharding", "Sharding and communication", "hub", "sharding"),
        page("routing_tails", "Routing and tails", "alt_route", "routing"),
        page("autoscaling_regions", "Autoscaling and regions", "public", "autoscaling"),
    ],
    "Tools": [
        page("registry", "Registry", "inventory_2", "registry"),
        page("goal_seek", "Goal seek", "calculate", "goal-seek"),
    ],
}
st.navigation(pages).run()
