"""Dashboard entry point: builds the page navigation and runs the selected page."""

import streamlit as st

st.set_page_config(page_title="Serving capacity calculator", layout="wide")
pages = [
    st.Page("app_pages/registry.py", title="Registry", icon=":material/memory:", url_path="registry"),
]
st.navigation(pages).run()
