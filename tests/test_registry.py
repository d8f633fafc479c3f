"""The registry: every entry sourced and valid, the chapter's constants pinned, every error explained."""

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from calculator import Q_, RegistryError
from calculator.errors import UnknownEntryError
from calculator.performance import engine_profile
from calculator.registry import DEFAULT_REGISTRY_PATH, SECTIONS, load_registry, schema_text

ROOT = Path(__file__).resolve().parent.parent

DESIGN_IDS = {
    "accelerators": {
        "h100-sxm", "h100-pcie", "h200-sxm", "b200-sxm", "gb200", "a100-sxm-80gb", "a100-40gb", "l4", "t4",
        "v100-sxm", "mi300x",
    },
    "interconnects": {
        "nvlink3", "nvlink4", "nvlink5", "pcie-gen4-x16", "pcie-gen5-x16", "infiniband-hdr", "infiniband-ndr",
        "ethernet-100g", "ethernet-400g-roce", "chapter-nvlink-h100", "chapter-pcie-gen5", "chapter-infiniband-hdr",
        "chapter-ethernet-100g",
    },
    "models": {
        "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-32b",
        "mixtral-8x7b", "deepseek-v3", "gpt-3-175b", "chapter-70b-mha", "chapter-70b-gqa", "dlrm", "resnet-50",
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def reg():
    return load_registry()


# ------------------------------------------------------------------ the packaged registry


def test_packaged_registry_has_the_design_ids(reg):
    for section, ids in DESIGN_IDS.items():
        missing = ids - set(reg.section(section))
        assert not missing, f"{section} lacks {sorted(missing)}"
    assert any(p.provenance == "chapter_scenario" for p in reg.prices.values())


def test_every_value_of_every_entry_has_a_source(reg):
    for section in SECTIONS:
        for entry in reg.section(section).values():
            assert entry.sources, entry.id
            for field in entry.sourced_fields():
                links = entry.source_of(field)
                assert links, f"{section}['{entry.id}'].{field} has no source"
                for link in links:
                    source = reg.sources[link.source]
                    assert source.url and source.title


def test_chapter_scenario_values_cite_the_chapter(reg):
    for section in SECTIONS:
        for entry in reg.section(section).values():
            kinds = {reg.sources[link.source].kind for link in entry.sources}
            if entry.provenance == "chapter_scenario":
                assert "chapter" in kinds, entry.id
            else:
                assert kinds - {"chapter"}, f"{entry.id} is marked published but only cites the chapter"


def test_chapter_h100_constants(reg):
    # §10.2/§10.6.2: 3.35 TB/s; §10.2 and Napkin Math 10.7: 80 GB nameplate; Napkin Math 10.5 (§10.7.1):
    # 8 x 80 GiB "registered byte capacity" = 687.2 GB; 989 TFLOP/s dense BF16.
    h100 = reg.accelerators["h100-sxm"]
    assert h100.memory == Q_(80, "GiB")
    assert h100.memory_nameplate == Q_(80, "GB")
    assert round((8 * h100.memory).m_as("GB"), 1) == 687.2
    assert h100.memory_bandwidth.m_as("TB/s") == pytest.approx(3.35)
    assert round(h100.peak_throughput("bf16").m_as("TFLOP/s")) == 989
    assert h100.nvlink_bandwidth.m_as("GB/s") == pytest.approx(450)  # per direction
    assert h100.nvlink_bandwidth_total.m_as("GB/s") == pytest.approx(900)  # both directions


def test_chapter_table_17_interconnects(reg):
    # Table 17 (§10.10.7), as printed; NVLink's 900 GB/s is the two-direction total.
    expected = {
        "chapter-nvlink-h100": (900, "GB/s", 0.5),
        "chapter-pcie-gen5": (64, "GB/s", 1),
        "chapter-infiniband-hdr": (25, "GB/s", 7),
        "chapter-ethernet-100g": (12.5, "GB/s", 50),
    }
    for link_id, (printed, unit, latency_us) in expected.items():
        link = reg.interconnects[link_id]
        assert link.provenance == "chapter_scenario"
        shown = link.bandwidth_total if link_id == "chapter-nvlink-h100" else link.bandwidth
        assert shown.m_as(unit) == pytest.approx(printed)
        assert link.startup_latency.m_as("us") == pytest.approx(latency_us)
    assert reg.interconnects["chapter-nvlink-h100"].bandwidth.m_as("GB/s") == pytest.approx(450)  # §10.8.3


def test_chapter_70b_models(reg):
    from calculator.memory import weight_bytes

    # §10.2: a 70B model at FP16 needs 140 GB of weights.
    mha = reg.models["chapter-70b-mha"]
    assert weight_bytes(mha.parameters, 16).m_as("GB") == pytest.approx(140)
    assert (mha.layers, mha.kv_heads, mha.head_dim, mha.attention) == (80, 64, 128, "mha")
    # Napkin Math 10.5 (§10.7.1): 141.2 GB of FP16 weights, 80 layers, 8 KV heads of 128.
    gqa = reg.models["chapter-70b-gqa"]
    assert round(weight_bytes(gqa.parameters, 16).m_as("GB"), 1) == 141.2
    assert (gqa.layers, gqa.kv_heads, gqa.head_dim, gqa.attention) == (80, 8, 128, "gqa")


def test_chapter_table_25_prices(reg):
    # Table 25 (§10.14.6), hypothetical snapshot.
    printed = {"us-east": (2.50, 4.00), "us-west": (2.30, 3.80), "eu-west": (2.80, 4.20)}
    for region, (spot, on_demand) in printed.items():
        assert reg.prices[f"chapter-{region}-h100-spot"].price.m_as("USD/hour") == pytest.approx(spot)
        assert reg.prices[f"chapter-{region}-h100-on-demand"].price.m_as("USD/hour") == pytest.approx(on_demand)


def test_every_packaged_accelerator_has_a_published_on_demand_price(reg):
    # The sizer prices a candidate from the registry unless --price is given (issue 54): every packaged
    # accelerator has a published on-demand price per GPU-hour, with its provider and date.
    from calculator.fleet import default_price_entry

    for accelerator in reg.accelerators:
        offers = [p for p in reg.prices.values() if p.accelerator == accelerator and p.market == "on_demand"]
        published = [p for p in offers if p.provenance == "published"]
        assert published, f"{accelerator} has no published on-demand price"
        assert all(p.provider and p.as_of for p in published), accelerator
        assert default_price_entry(accelerator, reg) in published
    # The three the registry lacked, as the price lists print them (per GPU-hour): Oracle's list prices for
    # BM.GPU.GB300.4 and BM.GPU.MI355X.8, DigitalOcean's on-demand MI325X Droplet.
    listed = {"gb300": 18.00, "mi355x": 8.60, "mi325x": 3.80}
    for accelerator, usd in listed.items():
        assert default_price_entry(accelerator, reg).price.m_as("USD/hour") == pytest.approx(usd)


def test_amd_instinct_rates_are_dense_and_follow_the_matrix_cores(reg):
    # Peak = clock x FMAs per matrix core per clock x 2 x matrix cores (4 per CU); FP8 and INT8 at twice the
    # 16-bit rate, MXFP4 at twice FP8. MI325X: 2100 MHz, 256 FMAs, 304 CUs (the MI300X's silicon). MI355X:
    # 2400 MHz, 512 FMAs, 256 CUs. AMD prints them rounded (1.3 / 2.61 PF; 2.5 / 5 / 10.1 PF) and the
    # sparse rates at twice those, which the registry must not hold.
    for gpu, clock, fmas, cus in (("mi325x", 2100e6, 256, 304), ("mi355x", 2400e6, 512, 256)):
        rates = {k: v.m_as("TFLOP/s") for k, v in reg.accelerators[gpu].dense_throughput.items()}
        half = clock * fmas * 2 * 4 * cus / 1e12
        assert rates["bf16"] == pytest.approx(half, abs=0.05) and rates["fp16"] == rates["bf16"]
        assert rates["fp8"] == pytest.approx(2 * half, abs=0.1) and rates["int8"] == rates["fp8"]
    assert reg.accelerators["mi355x"].dense_throughput["fp4"].m_as("PFLOP/s") == pytest.approx(10.1, abs=0.05)
    assert "fp4" not in reg.accelerators["mi325x"].dense_throughput  # CDNA 3 has no FP4
    # Memory: AMD's own table gives 256 and 288 GiB; bandwidth 6 and 8 TB/s; board power 1000 and 1400 W.
    for gpu, gib, tbps, watts in (("mi325x", 256, 6, 1000), ("mi355x", 288, 8, 1400)):
        device = reg.accelerators[gpu]
        assert device.memory.m_as("GiB") == gib and device.memory_nameplate.m_as("GB") == gib
        assert (device.memory_bandwidth.m_as("TB/s"), device.tdp.m_as("W")) == (tbps, watts)
        assert device.vendor == "AMD" and device.host_link == "pcie-gen5-x16"


def test_published_model_configs(reg):
    # Values from the published config.json files (see the sources in the registry).
    llama = reg.models["llama-3.1-70b"]
    assert (llama.layers, llama.attention_heads, llama.kv_heads, llama.head_dim) == (80, 64, 8, 128)
    deepseek = reg.models["deepseek-v3"]
    assert deepseek.attention == "mla" and deepseek.kv_lora_rank == 512 and deepseek.qk_rope_head_dim == 64
    assert deepseek.parameters == pytest.approx(671e9, rel=0.01) and deepseek.active == pytest.approx(37e9, rel=0.02)
    mixtral = reg.models["mixtral-8x7b"]
    assert (mixtral.experts, mixtral.experts_per_token) == (8, 2)


def test_every_accelerator_lists_dense_throughput_for_a_serving_precision(reg):
    for accelerator in reg.accelerators.values():
        assert {"fp16", "bf16"} & set(accelerator.dense_throughput), accelerator.id
        assert accelerator.memory >= accelerator.memory_nameplate * 0.9


def test_unknown_id_lists_known_ids(reg):
    with pytest.raises(UnknownEntryError, match=r"unknown accelerator id 'h999'; known ids: .*h100-sxm"):
        reg.accelerators["h999"]
    with pytest.raises(KeyError):
        reg.models["gpt-5"]


def test_aliases_and_spelling_variants_resolve_to_ids(reg):
    assert reg.models["meta-llama/Llama-3.1-70B-Instruct"].id == "llama-3.1-70b"
    assert reg.models["Qwen/Qwen3-32B"].id == "qwen3-32b"
    assert reg.accelerators["H100_SXM"].id == "h100-sxm"
    assert reg.accelerators["a100_sxm"].id == "a100-sxm-80gb"
    assert "h200_sxm" in reg.accelerators and "h999" not in reg.accelerators
    assert "meta-llama/Llama-3.1-70B" not in list(reg.models)  # iteration yields ids only


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("deepseek-r1", "deepseek-v3"),  # MLPerf's benchmark name; deepseek-ai/DeepSeek-R1 is an alias
        ("DeepSeek-R1-0528", "deepseek-v3"),
        ("llama3.1-8b", "llama-3.1-8b"),  # MLPerf's (aliases)
        ("llama3.1-405b", "llama-3.1-405b"),
        ("nvidia/Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b"),  # a checkpoint's repository
        ("Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b"),  # and without its organization
        ("Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3.1"),
    ],
)
def test_names_as_published_results_write_them_resolve(reg, name, model):
    assert reg.models[name].id == model


