import streamlit as st

st.title("autoscaling_regions")
