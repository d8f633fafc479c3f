"""Issue 54, the models helper: MiniMax-M2, Step-3.7-Flash and MiMo read by the importer, vision encoders counted.

Hand counts are written beside each tiny config; the packaged entries' counts are compared with the figures their
cards publish (within 1 %, or the rounding of a figure quoted to a step, as tests/test_packaged_models.py does).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculator import Q_, load_registry, predict_benchmark
from calculator._hf_config import (
    Counts,
    Shape,
    Vision,
    architecture_of,
    count_parameters,
    read_shape,
    refuse_inexpressible,
    split_vision,
)
from calculator.errors import InputError
from calculator.memory import model_weight_bytes
from calculator.model_import import import_model_config

DATA = Path(__file__).parent / "data" / "model_configs"
REGISTRY = load_registry()


def _write(tmp_path: Path, config: dict) -> Path:
    file = tmp_path / "config.json"
    file.write_text(json.dumps(config))
    return file


def _counted(config: dict) -> tuple[Shape, Counts, Vision | None]:
    """The importer's reading of a config too small for a registry entry (the plausible ranges refuse it)."""
    refuse_inexpressible(config, "config")
    text, vision = split_vision(config, "config")
    shape = read_shape(text, architecture_of(text, "config")[1], "config")
    return shape, count_parameters(shape), vision