@pytest.mark.parametrize(
    ("name", "accelerator"),
    [
        ("RTX PRO 6000", "rtx-pro-6000"),
        ("H100 SXM", "h100-sxm"),
        ("GB200 NVL72", "gb200"),
        ("h100 sxm5  80gb", "h100-sxm"),
    ],
)
def test_spaces_in_a_name_read_as_hyphens(reg, name, accelerator):
    assert reg.accelerators[name].id == accelerator


def test_benchmark_suites_names_are_aliases_a_user_file_cannot_make_ambiguous(reg):
    # MLPerf's names and the engines' spellings are given names, not derived ones: another entry's repository
    # ending in DeepSeek-R1 would make a derived name ambiguous, never an alias
    from calculator.calibration_files import engine_name

    assert reg.models.resolve("deepseek-r1", given=True) == "deepseek-v3"
    assert reg.models.resolve("llama3.1-405b", given=True) == "llama-3.1-405b"
    assert [engine_name(name, reg) for name in ("TensorRT-LLM", "TRT-LLM", "tensorrt_llm")] == ["trtllm"] * 3


def test_a_checkpoint_named_is_the_checkpoint_a_plan_assumes():
    from calculator.performance import checkpoint_for

    named = "nvidia/Qwen3-235B-A22B-NVFP4"
    assert checkpoint_for(named, "fp4", "sglang").repo == named
    assert checkpoint_for(named, "fp4", "sglang").kv_cache == "fp8"


