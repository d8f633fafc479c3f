"""Registry: browse accelerators, interconnects, models and prices with their sources; add your own."""

from pathlib import Path

import pandas as pd
import streamlit as st

from app_pages import _common as ui
from calculator.errors import CalculatorError, RegistryError

SECTIONS = ["accelerators", "interconnects", "models", "prices"]
EXAMPLE = """schema_version: 1
sources:
  - id: my-datasheet
    title: "Our accelerator's datasheet"
    url: "https://example.com/datasheet.pdf"
    kind: vendor_datasheet
accelerators:
  - id: my-accelerator
    name: "My accelerator 96GB"
    vendor: Example
    provenance: user
    memory: 96 GiB
    memory_nameplate: 96 GB
    memory_bandwidth: 4 TB/s
    dense_throughput: {fp16: 1000 TFLOP/s, fp8: 2000 TFLOP/s}
    tdp: 700 W
    sources:
      - source: my-datasheet
        fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]
        note: "dense (no sparsity) tensor rates"
"""


def main():
    st.title("Registry")
    st.caption(
        "Accelerators, interconnects, models and prices the calculator uses, each value with its source. Memory is "
        "listed twice on purpose: physical bytes (binary units, GiB) and the vendor's nameplate figure (GB)."
    )
    sc = ui.Scenario("registry")
    tabs = ["Browse", "Add an accelerator", "Add a model", "Import config.json", "Upload YAML"]
    browse, accelerator, model, config, upload = st.tabs(tabs)
    with browse:
        _browse(sc)
    with accelerator:
        _add_accelerator()
    with model:
        _add_model()
    with config:
        _import_config()
    with upload:
        _upload()


def _browse(sc):
    reg = ui.registry()
    section = sc.radio("Section", "section", SECTIONS, "accelerators", horizontal=True)
    entries = reg.section(section)
    cited = {link.source for entry in entries.values() for link in entry.sources}
    cols = st.columns(2)  # the answer in brief, then the table
    cols[0].metric(f"{section.capitalize()} in the registry", f"{len(entries):,}")
    cols[1].metric("Sources they cite", f"{len(cited):,}", help="documents listed under the registry's sources")
    sc.answered()
    table = pd.DataFrame([entry.display_values() for entry in entries.values()])
    ui.table(table, section)
    chosen = sc.select("Sources of", "entry", list(entries), next(iter(entries)))
    for link in entries[chosen].sources:
        source = reg.sources[link.source]
        st.markdown(
            f"- **{ui.plain(source.title)}** ({ui.plain(source.kind)}) {ui.plain(source.url)}  \n"
            f"  covers: {ui.plain(', '.join(link.fields))}"
        )
        if link.note:
            st.caption(link.note)
    custom = ui.extra_files()
    if custom:
        st.info(f"This session adds {len(custom)} custom file(s) to the registry; every page can use their entries.")
        if st.button("Forget the custom entries", key="registry.forget"):
            ui.clear_registry_files()
            st.rerun()


def _add(section, entry):
    try:
        ui.add_registry_file(ui.user_entry_document(section, entry))
    except RegistryError as exc:
        st.error(f"Not added: {ui.plain(exc)}")
        return
    st.success(f"Added {section[:-1]} '{entry['id']}' for this session: choose it on the other pages.")


def _add_accelerator():
    with st.form("add-accelerator"):
        a, b = st.columns(2)
        entry_id = a.text_input("Id (lowercase, letters, digits, -)", "my-gpu", max_chars=60)
        name = b.text_input("Name", "My GPU 96GB", max_chars=120)
        c, d, e = st.columns(3)
        vendor = c.text_input("Vendor", "Example", max_chars=60)
        memory = d.number_input("Physical memory [GiB]", 1.0, 1e5, 96.0, format="%g")
        nameplate = e.number_input("Nameplate memory [GB]", 1.0, 1e5, 96.0, format="%g")
        f, g, h, i = st.columns(4)
        bandwidth = f.number_input("Memory bandwidth [TB/s]", 0.001, 1e4, 4.0, format="%g")
        fp16 = g.number_input("Dense FP16 [TFLOP/s]", 0.001, 1e6, 1000.0, format="%g")
        fp8 = h.number_input("Dense FP8 [TFLOP/s] (0: none)", 0.0, 1e6, 2000.0, format="%g")
        tdp = i.number_input("TDP [W]", 1.0, 1e5, 700.0, format="%g")
        submitted = st.form_submit_button("Validate and add")
    if submitted:
        throughput = {"fp16": f"{fp16:g} TFLOP/s", "bf16": f"{fp16:g} TFLOP/s"}
        if fp8 > 0:
            throughput["fp8"] = f"{fp8:g} TFLOP/s"
        entry = {
            "id": entry_id.strip(),
            "name": name.strip(),
            "vendor": vendor.strip(),
            "memory": f"{memory:g} GiB",
            "memory_nameplate": f"{nameplate:g} GB",
            "memory_bandwidth": f"{bandwidth:g} TB/s",
            "dense_throughput": throughput,
            "tdp": f"{tdp:g} W",
        }
        _add("accelerators", entry)