ATTENTION = {"hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 10}
# One layer's attention at hidden 8, 2 heads and 1 KV head of 4: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192.


def test_a_tiny_minimax_m2_counts_by_hand():
    config = {"architectures": ["MiniMaxM2ForCausalLM"], **ATTENTION, "num_hidden_layers": 2, "intermediate_size": 6,
              "num_local_experts": 4, "num_experts_per_tok": 2, "use_routing_bias": True, "use_qk_norm": True,
              "shared_intermediate_size": 0, "tie_word_embeddings": False, "max_position_embeddings": 64}  # fmt: skip
    shape, counts, _ = _counted(config)
    # embeddings 2 x 10 x 8 = 160; attention 2 x (192 + q and k norms across heads (2 + 1) x 4 = 12) = 408;
    # experts 2 layers x 4 x 3 x 8 x 6 = 1152; routers 2 x (8 x 4 + 4 biases) = 72; norms 2 x 2 x 8 + 8 = 40.
    assert counts.total == 160 + 408 + 1152 + 72 + 40
    # A token skips 2 of 4 experts of 144 in each of 2 layers: 576.
    assert counts.active == 1832 - 576
    assert (shape.experts, shape.experts_per_token, shape.shared_experts, shape.moe_layers) == (4, 2, 0, 2)


def test_a_tiny_step_flash_counts_by_hand():
    config = {"architectures": ["Step3p7FlashForCausalLM"], **ATTENTION, "num_hidden_layers": 3,
              "intermediate_size": 16, "first_k_dense_replace": 1, "num_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 6, "share_expert_dim": 6, "n_shared_experts": 1, "use_moe_router_bias": True,
              "sliding_window": 16, "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
              "max_position_embeddings": 64, "num_nextn_predict_layers": 3}  # fmt: skip
    shape, counts, _ = _counted(config)
    # embeddings 160; attention 3 x 192 = 576; dense MLP 1 x 3 x 8 x 16 = 384; routed 2 x 4 x 144 = 1152;
    # shared 2 x 144 = 288; routers 2 x (32 + 4) = 72; norms 3 x 2 x 8 + 8 = 56.
    assert counts.total == 160 + 576 + 384 + 1152 + 288 + 72 + 56
    assert counts.active == 2688 - 2 * 2 * 144
    assert (shape.window, shape.window_layers, shape.moe_layers, shape.shared_experts) == (16, 2, 2, 1)


def test_a_step_shared_expert_of_another_width_is_refused():
    config = {"architectures": ["Step3p7FlashForCausalLM"], **ATTENTION, "num_hidden_layers": 2,
              "intermediate_size": 16, "first_k_dense_replace": 1, "num_experts": 4, "num_experts_per_tok": 2,
              "moe_intermediate_size": 6, "share_expert_dim": 12, "n_shared_experts": 1}  # fmt: skip
    with pytest.raises(InputError, match="field 'share_expert_dim'"):
        _counted(config)


def test_a_tiny_mimo_counts_by_hand():
    config = {"architectures": ["MiMoForCausalLM"], **ATTENTION, "num_hidden_layers": 2, "intermediate_size": 12,
              "attention_bias": True, "num_nextn_predict_layers": 1, "tie_word_embeddings": False}  # fmt: skip
    _, counts, _ = _counted(config)
    # Qwen2's layout: embeddings 160; attention 2 x (192 + q, k, v biases 8 + 4 + 4) = 416; MLP 2 x 3 x 8 x 12 = 576;
    # norms 40. The multi-token-prediction layer is not counted.
    assert counts.total == counts.active == 160 + 416 + 576 + 40


QWEN3_VL_VISION = {"depth": 1, "hidden_size": 4, "intermediate_size": 6, "num_heads": 2, "in_channels": 3,
                   "patch_size": 2, "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 9,
                   "out_hidden_size": 8, "deepstack_visual_indexes": [0]}  # fmt: skip
#: One ViT block at width 4 and MLP 6: two LayerNorms 2 x 8, qkv 4 x 12 + 12, proj 4 x 4 + 4, fc1 4 x 6 + 6,
#: fc2 6 x 4 + 4 = 16 + 60 + 20 + 30 + 28 = 154.
BLOCK = 154


def test_a_tiny_qwen3_vl_counts_its_vision_encoder_by_hand():
    text = {"model_type": "qwen3_vl_text", **ATTENTION, "num_hidden_layers": 1, "intermediate_size": 12,
            "max_position_embeddings": 64}  # fmt: skip
    config = {"architectures": ["Qwen3VLForConditionalGeneration"], "tie_word_embeddings": True,
              "text_config": text, "vision_config": QWEN3_VL_VISION}  # fmt: skip
    shape, counts, vision = _counted(config)
    # Text (Qwen3, tied as the wrapper says): embedding 80, attention 192 + q and k norms 2 x 4, MLP 3 x 8 x 12 = 288,
    # norms 2 x 8 + 8 = 24.
    assert shape.tied and counts.total == 80 + 200 + 288 + 24
    # Vision: Conv3d 3 x 2 x 2 x 2 x 4 + 4 = 100; positions 9 x 4 = 36; one block 154; merged width 4 x 2 x 2 = 16:
    # merger LayerNorm(4) 8 + 16 x 16 + 16 + 16 x 8 + 8 = 416; one deepstack merger LayerNorm(16) 32 + 272 + 136 = 440.
    assert vision is not None and vision.parameters == 100 + 36 + BLOCK + 416 + 440


def test_a_tiny_moonvit_counts_by_hand():
    text = {"architectures": ["LlamaForCausalLM"], **ATTENTION, "num_key_value_heads": 2, "num_hidden_layers": 1,
            "intermediate_size": 12}  # fmt: skip
    vision = {"vt_hidden_size": 4, "vt_intermediate_size": 6, "vt_num_hidden_layers": 1, "patch_size": 2,
              "init_pos_emb_height": 3, "init_pos_emb_width": 3, "merge_kernel_size": [2, 2], "mm_hidden_size": 4,
              "text_hidden_size": 8, "mm_projector_type": "patchmerger"}  # fmt: skip
    config = {"architectures": ["KimiK25ForConditionalGeneration"], "text_config": text, "vision_config": vision}
    _, counts, vision = _counted(config)
    # Conv2d 3 x 2 x 2 x 4 + 4 = 52; position grid 3 x 3 x 4 = 36; one block 154 and the final LayerNorm 8;
    # projector: LayerNorm(4) 8, 16 x 16 + 16, 16 x 8 + 8 = 416.
    assert vision is not None and vision.parameters == 52 + 36 + BLOCK + 8 + 416
    # The language model (Llama, 2 KV heads of 4): embeddings 160, attention 4 x 64, MLP 288, norms 24.
    assert counts.total == 160 + 256 + 288 + 24


def test_a_vision_layout_the_import_does_not_count_is_refused_naming_it(tmp_path):
    config = {"architectures": ["SomethingForConditionalGeneration"], "text_config": {**ATTENTION},
              "vision_config": {"hidden_size": 1280, "num_hidden_layers": 32}}  # fmt: skip
    with pytest.raises(InputError, match=r"field 'vision_config'.*layout the import does not count"):
        import_model_config(_write(tmp_path, config), model_id="x-vl")


@pytest.mark.parametrize(
    ("name", "has_vision"),
    [("MiniMaxAI--MiniMax-M2.5", False), ("stepfun-ai--Step-3.7-Flash", False), ("XiaomiMiMo--MiMo-7B-Base", False),
     ("Qwen--Qwen3-VL-8B-Instruct", True), ("moonshotai--Kimi-K2.5", True)],
)  # fmt: skip
def test_the_published_configs_import_to_the_packaged_entries(name, has_vision):
    imported = import_model_config(DATA / f"{name}_config.json", model_id=f"x-{name.split('--')[1].lower()}")
    model, packaged = imported.model, REGISTRY.models[REGISTRY.models.resolve(name.replace("--", "/"))]
    assert (model.parameters, model.active_parameters) == (packaged.parameters, packaged.active_parameters)
    assert (model.layers, model.kv_heads, model.head_dim) == (packaged.layers, packaged.kv_heads, packaged.head_dim)
    assert (model.vision_parameters is not None) == has_vision == any("not priced" in n for n in imported.notes)
    if has_vision:
        assert model.vision_parameters == packaged.vision_parameters


def _close(value: float, card: float, step: float) -> bool:
    return abs(value - card) <= max(0.01 * card, step / 2)


@pytest.mark.parametrize(
    ("model_id", "total", "active", "left_out"),
    [
        # MiniMax-M2.5 (a summary of MiniMax's report): "229.9B total parameters, 9.8B activated per token"; 9.8B
        # is a non-embedding count (both vocabulary matrices left out: 11.03e9 - 2 x 200064 x 3072 = 9.80e9).
        ("minimax-m2.5", (229.9e9, 0.1e9), (9.8e9, 0.1e9), 2),
        # Step-3.7-Flash (vLLM recipes): "a 196B language backbone", "activates ~11B parameters per token".
        ("step-3.7-flash", (196e9, 1e9), (11e9, 1e9), 0),
        # Kimi-K2.6 (the card of a quantization of it): "~1T" total, "~32B" active.
        ("kimi-k2.6", (1e12, 0.1e12), (32e9, 1e9), 1),
        # Qwen2.5-14B-Instruct's card: "14.7B", "13.1B" non-embedding; Qwen2.5-3B's (tied): "3.09B", "2.77B".
        ("qwen2.5-14b", (14.7e9, 0.1e9), (13.1e9, 0.1e9), 2),
        ("qwen2.5-3b", (3.09e9, 0.01e9), (2.77e9, 0.01e9), 1),
        # Qwen3-Coder-30B-A3B-Instruct's card: "30.5B in total and 3.3B activated". The count's 3.353e9 active
        # (3.042e9 without the input embedding) is not within the rounding of "3.3B" either way, as for
        # Qwen3-30B-A3B, whose entry quotes the card: only the total is compared.
        ("qwen3-coder-30b-a3b", (30.5e9, 0.1e9), None, 0),
        # Phi-3-medium's card: "a 14B parameters ... model" (dense).
        ("phi-3-medium-4k", (14e9, 1e9), (14e9, 1e9), 0),
    ],
)
def test_the_new_architectures_match_their_cards(model_id, total, active, left_out):
    m = REGISTRY.models[model_id]
    assert m.vocab_size is not None and m.hidden_size is not None and m.active_parameters is not None
    assert _close(m.parameters, *total)
    if active is not None:
        assert _close(m.active_parameters - left_out * m.vocab_size * m.hidden_size, *active)


def test_qwen3_vl_8b_with_its_encoder_is_the_published_size():
    # Qwen3-VL-8B-Instruct: "8.8B parameters" (a provider's listing of the Hugging Face repository), the language
    # model and the vision encoder together.
    m = REGISTRY.models["qwen3-vl-8b"]
    assert m.vision_parameters is not None
    assert _close(m.parameters + m.vision_parameters, 8.8e9, 0.1e9)
    assert not _close(m.parameters, 8.8e9, 0.1e9)  # the language model alone is not


def test_vision_weights_stay_at_16_bits_beside_quantized_language_weights():
    m = REGISTRY.models["kimi-k2.6"]
    assert m.vision_parameters is not None
    # 4-bit language weights at half a byte each, the encoder at 2 bytes; split over 8 devices.
    expected = (m.parameters * 0.5 + m.vision_parameters * 2) / 8
    assert model_weight_bytes("kimi-k2.6", "fp4", 8).to("B").magnitude == pytest.approx(expected)


def test_a_prediction_for_a_vision_model_says_the_images_are_not_priced():
    common = dict(accelerator="h100-sxm", precision="bf16", tensor_parallel=1, input_tokens=1024, output_tokens=128,
                  concurrency=4)  # fmt: skip
    vision = predict_benchmark("qwen3-vl-8b", engine="vllm", **common)
    text = predict_benchmark("qwen3-8b", engine="vllm", **common)
    assert any("not priced" in caveat for caveat in vision.caveats())
    assert not any("not priced" in caveat for caveat in text.caveats())
    # The encoder's weights are read with the rest: the vision model's step is no faster than the text model's.
    assert vision.decode_step_time >= text.decode_step_time * (1 - 1e-9)
    assert Q_(0, "s") < vision.ttft


def test_attention_ranks_share_the_routed_experts_but_not_the_vision_encoder():
    from calculator.memory import device_share

    m = REGISTRY.models["qwen3-vl-30b-a3b"]
    assert m.vision_parameters is not None and m.active_parameters is not None
    # The routed experts: experts x (total - active) / (experts - top), spread over both ranks; the rest (the
    # language model's other weights at 2 bytes, the encoder at 2 bytes) is held whole on each rank's device.
    routed = m.experts * (m.parameters - m.active_parameters) / (m.experts - m.experts_per_token)
    expected = (m.parameters - routed) * 2 + routed * 2 / 2 + m.vision_parameters * 2
    share = device_share("qwen3-vl-30b-a3b", 1, "bf16", "bf16", data_parallel=2)
    assert share.weights.to("B").magnitude == pytest.approx(expected)