def test_a_name_without_its_organization_resolves_only_where_one_entry_has_it():
    from types import SimpleNamespace

    from calculator.registry import Section

    entries = {
        "a": SimpleNamespace(aliases=("org-a/Shared-7B", "org-a/Only-A")),
        "b": SimpleNamespace(aliases=("org-b/Shared-7B",)),
        "c": SimpleNamespace(aliases=("Only-A",)),  # an alias is a name of its own: it wins over another's short name
    }
    entries["d"] = SimpleNamespace(aliases=(), checkpoints=(SimpleNamespace(repo="org-q/Both-FP8"),))
    entries["e"] = SimpleNamespace(aliases=(), checkpoints=(SimpleNamespace(repo="org-q/Both-FP8"),))
    section = Section("model", entries)
    assert section.resolve("org-q/Both-FP8") is None and section.resolve("Both-FP8") is None  # two checkpoints' repo
    assert section.resolve("org-a/shared-7b") == "a" and section.resolve("org-b/Shared-7B") == "b"
    assert section.resolve("Shared-7B") is None
    assert section.resolve("only-a") == "c"
    with pytest.raises(UnknownEntryError, match="unknown model id 'Shared-7B'"):
        section["Shared-7B"]


def test_alias_collisions_are_errors(tmp_path):
    entry = MINIMAL.split("accelerators:\n", 1)[1].split("models:", 1)[0]
    second = entry.replace("id: gpu-x", "id: gpu-z").replace("name: GPU X", "name: GPU Z\n    aliases: [GPU_X]")
    message = error_for(tmp_path, MINIMAL.replace("models:", second + "models:"))
    assert "accelerators['gpu-z']: field 'aliases': the name 'gpu-x' already names accelerators['gpu-x']" in message


