"""Hybrid models (issue 54, item 1): layers that keep a fixed state per sequence instead of a growing KV cache.

Nemotron-H and Nemotron 3 run Mamba-2 mixers on most of their layers and attend on a few; Qwen3-Next and Qwen3.5
run Gated DeltaNet. Only the attention layers cache a key and a value per token; a state layer keeps the same
bytes whatever the sequence's length (vLLM's ``MambaStateShapeCalculator``: docs/registry.md, Hybrid models).
Every figure below is worked out by hand from the config numbers in the comments.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from calculator import Q_, load_registry
from calculator.errors import InputError
from calculator.memory import model_kv_bytes_per_token, model_memory_fit, state_bytes_per_sequence
from calculator.model_import import import_model_config
from calculator.performance import Efficiency, engine_memory_fit, step_arrays
from calculator.performance.iteration import STATE_SCAN_COMPUTE_FRACTION, iteration_seconds
from calculator.registry import Model

REGISTRY = load_registry()
DATA = Path(__file__).parent / "data" / "model_configs"

# Nemotron 3 Nano (config.json of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16): 23 Mamba-2 layers of
# mamba_num_heads 64 x mamba_head_dim 64 x ssm_state_size 128 = 524,288 SSM elements at float32
# (mamba_ssm_cache_dtype) = 2,097,152 B, and a convolution state of (conv_kernel 4 - 1) x (64 x 64 + 2 x n_groups 8
# x 128 = 6,144 channels) = 18,432 elements at 16 bits = 36,864 B: 2,134,016 B a layer, 49,082,368 B a sequence.
NANO_STATE = 23 * (64 * 64 * 128 * 4 + 3 * (64 * 64 + 2 * 8 * 128) * 2)
# Its 6 attention layers cache K and V of 2 KV heads of 128 at 16 bits: 6 x 2 x 2 x 128 x 2 = 6,144 B a token.
NANO_KV = 6 * 2 * 2 * 128 * 2


def _gated_deltanet_model() -> Model:
    """Qwen3.5-27B's text model as the registry would hold it (config.json's text_config, bundled in tests/data)."""
    text = json.loads((DATA / "Qwen--Qwen3.5-27B_config.json").read_text())["text_config"]
    kinds = text["layer_types"]
    return Model(
        id="qwen3.5-27b-text", name="Qwen3.5 27B (text)", provenance="user",
        sources=[{"source": "u", "fields": ["layers"]}], parameters=27e9, layers=text["num_hidden_layers"],
        hidden_size=text["hidden_size"], attention_heads=text["num_attention_heads"],
        kv_heads=text["num_key_value_heads"], head_dim=text["head_dim"], attention="gqa",
        attention_layers=kinds.count("full_attention"), state_kind="gated_deltanet",
        state_layers=kinds.count("linear_attention"), state_heads=text["linear_num_value_heads"],
        state_head_dim=text["linear_value_head_dim"], state_key_dim=text["linear_key_head_dim"],
        state_groups=text["linear_num_key_heads"], conv_kernel=text["linear_conv_kernel_dim"], state_precision="bf16",
    )  # fmt: skip


# ------------------------------------------------------------------------------------ the state and the KV


def test_the_state_a_sequence_keeps_is_counted_from_the_shapes():
    assert state_bytes_per_sequence("nemotron-3-nano-30b-a3b").m_as("B") == NANO_STATE == 49_082_368
    # Nemotron-H 56B: 54 Mamba-2 layers, 256 heads x 64 x ssm_state_size 256 at float16 (no mamba_ssm_cache_dtype:
    # vLLM's default for NemotronH) and 3 x (256 x 64 + 2 x 8 x 256 = 20,480) convolution elements at 16 bits.
    assert state_bytes_per_sequence("nemotron-h-56b").m_as("B") == 54 * (256 * 64 * 256 * 2 + 3 * 20_480 * 2)
    # Qwen3.5-27B's Gated DeltaNet: 48 linear-attention layers of 48 value heads x 128 x 128 at bf16 (vLLM keeps
    # both states at the model's dtype), convolution over 2 x 16 x 128 + 48 x 128 = 10,240 channels, 3 positions.
    qwen = _gated_deltanet_model()
    assert (qwen.attention_layers, qwen.state_layers) == (16, 48)
    assert state_bytes_per_sequence(qwen).m_as("B") == 48 * (48 * 128 * 128 * 2 + 3 * 10_240 * 2) == 78_446_592
    # Its KV: 16 attention layers x 2 x 4 KV heads x 256 x 2 B; a transformer's 64 layers would cache four times it.
    assert model_kv_bytes_per_token(qwen, "bf16").m_as("B/token") == 16 * 2 * 4 * 256 * 2
    # A 32,768-token sequence: 32,768 x 65,536 B + 78,446,592 B = 2.23 GB (a 64-layer transformer: 8.6 GB).
    a = step_arrays(qwen, "h100-sxm", "bf16")
    assert float(a.kv_tokens(32_768)) * a.kv_bytes_per_token == pytest.approx(32_768 * 65_536 + 78_446_592)
    assert state_bytes_per_sequence("llama-3.1-8b").m_as("B") == 0


def test_a_32k_sequence_holds_its_attention_layers_tokens_and_the_fixed_state():
    # 32,768 tokens x 6,144 B + 49,082,368 B = 250,408,960 B (all 52 layers caching K and V would be 1.74 GB).
    expected = 32_768 * NANO_KV + NANO_STATE
    assert expected == 250_408_960
    a = step_arrays("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16")
    assert a.kv_bytes_per_token == NANO_KV
    assert float(a.kv_tokens(32_768)) * a.kv_bytes_per_token == pytest.approx(expected, rel=1e-12)
    # The chapter's fit on one H200 (tokens in whole 16-token blocks: 32,768 is one).
    fit = model_memory_fit("nemotron-3-nano-30b-a3b", "h200-sxm", 32_768, 1, "bf16", "bf16", block_size=16)
    assert fit.kv_per_request.m_as("B") == pytest.approx(expected)
    # Over 2 GPUs each holds one KV head's share (2 heads split) and half the Mamba-2 heads' state.
    split = model_memory_fit("nemotron-3-nano-30b-a3b", "h200-sxm", 32_768, 1, "bf16", "bf16", 2)
    assert split.kv_per_request.m_as("B") == pytest.approx(expected / 2)
    # The longest single sequence leaves room for the state first.
    room = fit.available.m_as("B") - NANO_STATE
    assert int(fit.max_context) == min(math.floor(room / NANO_KV / 16) * 16, 262_144)


def test_an_engine_holds_the_state_beside_each_sequences_tokens():
    # vLLM on one H200: the KV tokens the memory leaves, each sequence taking its 32,768 tokens and its state as
    # 49,082,368 / 6,144 = 7,988.67 tokens' worth, in whole 16-token blocks (40,756.67 -> 40,768).
    fit = engine_memory_fit("nemotron-3-nano-30b-a3b", "h200-sxm", "bf16", 32_768, 1, engine="vllm")
    assert fit.block == 16
    assert fit.sequences == fit.kv_tokens // 40_768
    # A transformer caching every layer would hold 52/6 x 32,768 = 283,989 tokens' worth a sequence: far fewer.
    assert fit.sequences > 5 * (fit.kv_tokens // 283_989 + 1)


def test_the_closed_form_and_the_simulator_hold_the_state_alike():
    # 320 clients of 4,096/512 tokens on Nemotron 3 Nano BF16 on one H100 under vLLM: with its 49 MB state a
    # sequence holds about 12,600 tokens' worth of KV, so the cache holds about 156 of them and both sides queue
    # for it; without the state (4,608 tokens' worth) the cache would hold every client.
    from calculator.performance import ENGINES, closed_loop_seconds
    from calculator.simulation import SimulationSetup, Traffic, simulate

    clients, prompt, output = 320, 4096, 512
    setup = SimulationSetup("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16", tensor_parallel=1, engine="vllm")
    traffic = Traffic(clients=clients, input_tokens=prompt, output_tokens=output, requests=6 * clients,
                      input_cv=0.1, output_cv=0.1)  # fmt: skip
    summary = simulate(setup, traffic, seeds=1).summary.set_index(["metric", "statistic"]).value
    profile = ENGINES["vllm"]
    a = step_arrays("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16", engine=profile)
    closed = closed_loop_seconds(a, profile, 1, prompt, output, clients)
    assert bool(closed["memory_limited"])
    assert float(closed["tpot"]) == pytest.approx(summary["tpot", "mean"], rel=0.10)
    assert float(closed["ttft"]) == pytest.approx(summary["ttft", "mean"], rel=0.15)
    stateless = closed_loop_seconds(dataclasses.replace(a, state_bytes=0.0, curves={}), profile, 1, prompt, output,
                                    clients)  # fmt: skip
    assert not bool(stateless["memory_limited"]) and float(stateless["ttft"]) < float(closed["ttft"]) / 5


# ------------------------------------------------------------------------------------ step time


def _no_fixed_costs(kernels: bool) -> Efficiency:
    return Efficiency(0.8, 0.65, 0.77, Q_(28e-6, "s"), Q_(0, "s"), Q_(0, "s"), kernels=kernels)


@pytest.mark.parametrize("kernels", [True, False])
def test_a_decode_step_reads_and_writes_each_sequences_state(kernels):
    # 64 sequences decoding a token each on one H100: the state layers read and write 64 x 49,082,368 B once, at the
    # HBM bandwidth (3.35 TB/s) on the kernel path, at the efficiency's achieved share of it on the roofline path.
    a = step_arrays("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16")
    stateless = dataclasses.replace(a, state_bytes=0.0, curves={})
    eff = _no_fixed_costs(kernels)
    bandwidth = a.hbm_bandwidth * (1.0 if kernels else eff.hbm_bandwidth)
    assert a.hbm_bandwidth == pytest.approx(3.35e12)
    seconds = 2 * 64 * NANO_STATE / bandwidth
    step = iteration_seconds(a, eff, 1, 64, 8192) - iteration_seconds(stateless, eff, 1, 64, 8192)
    if kernels:
        assert float(step) == pytest.approx(seconds, rel=1e-9)
    else:  # the roofline takes the longer of the bytes and the FLOPs: a decode step is bound by the bytes
        assert float(step) == pytest.approx(seconds, rel=1e-6)


def test_a_prompts_state_layers_scan_linearly_in_its_tokens():
    # Per token and Mamba-2 layer: 4 FLOP per SSM element (524,288) and 2 x conv_kernel 4 x 6,144 channels for the
    # convolution, 2,146,304 FLOP; 23 layers over a 4,096-token prompt at a quarter of the H100's dense BF16 peak.
    a = step_arrays("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16")
    assert a.state_flops == 4 * 524_288 + 2 * 4 * 6_144
    no_scan = dataclasses.replace(a, state_flops=0.0, curves={})
    eff = _no_fixed_costs(True)
    args = (eff, 1, 0, 0, 4096, 1)
    seconds = 23 * 4096 * 2_146_304 / (STATE_SCAN_COMPUTE_FRACTION * a.bf16_flops)
    assert float(iteration_seconds(a, *args) - iteration_seconds(no_scan, *args)) == pytest.approx(seconds, rel=1e-9)
    twice = iteration_seconds(a, eff, 1, 0, 0, 8192, 1) - iteration_seconds(no_scan, eff, 1, 0, 0, 8192, 1)
    assert float(twice) == pytest.approx(2 * seconds, rel=1e-9)  # linear, where attention grows as the square


def test_decode_attention_reads_the_attention_layers_cache_only():
    # 64 sequences growing from 32,768 to 65,536 tokens: the step reads 64 x 32,768 x 6,144 B = 12.9 GB more (the 6
    # attention layers' K and V), at most the HBM bandwidth of 3.35 TB/s and at least half of it; had all 52
    # layers cached K and V it would read 52 / 6 times that.
    a = step_arrays("nemotron-3-nano-30b-a3b", "h100-sxm", "bf16")
    eff = _no_fixed_costs(True)
    more = float(iteration_seconds(a, eff, 1, 64, 65_536) - iteration_seconds(a, eff, 1, 64, 32_768))
    fastest = 64 * 32_768 * NANO_KV / a.hbm_bandwidth
    assert fastest <= more <= 2 * fastest


# ------------------------------------------------------------------------------------ the importer


def _tiny_nemotron_h(tmp_path: Path, **changes) -> Path:
    config = {
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 64,
        "vocab_size": 1000, "num_hidden_layers": 4, "hybrid_override_pattern": "M*-E", "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48, "mamba_num_heads": 8,
        "mamba_head_dim": 8, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4, "mamba_ssm_cache_dtype": "float32",
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 16,
        "moe_shared_expert_intermediate_size": 32, "tie_word_embeddings": False, "max_position_embeddings": 4096,
    }  # fmt: skip
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config | changes))
    return file


def test_a_small_nemotron_h_config_is_counted_by_hand(tmp_path):
    imported = import_model_config(_tiny_nemotron_h(tmp_path), model_id="tiny-hybrid")
    # Embedding and LM head 1,000 x 64 = 64,000 each. Attention (*): q 64 x 64, k and v 64 x 32, o 64 x 64 = 12,288.
    # MLP (-): up and down 2 x 64 x 48 = 6,144 (relu2, no gate). Mamba-2 (M): inner 8 x 8 = 64, convolved channels
    # 64 + 2 x 2 x 16 = 128; in_proj 64 x (128 + 64 + 8) = 12,800, conv 128 x 4 + 128 bias = 640, A, D and dt bias
    # 3 x 8 = 24, gated norm 64, out_proj 64 x 64 = 4,096: 17,624. MoE (E): router 64 x 4 + 4 bias = 260, experts
    # 4 x 2 x 64 x 16 = 8,192, shared expert 2 x 64 x 32 = 4,096: 12,548. Norms 4 x 64 + 64 = 320. Total 176,924;
    # a token skips 2 of the 4 experts (2 x 2,048): 172,828 active.
    assert imported.parameters_by_part["state"] == 17_624 and imported.parameters_by_part["dense_mlp"] == 6_144
    assert imported.model.parameters == 176_924 and imported.model.active_parameters == 172_828
    m = imported.model
    assert (m.layers, m.attention_layers, m.state_layers, m.state_kind, m.state_precision) == (
        4,
        1,
        1,
        "mamba2",
        "fp32",
    )
    # One Mamba-2 layer's state: 8 x 8 x 16 = 1,024 elements x 4 B + 3 x 128 x 2 B = 4,864 B.
    assert state_bytes_per_sequence(m).m_as("B") == 4_864
    # Without mamba_ssm_cache_dtype vLLM keeps NemotronH's SSM state at float16.
    plain = _tiny_nemotron_h(tmp_path, mamba_ssm_cache_dtype=None)
    assert import_model_config(plain, model_id="tiny-hybrid").model.state_precision == "fp16"


def test_a_small_gated_deltanet_config_is_counted_by_hand(tmp_path):
    config = {
        "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 64, "vocab_size": 1000, "num_hidden_layers": 4,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"], "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 48, "linear_num_value_heads": 4,
        "linear_value_head_dim": 8, "linear_key_head_dim": 8, "linear_num_key_heads": 2, "linear_conv_kernel_dim": 4,
        "tie_word_embeddings": False, "max_position_embeddings": 4096,
    }  # fmt: skip
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config))
    imported = import_model_config(file, model_id="tiny-gdn")
    # Embedding and LM head 64,000 each. Gated attention: q and its gate 64 x 2 x 4 x 16 = 8,192, k and v 64 x 32
    # each, o 64 x 64, q and k norms 2 x 16: 16,416. Gated DeltaNet: inner 4 x 8 = 32, convolved channels 32 + 2 x 2
    # x 8 = 64; in_proj_qkvz and in_proj_ba 64 x (64 + 32 + 2 x 4) = 6,656, conv 64 x 4 = 256 (no bias), A and dt
    # bias 2 x 4, the gated norm over a head 8, out_proj 32 x 64 = 2,048: 8,976, three layers 26,928. SwiGLU MLPs
    # 4 x 3 x 64 x 48 = 36,864. Norms 4 x 2 x 64 + 64 = 576. Total 208,784.
    assert imported.parameters_by_part["state"] == 26_928 and imported.parameters_by_part["attention"] == 16_416
    assert imported.model.parameters == 208_784
    m = imported.model
    assert (m.attention_layers, m.state_layers, m.state_kind, m.state_precision) == (1, 3, "gated_deltanet", "bf16")
    # Three layers of 4 x 8 x 8 state elements at 16 bits (512 B) and 3 x 64 convolution elements (384 B).
    assert state_bytes_per_sequence(m).m_as("B") == 3 * (512 + 384)
    # Without layer_types, every full_attention_interval-th layer attends.
    file.write_text(
        json.dumps({k: v for k, v in config.items() if k != "layer_types"} | {"full_attention_interval": 2})
    )
    assert import_model_config(file, model_id="tiny-gdn").model.attention_layers == 2


def test_qwen35s_text_model_imports_with_its_gated_deltanet_shapes(tmp_path):
    # The text_config of Qwen/Qwen3.5-27B as a text-only config (the file itself declares a vision encoder).
    text = json.loads((DATA / "Qwen--Qwen3.5-27B_config.json").read_text())["text_config"]
    file = tmp_path / "config.json"
    file.write_text(json.dumps(text | {"tie_word_embeddings": False}))
    imported = import_model_config(file, model_id="qwen35-text").model
    expected = _gated_deltanet_model()
    for field in Model._STATE_FIELDS:
        assert getattr(imported, field) == getattr(expected, field), field


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hybrid_override_pattern": "M*-X"}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "M*-"}, "hybrid_override_pattern"),
        ({"mamba_ssm_cache_dtype": "int8"}, "mamba_ssm_cache_dtype"),
        ({"mamba_num_heads": 0}, "mamba_num_heads"),
    ],
)
def test_a_malformed_hybrid_config_names_the_field(tmp_path, changes, field):
    with pytest.raises(InputError, match=f"field '{field}'"):
        import_model_config(_tiny_nemotron_h(tmp_path, **changes), model_id="tiny-hybrid")


def test_the_published_nemotron_configs_import_with_their_layer_kinds():
    nano = import_model_config(DATA / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16_config.json", model_id="n3")
    # hybrid_override_pattern "MEMEM*EMEMEM*..." of 52 blocks: 23 M, 6 *, 23 E.
    assert (nano.model.layers, nano.model.attention_layers, nano.model.state_layers) == (52, 6, 23)
    registered = REGISTRY.model("nemotron-3-nano-30b-a3b")
    assert nano.model.parameters == pytest.approx(registered.parameters, rel=1e-3)
    assert nano.model.active_parameters == pytest.approx(registered.active_parameters, rel=1e-3)
    # Ultra gives layers_block_type (108 names) and no num_hidden_layers: 48 mamba, 12 attention, 48 moe.
    ultra = import_model_config(DATA / "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16_config.json", model_id="n3u")
    assert (ultra.model.layers, ultra.model.attention_layers, ultra.model.state_layers) == (108, 12, 48)
    assert ultra.parameters_by_part["latent"] == 48 * 2 * 8192 * 2048  # into and out of the experts' 2,048-wide latent
    # Nemotron-H 56B: 54 M, 10 *, 54 - (attention_head_dim gives the head width).
    old = import_model_config(DATA / "nvidia--Nemotron-H-56B-Base-8K_config.json", model_id="nh")
    assert (old.model.attention_layers, old.model.state_layers, old.model.head_dim) == (10, 54, 128)


# ------------------------------------------------------------------------------------ the registry's entries


def _close(value: float, card: float, step: float) -> bool:
    """Within 1 % of the card's figure, or within the rounding of a figure quoted to ``step``."""
    return abs(value - card) <= max(0.01 * card, step / 2)


