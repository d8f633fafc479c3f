"""Dashboard entry point: builds the page navigation and runs the selected page."""

import streamlit as st

st.set_page_config(page_title="Serving capacity calculator", page_icon=":material/dns:", layout="wide")


def page(path: str, title: str, icon: str, **kwargs: object) -> st.Page:
    """A page of ``app_pages/``; its URL path is the file's name (``/memory_fit``)."""
    return st.Page(f"app_pages/{path}.py", title=title, icon=f":material/{icon}:", **kwargs)


pages = {
    "Plan": [
        page("fleet_sizer", "Fleet sizer", "dns", default=True),
        page("memory_fit", "Memory fit", "memory"),
        page("cost", "Cost", "payments"),
    ],
    "Chapter models": [
        page("batching_queueing", "Batching and queueing", "stacked_line_chart"),
        page("decode_speedups", "Decode speedups", "speed"),
        page("sharding", "Sharding and communication", "hub"),
        page("routing_tails", "Routing and tails", "alt_route"),
        page("autoscaling_regions", "Autoscaling and regions", "public"),
    ],
    "Tools": [
        page("registry", "Registry", "inventory_2"),
        page("goal_seek", "Goal seek", "calculate"),
    ],
}
st.navigation(pages).run()
