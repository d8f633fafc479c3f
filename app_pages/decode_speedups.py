import streamlit as st

st.title("decode_speedups")