def test_unsupported_precision_is_a_clear_error(reg):
    with pytest.raises(RegistryError, match="no dense fp4 throughput"):
        reg.accelerators["v100-sxm"].peak_throughput("fp4")


def test_json_schema_is_current():
    checked_in = (ROOT / "docs" / "registry.schema.json").read_text(encoding="utf-8")
    assert checked_in == schema_text(), "run: servecalc registry schema > docs/registry.schema.json"
    schema = json.loads(checked_in)
    assert set(SECTIONS) <= set(schema["properties"])


def test_registry_is_cached_and_reloaded_when_the_file_changes(tmp_path):
    file = write(tmp_path, MINIMAL)
    first = load_registry(file)
    assert load_registry(file) is first
    file.write_text(MINIMAL.replace("3.35 TB/s", "3.36 TB/s"))
    os.utime(file, ns=(1, 1))
    assert load_registry(file).accelerators["gpu-x"].memory_bandwidth == Q_(3.36, "TB/s")


# ------------------------------------------------------------------ user files and errors

MINIMAL = textwrap.dedent(
    """
    schema_version: 1
    sources:
      - {id: sheet, title: "A datasheet", url: "https://example.com/sheet.pdf", kind: vendor_datasheet}
    accelerators:
      - id: gpu-x
        name: GPU X
        vendor: Example
        provenance: published
        memory: 80 GiB
        memory_nameplate: 80 GB
        memory_bandwidth: 3.35 TB/s
        dense_throughput: {bf16: 989 TFLOP/s}
        tdp: 700 W
        sources:
          - {source: sheet, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]}
    models:
      - id: model-x
        name: Model X
        provenance: published
        parameters: 70.6e9
        layers: 80
        attention_heads: 64
        kv_heads: 8
        head_dim: 128
        attention: gqa
        sources:
          - {source: sheet, fields: [parameters, layers, attention_heads, kv_heads, head_dim, attention]}
    """
)


