"""Dashboard entry point: builds the page navigation and runs the selected page."""

import streamlit as st

# Emoji icons render locally (a Material icon as a page's favicon is fetched from a font server).
st.set_page_config(page_title="Serving capacity calculator", page_icon="🖥️", layout="wide")


def page(path: str, title: str, icon: str, **kwargs: object) -> st.Page:
    """A page of ``app_pages/``; its URL path is the file's name (``/memory_fit``)."""
    return st.Page(f"app_pages/{path}.py", title=title, icon=icon, **kwargs)


pages = {
    "Plan": [
        page("fleet_sizer", "Fleet sizer", "🖥️", default=True),
        page("memory_fit", "Memory fit", "🧠"),
        page("benchmark", "Benchmark prediction", "⏱️"),
        page("cost", "Cost", "💵"),
    ],
    "Chapter models": [
        page("batching_queueing", "Batching and queueing", "📈"),
        page("decode_speedups", "Decode speedups", "⚡"),
        page("sharding", "Sharding and communication", "🔀"),
        page("routing_tails", "Routing and tails", "🧭"),
        page("autoscaling_regions", "Autoscaling and regions", "🌍"),
    ],
    "Tools": [
        page("registry", "Registry", "📚"),
        page("goal_seek", "Goal seek", "🎯"),
    ],
}
st.navigation(pages).run()