#: id, total and active as the cards print them (with the step they are rounded to), and the vocabulary-by-hidden
#: matrices the card's active count leaves out (the entries count the input embedding).
CARDS = [
    # NeMo's Nemotron-H page: "models of 8B, 47B, and 56B parameters" (dense: all active).
    ("nemotron-h-56b", (56e9, 1e9), (56e9, 1e9), 0),
    # Nemotron 3 Nano: "31.6B-total / 3.2B-active" (3.6B with the embeddings).
    ("nemotron-3-nano-30b-a3b", (31.6e9, 0.1e9), (3.2e9, 0.1e9), 1),
    # Nemotron 3 Super's card: "Total Parameters 120B (12B active)".
    ("nemotron-3-super-120b-a12b", (120e9, 1e9), (12e9, 1e9), 1),
    # Megatron Bridge: "a 550B total / A55B active hybrid Mamba-Transformer MoE model".
    ("nemotron-3-ultra-550b-a55b", (550e9, 1e9), (55e9, 1e9), 1),
]


@pytest.mark.parametrize(("model_id", "total", "active", "embeddings_left_out"), CARDS)
def test_the_hybrids_parameter_counts_match_their_cards(model_id, total, active, embeddings_left_out):
    m = REGISTRY.models[model_id]
    assert m.vocab_size is not None and m.hidden_size is not None and m.active_parameters is not None
    assert _close(m.parameters, *total)
    assert _close(m.active_parameters - embeddings_left_out * m.vocab_size * m.hidden_size, *active)