def write(folder, text, name="registry.yaml"):
    path = Path(folder) / name
    path.write_text(text, encoding="utf-8")
    return path


def error_for(tmp_path, text):
    with pytest.raises(RegistryError) as info:
        load_registry(write(tmp_path, text))
    return str(info.value)


def test_minimal_file_loads_and_counts_parse(tmp_path):
    reg = load_registry(write(tmp_path, MINIMAL))
    assert reg.models["model-x"].parameters == pytest.approx(70.6e9)
    assert reg.models["model-x"].active == pytest.approx(70.6e9)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # unknown unit
        (("80 GiB", "80 GiBs"), r"registry.yaml: accelerators\['gpu-x'\]: field 'memory': expected a quantity like "
         r"'80 GB', found '80 GiBs' \(unknown unit"),
        # wrong dimension
        (("3.35 TB/s", "3.35 TFLOP/s"), r"field 'memory_bandwidth': expected dimension \[information\] / \[time\] "
         r".*found '3.35 TFLOP/s' with dimension \[compute\] / \[time\]"),
        # a number where a quantity is needed
        (("tdp: 700 W", "tdp: 700"), r"field 'tdp': expected a quantity string like '700 W', found 700"),
        # negative and zero capacity
        (("memory: 80 GiB", "memory: -80 GiB"), r"field 'memory': expected a positive quantity .*found '-80 GiB'"),
        (("memory: 80 GiB", "memory: 0 GiB"), r"field 'memory': expected a positive quantity .*found '0 GiB'"),
        (("parameters: 70.6e9", "parameters: 0"), r"models\['model-x'\]: field 'parameters': expected a positive number, found 0"),
        # unknown field
        (("    tdp: 700 W", "    tdp: 700 W\n    colour: green"), r"accelerators\['gpu-x'\]: field 'colour': unknown field .*found 'green'"),
        # missing source for one field
        (("memory_bandwidth, dense_throughput, tdp]", "memory_bandwidth, dense_throughput]"),
         r"accelerators\['gpu-x'\]: field 'tdp': missing source"),
        # source id that is not declared
        (("{source: sheet, fields: [memory,", "{source: other, fields: [memory,"),
         r"field 'sources': source 'other' is not listed under the file's top-level 'sources'"),
        # wrong type for a count
        (("layers: 80", "layers: eighty"), r"models\['model-x'\]: field 'layers': Input should be a valid integer, found 'eighty'"),
        # inconsistent attention
        (("kv_heads: 8", "kv_heads: 7"), r"models\['model-x'\]: .*gqa needs kv_heads < attention_heads dividing them, found 7/64"),
        # unknown precision
        (("{bf16: 989 TFLOP/s}", "{bf17: 989 TFLOP/s}"), r"field 'dense_throughput.bf17.\[key\]': Input should be 'fp64'"),
        # malformed YAML
        (("models:", "models: ["), r"registry.yaml: malformed YAML at line \d+, column \d+"),
        # unknown top-level section
        (("models:", "gpus: []\nmodels:"), r"unknown top-level key\(s\) \['gpus'\]"),
        # missing id
        (("  - id: model-x", "  - ident: model-x"), r"models\[0\]: field 'id': expected a lowercase id, found None"),
    ],
)  # fmt: skip
def test_registry_errors_name_file_entry_field_expected_and_found(tmp_path, change, expected):
    old, new = change
    assert old in MINIMAL
    message = error_for(tmp_path, MINIMAL.replace(old, new))
    assert re.search(expected, message), message


