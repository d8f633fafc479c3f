"""Dashboard entry point: builds the page navigation and runs the selected page."""

import streamlit as st

# The browser tab's icon stays an emoji: a Material icon there is fetched from a font server, while the emoji
# favicon is inline SVG. The pages' icons in the navigation are Material icons, drawn with the font Streamlit
# bundles, so they render in a browser without an emoji font.
st.set_page_config(page_title="Serving capacity calculator", page_icon="🖥️", layout="wide")


def page(path: str, title: str, icon: str, **kwargs: object) -> st.Page:
    """A page of ``app_pages/``; its URL path is the file's name (``/memory_fit``)."""
    return st.Page(f"app_pages/{path}.py", title=title, icon=icon, **kwargs)


pages = {
    "Plan": [
        page("fleet_sizer", "Fleet sizer", ":material/dns:", default=True),
        page("memory_fit", "Memory fit", ":material/memory:"),
        page("benchmark", "Benchmark prediction", ":material/timer:"),
        page("cost", "Cost", ":material/payments:"),
        page("production_day", "A day in production", ":material/schedule:"),
    ],
    "Chapter models": [
        page("batching_queueing", "Batching and queueing", ":material/stacked_line_chart:"),
        page("decode_speedups", "Decode speedups", ":material/bolt:"),
        page("sharding", "Sharding and communication", ":material/call_split:"),
        page("routing_tails", "Routing and tails", ":material/alt_route:"),
        page("autoscaling_regions", "Autoscaling and regions", ":material/public:"),
    ],
    "Tools": [
        page("registry", "Registry", ":material/menu_book:"),
        page("goal_seek", "Goal seek", ":material/target:"),
    ],
}
st.navigation(pages).run()
