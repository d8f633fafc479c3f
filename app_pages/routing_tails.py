import streamlit as st

st.title("routing_tails")