def test_missing_sources_list_is_an_error(tmp_path):
    block = "    sources:\n      - {source: sheet, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]}\n"
    assert block in MINIMAL
    text = MINIMAL.replace(block, "")
    assert "accelerators['gpu-x']: field 'sources': expected at least one source" in error_for(tmp_path, text)


def test_duplicate_ids_are_errors(tmp_path):
    entry = MINIMAL.split("accelerators:\n", 1)[1].split("models:", 1)[0]
    doubled = MINIMAL.replace("models:", entry + "models:")
    assert "accelerators['gpu-x']: duplicate id in the same file" in error_for(tmp_path, doubled)
    across = MINIMAL.replace("id: model-x", "id: gpu-x")
    assert "models['gpu-x']: duplicate id: it is already used in accelerators" in error_for(tmp_path, across)


def test_yaml_is_loaded_safely(tmp_path):
    hostile = MINIMAL.replace("models:", "models:\n  - !!python/object/apply:os.system ['touch pwned']")
    message = error_for(tmp_path, hostile)
    assert "malformed YAML" in message and "could not determine a constructor" in message
    assert not (tmp_path / "pwned").exists()


def test_unreadable_file_is_an_error(tmp_path):
    with pytest.raises(RegistryError, match="cannot read the registry file"):
        load_registry(tmp_path / "missing.yaml")


def test_user_file_adds_and_overrides_entries(tmp_path):
    base = write(tmp_path, MINIMAL)
    user = write(
        tmp_path,
        textwrap.dedent(
            """
            sources:
              - {id: my-bench, title: "Our measurement", url: "file:bench.csv", kind: user}
            accelerators:
              - id: gpu-x
                memory_bandwidth: 3.0 TB/s
                sources: [{source: my-bench, fields: [memory_bandwidth], note: "measured achievable"}]
              - id: gpu-y
                name: GPU Y
                vendor: Example
                provenance: user
                memory: 24 GiB
                memory_nameplate: 24 GB
                memory_bandwidth: 300 GB/s
                dense_throughput: {fp16: 120 TFLOP/s}
                tdp: 72 W
                sources: [{source: my-bench, fields: [memory, memory_nameplate, memory_bandwidth, dense_throughput, tdp]}]
            """
        ),
        name="user.yaml",
    )
    reg = load_registry(base, extra=[user])
    assert reg.accelerators["gpu-x"].memory_bandwidth == Q_(3.0, "TB/s")
    assert reg.accelerators["gpu-x"].memory == Q_(80, "GiB")  # untouched fields keep the base value
    assert [link.source for link in reg.accelerators["gpu-x"].source_of("memory_bandwidth")] == ["sheet", "my-bench"]
    assert reg.accelerators["gpu-y"].tdp == Q_(72, "W")
    assert load_registry(base).accelerators["gpu-x"].memory_bandwidth == Q_(3.35, "TB/s")


def test_user_file_errors_name_the_user_file(tmp_path):
    base = write(tmp_path, MINIMAL)
    user = write(tmp_path, SOURCED_OVERRIDE.format(field="tdp", value="70 GB"), name="mine.yaml")
    with pytest.raises(RegistryError, match=r"mine.yaml: accelerators\['gpu-x'\]: field 'tdp': expected dimension"):
        load_registry(base, extra=[user])


SOURCED_OVERRIDE = """\
sources:
  - {{id: mine, title: My measurement, url: "https://example.org/mine", kind: user}}
accelerators:
  - id: gpu-x
    {field}: {value}
    sources: [{{source: mine, fields: [{field}]}}]
"""


