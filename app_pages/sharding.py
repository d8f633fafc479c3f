import streamlit as st

st.title("sharding")
