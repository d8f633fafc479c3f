"""Issue 54, the qwen35 helper: Qwen3.5 and Qwen3.6's multimodal checkpoints imported and packaged.

Their configs (``Qwen3_5ForConditionalGeneration``, ``Qwen3_5MoeForConditionalGeneration``) hold a Gated DeltaNet
hybrid as ``text_config`` and Qwen3-VL's vision encoder without deepstack mergers as ``vision_config``. The hand
counts are written beside each assertion; the cards' figures include the vision encoder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculator import load_registry
from calculator.errors import InputError
from calculator.memory import model_kv_bytes_per_token, state_bytes_per_sequence
from calculator.model_import import import_model_config

DATA = Path(__file__).parent / "data" / "model_configs"
REGISTRY = load_registry()
NEW = ("qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b", "qwen3.6-27b", "qwen3.6-35b-a3b")

# The Qwen3.5 vision encoder (vision_config: depth 27, hidden 1152, intermediate 4304, patch 16, temporal patch 2,
# 3 channels, 2304 positions, spatial merge 2), by vLLM's Qwen3_VisionTransformer (qwen3_vl.py):
#   patch embedding, a Conv3d with bias: 3 x 2 x 16 x 16 x 1152 + 1152                    =   1,770,624
#   learned positions: 2304 x 1152                                                           =   2,654,208
#   27 blocks: two LayerNorms (4 x 1152), qkv (3 x 1152^2 + 3 x 1152), proj (1152^2 + 1152),
#   fc1 (1152 x 4304 + 4304), fc2 (4304 x 1152 + 1152): 27 x 15,239,504                      = 411,466,608
#   the merger: a LayerNorm over 1152 (2,304), fc1 4608 x 4608 + 4608, fc2 4608 x out + out (4608 = 4 x 1152)
VISION_BODY = 1_770_624 + 2_654_208 + 411_466_608 + 2 * 1152 + 4608 * 4608 + 4608


def _vision(out: int) -> int:
    """The Qwen3.5 encoder's parameters for a text model ``out`` wide (the merger's last layer)."""
    return VISION_BODY + 4608 * out + out


def test_the_qwen35_vision_encoder_is_counted_by_hand():
    assert _vision(5120) == 460_730_096  # 27B: 1,770,624 + 2,654,208 + 411,466,608 + 44,838,656
    for name, out in (("Qwen--Qwen3.5-27B", 5120), ("Qwen--Qwen3.5-35B-A3B", 2048), ("Qwen--Qwen3.5-397B-A17B", 4096)):
        imported = import_model_config(DATA / f"{name}_config.json", model_id="q")
        assert imported.model.vision_parameters == _vision(out), name
        assert any("0 deepstack mergers" in note for note in imported.notes)


def test_the_multimodal_config_imports_its_text_model_with_vllms_state_precision(tmp_path):
    imported = import_model_config(DATA / "Qwen--Qwen3.5-27B_config.json", model_id="q").model
    # text_config.layer_types: every 4th layer attends (16), the other 48 run Gated DeltaNet.
    assert (imported.attention_layers, imported.state_layers, imported.state_kind) == (16, 48, "gated_deltanet")
    assert imported.mtp_layers == 1  # mtp_num_hidden_layers
    # vLLM 0.18 keeps the multimodal class's recurrent state at text_config.mamba_ssm_dtype, float32:
    # 48 layers x (48 value heads x 128 x 128 x 4 B + 3 x (2 x 16 x 128 + 48 x 128 = 10,240) x 2 B).
    assert imported.state_precision == "fp32"
    assert state_bytes_per_sequence(imported).m_as("B") == 48 * (48 * 128 * 128 * 4 + 3 * 10_240 * 2) == 153_944_064
    # The text_config alone, a Qwen3_5ForCausalLM to vLLM, keeps it at the model's dtype (half of it).
    text = json.loads((DATA / "Qwen--Qwen3.5-27B_config.json").read_text())["text_config"]
    alone = tmp_path / "config.json"
    alone.write_text(json.dumps(text | {"tie_word_embeddings": False}))
    assert import_model_config(alone, model_id="t").model.state_precision == "bf16"
    # The packaged entry holds the same state; its 16 attention layers cache 2 x 4 KV heads x 256 x 2 B a token.
    assert state_bytes_per_sequence("qwen3.5-27b").m_as("B") == 153_944_064
    assert model_kv_bytes_per_token("qwen3.5-27b", "bf16").m_as("B/token") == 16 * 2 * 4 * 256 * 2


def _tiny(tmp_path: Path, **text_changes) -> Path:
    """A small Qwen3.5-MoE multimodal config: 4 layers (3 Gated DeltaNet, 1 attention) and a one-block encoder."""
    text = {"model_type": "qwen3_5_moe_text", "hidden_size": 16, "num_hidden_layers": 4, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 8192, "max_position_embeddings": 64,
            "full_attention_interval": 4, "linear_num_value_heads": 2, "linear_value_head_dim": 4,
            "linear_num_key_heads": 1, "linear_key_head_dim": 4, "linear_conv_kernel_dim": 4,
            "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
            "shared_expert_intermediate_size": 8, "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 1}  # fmt: skip
    vision = {"depth": 1, "hidden_size": 8, "intermediate_size": 12, "in_channels": 3, "patch_size": 2,
              "temporal_patch_size": 2, "num_position_embeddings": 16384, "spatial_merge_size": 2, "out_hidden_size": 16,
              "deepstack_visual_indexes": []}  # fmt: skip
    config = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "tie_word_embeddings": False,
              "text_config": {k: v for k, v in (text | text_changes).items() if v is not None},
              "vision_config": vision}  # fmt: skip
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config))
    return file


def test_a_small_multimodal_config_imports_with_its_encoder_and_state(tmp_path):
    imported = import_model_config(_tiny(tmp_path), model_id="tiny-q35")
    m = imported.model
    # Encoder: patch 3 x 2 x 2 x 2 x 8 + 8 = 200; positions 16,384 x 8 = 131,072 (enough for the registry's
    # plausible range); one block 4 x 64 + 2 x 8 x 12 + 9 x 8 + 12 = 532; merger (merged width 4 x 8 = 32):
    # LayerNorm 16 + 32 x 32 + 32 + 32 x 16 + 16 = 1,600.
    assert m.vision_parameters == 200 + 131_072 + 532 + 1_600
    assert (m.attention_layers, m.state_layers, m.experts, m.shared_experts) == (1, 3, 4, 1)
    # 3 state layers x (2 heads x 4 x 4 at 4 B + 3 positions x (2 x 4 + 2 x 1 x 4 = 16 channels) x 2 B) = 672 B.
    assert state_bytes_per_sequence(m).m_as("B") == 3 * (2 * 4 * 4 * 4 + 3 * 16 * 2) == 672
    assert any("mtp_num_hidden_layers 1" in note for note in imported.notes)
    # Without mamba_ssm_dtype the state is kept at the model's dtype: 3 x (32 x 2 + 96) = 480 B.
    plain = import_model_config(_tiny(tmp_path, mamba_ssm_dtype=None), model_id="tiny-q35")
    assert state_bytes_per_sequence(plain.model).m_as("B") == 3 * (2 * 4 * 4 * 2 + 3 * 16 * 2) == 480


def test_a_malformed_state_precision_names_the_field(tmp_path):
    with pytest.raises(InputError, match=r"field 'mamba_ssm_dtype': expected one of \['bfloat16', 'float16'"):
        import_model_config(_tiny(tmp_path, mamba_ssm_dtype="int8"), model_id="tiny-q35")


def test_the_nvfp4_checkpoint_imports_with_its_fp8_kv(tmp_path):
    imported = import_model_config(
        DATA / "nvidia--Qwen3.5-122B-A10B-NVFP4_config.json",
        model_id="q122",
        repo="nvidia/Qwen3.5-122B-A10B-NVFP4",
        quant=DATA / "nvidia--Qwen3.5-122B-A10B-NVFP4_hf_quant_config.json",
    ).model
    packaged = REGISTRY.model("qwen3.5-122b-a10b")
    assert imported.parameters == packaged.parameters and imported.vision_parameters == packaged.vision_parameters
    checkpoint = packaged.checkpoint("fp4")
    # hf_quant_config.json: quant_algo NVFP4, kv_cache_quant_algo FP8.
    assert (checkpoint.format, checkpoint.kv_cache) == ("modelopt", "fp8")
    assert (imported.checkpoint("fp4").format, imported.checkpoint("fp4").kv_cache) == ("modelopt", "fp8")


def test_a_mixed_precision_checkpoint_is_refused_naming_quant_algo(tmp_path):
    # nvidia's Qwen3.6 NVFP4 checkpoints declare quant_algo MIXED_PRECISION (FP8 and W4A16_NVFP4 layers).
    quant = tmp_path / "hf_quant_config.json"
    quant.write_text(json.dumps({"quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8"}}))
    with pytest.raises(InputError, match=r"field 'quant_algo'.*MIXED_PRECISION"):
        import_model_config(_tiny(tmp_path), model_id="tiny-q35", quant=quant)


@pytest.mark.parametrize("name", ["Qwen--Qwen3.5-27B", "Qwen--Qwen3.5-35B-A3B", "Qwen--Qwen3.5-397B-A17B"])
def test_the_published_configs_import_to_the_packaged_entries(name):
    model = import_model_config(DATA / f"{name}_config.json", model_id="q").model
    packaged = REGISTRY.model(name.split("--")[1])
    for field in ("parameters", "active_parameters", "vision_parameters", *packaged._STATE_FIELDS):
        assert getattr(model, field) == getattr(packaged, field), field


def _close(value: float, card: float, step: float) -> bool:
    """Within 1 % of the card's figure, or within the rounding of a figure quoted to ``step``."""
    return abs(value - card) <= max(0.01 * card, step / 2)