def test_an_override_cites_a_source_for_every_field_it_changes(tmp_path):
    # The registry's rule (docs/registry.md): a source that covers only tdp cannot carry a new memory.
    base = write(tmp_path, MINIMAL)
    wrong = SOURCED_OVERRIDE.format(field="tdp", value="650 W").replace(
        "    tdp: 650 W\n", "    tdp: 650 W\n    memory: 96 GiB\n"
    )
    user = write(tmp_path, wrong, name="mine.yaml")
    with pytest.raises(RegistryError, match=r"mine.yaml: accelerators\['gpu-x'\]: the override changes \['memory'\]"):
        load_registry(base, extra=[user])
    right = write(tmp_path, SOURCED_OVERRIDE.format(field="memory", value="96 GiB"), name="right.yaml")
    assert load_registry(base, extra=[right]).accelerators["gpu-x"].memory == Q_(96, "GiB")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("9**9**9 GiB", "expected a number and a unit like"),  # used to freeze the parser
        ("inf GiB", "unknown unit"),
        ("1e999 GiB", "the number must be finite"),
        (".inf", "expected a quantity string"),
        ("'" + "9" * 5000 + " GiB'", "longer than 100 characters"),
    ],
)
def test_hostile_quantities_are_refused_fast_with_a_short_message(tmp_path, value, message):
    import time

    base = write(tmp_path, MINIMAL.replace("memory: 80 GiB", f"memory: {value}"))
    started = time.perf_counter()
    with pytest.raises(RegistryError, match=message) as error:
        load_registry(base)
    assert time.perf_counter() - started < 1.0 and len(str(error.value)) < 1000


def test_an_alias_bomb_is_refused_with_a_short_message(tmp_path):
    # Under 1 KB of YAML that expands to 10**9 values: refused before it is validated or printed.
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = write(tmp_path, "models:\n  - id: bomb\n    name: x\n    " + "\n    ".join(lines) + "\n")
    assert bomb.stat().st_size < 1024
    with pytest.raises(RegistryError, match="expands to more than") as error:
        load_registry(bomb)
    assert len(str(error.value)) < 1000


def test_a_registry_file_over_the_size_limit_is_refused_before_parsing(tmp_path, monkeypatch):
    base = write(tmp_path, MINIMAL + "# " + "x" * 5000 + "\n")
    monkeypatch.setenv("SERVECALC_REGISTRY_MAX_BYTES", "4096")
    with pytest.raises(
        RegistryError, match=r"has more than 4,096 bytes, the most that is read \(set SERVECALC_REGISTRY_MAX_BYTES"
    ):
        load_registry(base)
    assert load_registry().accelerators["h100-sxm"]  # the packaged registry is not limited


def test_packaged_file_is_plain_yaml_with_the_documented_sections():
    document = yaml.safe_load(DEFAULT_REGISTRY_PATH.read_text(encoding="utf-8"))
    assert set(document) == {"schema_version", "sources", *SECTIONS}


# ------------------------------------------------------------------ engines

ENGINE = MINIMAL + textwrap.dedent(
    """\
    engines:
      - id: my-engine
        name: My serving engine
        provenance: user
        token_budget:
          - {max_num_tokens: 4096, max_num_seqs: 128}
        chunked_prefill: true
        mixed_batching: true
        memory_policy: device
        memory_utilization: 0.85
        memory_reserve: 3 GB
        output_reservation: 0.5
        quantized_kv_precision: bf16
        step_overhead: 1 ms
        sequence_overhead: 30 us
        request_overhead: 10 ms
        sources:
          - source: sheet
            fields: [token_budget, chunked_prefill, mixed_batching, memory_policy, memory_utilization, memory_reserve,
                     output_reservation, quantized_kv_precision, expert_exchange, step_overhead, sequence_overhead,
                     request_overhead]
    """
)


