import streamlit as st

st.title("batching_queueing")