#: The registry's hybrids whose published config.json is among the test files.
CONFIGS = {
    "nemotron-h-56b": "nvidia--Nemotron-H-56B-Base-8K",
    "nemotron-3-nano-30b-a3b": "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nemotron-3-ultra-550b-a55b": "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
}


@pytest.mark.parametrize(("model_id", "name"), CONFIGS.items())
def test_each_hybrid_entry_matches_its_published_config(model_id, name):
    imported = import_model_config(DATA / f"{name}_config.json", model_id="check").model
    entry = REGISTRY.model(model_id)
    for field in (*Model._STATE_FIELDS, "layers", "kv_heads", "head_dim", "experts", "experts_per_token"):
        assert getattr(imported, field) == getattr(entry, field), field
    assert imported.parameters == pytest.approx(entry.parameters, rel=1e-3)


def test_a_hybrid_entry_gives_all_its_state_fields_or_none():
    with pytest.raises(ValueError, match="every state field"):
        Model(id="h", name="h", provenance="user", sources=[{"source": "u", "fields": ["layers"]}], parameters=1e9,
              layers=8, attention_heads=8, kv_heads=8, head_dim=64, attention="mha", attention_layers=2)  # fmt: skip
    with pytest.raises(ValueError, match="cannot exceed layers"):
        Model(**{**_gated_deltanet_model().model_dump(), "id": "x", "attention_layers": 40})