def test_a_user_engine_without_the_newer_engine_fields_loads_with_their_defaults(tmp_path):
    engine = load_registry(write(tmp_path, ENGINE)).engines["my-engine"]
    # no release changes a default, no launch flags (no launch command), listed by its name
    assert (engine.async_scheduling_since, engine.kv_declaration_since, dict(engine.launch_flags)) == (None, None, {})
    assert engine.memory_fraction_rule is None and engine.label == "My serving engine"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # SGLang's policy needs its rule
        (("memory_policy: device", "memory_policy: sglang"), r"field 'memory_fraction_rule': memory_policy 'sglang'"),
        # a release is major.minor
        (("    memory_policy: device", "    memory_policy: device\n    async_scheduling_since: latest"),
         r"field 'async_scheduling_since': String should match pattern"),
        # a flag is --name: nothing a shell would read
        (("    memory_policy: device", "    memory_policy: device\n    launch_flags: {tensor_parallel: '--tp; rm'}"),
         r"field 'launch_flags.tensor_parallel': String should match pattern"),
        # flags cited one by one: each must be
        (("    memory_policy: device", "    memory_policy: device\n    launch_flags: {tensor_parallel: --tp, port: --port}\n"
          "    display_name: Mine"),
         r"field 'launch_flags.port': missing source"),
    ],
)  # fmt: skip
def test_engine_fields_are_checked(tmp_path, change, expected):
    old, new = change
    text = ENGINE.replace(old, new).replace(
        "output_reservation, quantized", "output_reservation, launch_flags.tensor_parallel, quantized"
    )
    message = error_for(tmp_path, text)
    assert re.search(expected, message), message


def test_an_engines_gpu_factor_is_kept_per_accelerator_and_checked(tmp_path):
    def scaled(factors):
        return ENGINE.replace(
            "    request_overhead: 10 ms\n", f"    request_overhead: 10 ms\n    gpu_time_scale: {factors}\n"
        ).replace("request_overhead]", "request_overhead, gpu_time_scale]")

    reg = load_registry(write(tmp_path, scaled("{gpu-x: 1.25}")))
    profile = engine_profile("my-engine", reg)
    assert profile.efficiency_for("gpu-x").gpu_time_scale == 1.25  # there, and nowhere else
    assert profile.efficiency_for("gpu-y").gpu_time_scale == profile.efficiency.gpu_time_scale == 1.0
    assert profile.efficiency_for("gpu-x").step_overhead == profile.efficiency.step_overhead  # the costs: everywhere
    assert "field 'gpu_time_scale': expected accelerator ids, found 'h100-sxm'" in error_for(
        tmp_path, scaled("{h100-sxm: 1.25}")
    )
    assert "field 'gpu_time_scale': 40 is outside the plausible range 0.1 to 10" in error_for(
        tmp_path, scaled("{gpu-x: 40}")
    )


def test_engine_flags_and_releases_are_read_from_the_registry(reg):
    # vLLM 0.14.0 made asynchronous scheduling the default and took the checkpoint's KV declaration
    # (config/vllm.py, PR #27614; utils/torch_utils.py, PR #30785); SGLang's and TensorRT-LLM's are not dated.
    assert (reg.engines["vllm"].async_scheduling_since, reg.engines["vllm"].kv_declaration_since) == ("0.14", "0.14")
    assert reg.engines["sglang"].async_scheduling_since is None
    # Each launch flag is cited, the tensor-parallel one by each engine's own documentation.
    assert [reg.engines[e].launch_flags["tensor_parallel"] for e in ("vllm", "sglang", "trtllm")] == [
        "--tensor-parallel-size", "--tp-size", "--tp_size"
    ]  # fmt: skip
    for engine in ("vllm", "sglang", "trtllm"):
        for option in reg.engines[engine].launch_flags:
            assert reg.engines[engine].source_of(f"launch_flags.{option}"), (engine, option)
    # The dashboard lists engines by their short names.
    assert [e.label for e in reg.engines.values()] == ["vLLM", "SGLang", "TensorRT-LLM", "generic"]