#: id, total (with the vision encoder) and active as the cards print them, rounded to 1B (qwen3.5-cards,
#: qwen3.6-cards in the registry). The active figures are the text model's with its input embedding.
CARDS = [
    ("qwen3.5-27b", 27e9, 27e9),
    ("qwen3.5-35b-a3b", 35e9, 3e9),
    ("qwen3.5-122b-a10b", 122e9, 10e9),
    ("qwen3.5-397b-a17b", 397e9, 17e9),
    ("qwen3.6-27b", 27e9, 27e9),
    ("qwen3.6-35b-a3b", 35e9, 3e9),
]


@pytest.mark.parametrize(("model_id", "total", "active"), CARDS)
def test_the_counts_match_the_cards(model_id, total, active):
    m = REGISTRY.model(model_id)
    assert m.vision_parameters is not None and m.active_parameters is not None
    assert _close(m.parameters + m.vision_parameters, total, 1e9)
    assert _close(m.active_parameters + (m.vision_parameters if total == active else 0), active, 1e9)


def test_every_new_model_is_in_the_fit_size_and_emit_matrices():
    from test_emit_matrix import CASES
    from test_packaged_models import TRANSFORMERS

    assert set(NEW) <= {m.id for m in TRANSFORMERS}
    assert {("qwen3.5-122b-a10b", "fp4"), ("qwen3.5-397b-a17b", "fp4")} <= set(CASES)
