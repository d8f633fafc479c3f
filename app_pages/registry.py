import pandas as pd
import streamlit as st

from calculator.registry import load_registry

st.title("Registry")
st.caption(
    "Accelerators, interconnects, models and prices the calculator uses, each value with its source. "
    "Memory is listed twice on purpose: physical bytes (binary units) and the vendor's nameplate figure."
)


@st.cache_resource
def registry():
    return load_registry()


reg = registry()
section = st.radio("Section", ["accelerators", "interconnects", "models", "prices"], horizontal=True)
entries = reg.section(section)
table = pd.DataFrame([entry.display_values() for entry in entries.values()])
st.dataframe(table, hide_index=True, use_container_width=True)
st.download_button("Download CSV", table.to_csv(index=False), file_name=f"{section}.csv", mime="text/csv")

chosen = st.selectbox("Sources of", list(entries))
for link in entries[chosen].sources:
    source = reg.sources[link.source]
    st.markdown(f"- **{source.title}** ({source.kind}) <{source.url}>  \n  covers: {', '.join(link.fields)}")
    if link.note:
        st.caption(link.note)
