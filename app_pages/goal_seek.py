import streamlit as st

st.title("goal_seek")