def _add_model():
    with st.form("add-model"):
        a, b = st.columns(2)
        entry_id = a.text_input("Id (lowercase, letters, digits, -)", "my-model", max_chars=60)
        name = b.text_input("Name", "My 30B model", max_chars=120)
        c, d, e, f = st.columns(4)
        parameters = c.number_input("Parameters [billion]", 0.001, 1e5, 30.0, format="%g")
        layers = d.number_input("Layers", 1, 10_000, 48)
        hidden = e.number_input("Hidden size", 1, 1_000_000, 6144)
        heads = f.number_input("Attention heads", 1, 10_000, 48)
        g, h, i, j = st.columns(4)
        kv_heads = g.number_input("KV heads", 1, 10_000, 8)
        head_dim = h.number_input("Head dimension", 1, 100_000, 128)
        attention = i.selectbox("Attention", ["gqa", "mha", "mqa"])
        context = j.number_input("Max context [token]", 1, 100_000_000, 131_072)
        submitted = st.form_submit_button("Validate and add")
    if submitted:
        entry = {
            "id": entry_id.strip(),
            "name": name.strip(),
            "kind": "transformer",
            "parameters": float(parameters) * 1e9,
            "layers": int(layers),
            "hidden_size": int(hidden),
            "attention_heads": int(heads),
            "kv_heads": int(kv_heads),
            "head_dim": int(head_dim),
            "attention": attention,
            "max_context": int(context),
        }
        _add("models", entry)


def _import_config():
    st.caption(
        "A Hugging Face `config.json` (and optionally the checkpoint's `hf_quant_config.json`) read into a model "
        "entry of this session (`calculator.model_import.import_model_config`, docs/registry.md): the shapes, the "
        "parameters counted from them, sliding windows, and the checkpoint's weight and KV precision. Architectures "
        "the calculator cannot express are refused, naming the field."
    )
    with st.form("import-config"):
        config = st.file_uploader("config.json", type=["json"], key="registry.config")
        quant = st.file_uploader("hf_quant_config.json (optional)", type=["json"], key="registry.quant")
        repo = st.text_input("Hugging Face repository (owner/name, optional)", key="registry.repo", max_chars=200)
        model_id = st.text_input("Id (optional)", key="registry.import_id", max_chars=80)
        submitted = st.form_submit_button("Import and add")
    if submitted and config is not None:
        _import_uploaded(config, quant, repo.strip() or None, model_id.strip() or None)


def _import_uploaded(config, quant, repo, model_id):
    """Import the uploads for the session (``ui.import_config_files``) and say what was added or why not."""
    try:
        imported = ui.import_config_files(
            config.getvalue(), quant.getvalue() if quant is not None else None, repo=repo, model_id=model_id
        )
    except CalculatorError as exc:
        st.error(f"{ui.plain(config.name)} was not imported: {ui.plain(exc)}")
        return
    st.success(f"{ui.plain(imported.model.id)} imported from {ui.plain(config.name)}: every page lists it now.")
    for note in imported.notes:
        st.caption(ui.plain(note))


def _upload():
    st.caption(
        f"A registry file of the same layout as `hardware_registry.yaml` (schema in docs/registry.schema.json), at "
        f"most {ui.MAX_REGISTRY_BYTES // 1024} KiB, read with a safe YAML loader. New ids are added; an existing id is "
        "overridden field by field, and every value must be covered by a source."
    )
    st.download_button("Download an example file", EXAMPLE, file_name="my-registry.yaml", key="registry.example")
    uploaded = st.file_uploader("Registry YAML", type=["yaml", "yml"], key="registry.upload")
    if uploaded is not None:
        _add_text(uploaded.getvalue(), Path(uploaded.name).name)
    with st.form("paste-yaml"):
        text = st.text_area("Or paste YAML", EXAMPLE, height=300, max_chars=ui.MAX_REGISTRY_BYTES)
        submitted = st.form_submit_button("Validate and add")
    if submitted:
        _add_text(text.encode("utf-8"), "pasted YAML")


def _add_text(data, what):
    if len(data) > ui.MAX_REGISTRY_BYTES:
        st.error(f"{ui.plain(what)}: {len(data):,} bytes; the limit is {ui.MAX_REGISTRY_BYTES:,} bytes.")
        return
    try:
        loaded = ui.add_registry_file(data.decode("utf-8"))
    except UnicodeDecodeError:
        st.error(f"{ui.plain(what)}: not UTF-8 text.")
        return
    except RegistryError as exc:
        st.error(f"{ui.plain(what)} is not a valid registry file: {ui.plain(exc)}")
        return
    st.success(f"{ui.plain(what)} added: the registry now has {ui.plain(repr(loaded))}.")


ui.run(main)
