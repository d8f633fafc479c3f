"""The packaged registry's models: every one fits, sizes and launches (issue 54, item 2).

The models imported from published config files (those bundled in aiconfigurator-core, hardware_registry.yaml's
source ``aiconfigurator-model-configs``, and copies in public repositories) are checked against the figures their
model cards publish; every
packaged transformer runs through the memory fit, a small fleet sizing, and the launch command of its plan.
"""

from __future__ import annotations

import warnings

import pytest

from calculator import Q_, SearchSpace, Targets, Workload, load_registry, size_fleet
from calculator.deploy import launch_command
from calculator.memory import model_memory_fit
from calculator.registry import Model

REGISTRY = load_registry()
TRANSFORMERS = [m for m in REGISTRY.models.values() if m.kind == "transformer"]
#: The models present before the bundle's configs were imported (issue 54: "the registry holds 27 models").
BEFORE = 27
#: The entries added from published config files (docs/registry.md, "Packaged models").
IMPORTED = (
    *("qwen3-coder-480b-a35b", "mixtral-8x22b", "kimi-k2", "deepseek-v3.1"),  # from the aiconfigurator bundle
    *("qwen2.5-32b", "qwen2.5-7b", "phi-4", "phi-3-mini-4k", "gemma-2-2b"),  # from copies in public repositories
)


def test_the_registry_holds_the_imported_models_beside_the_earlier_ones():
    assert set(IMPORTED) <= set(REGISTRY.models)
    assert len(REGISTRY.models) >= BEFORE + len(IMPORTED)


def test_no_repository_names_two_models():
    # A repository that is an alias of two entries would make the name ambiguous.
    owners: dict[str, str] = {}
    for model in REGISTRY.models.values():
        for alias in model.aliases:
            assert owners.setdefault(alias.lower(), model.id) == model.id, alias


def _kv_bytes_per_token_16bit(m: Model) -> int:
    """KV bytes per token at 16 bits, by hand: MLA caches the latent and the rotary key, else K and V per head.

    A hybrid caches them on its attention layers only (its state layers keep a fixed state instead).
    """
    assert m.layers is not None and m.kv_heads is not None and m.head_dim is not None
    layers = m.attention_layers or m.layers
    if m.attention == "mla":
        assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
        return layers * (m.kv_lora_rank + m.qk_rope_head_dim) * 2
    return 2 * layers * m.kv_heads * m.head_dim * 2


@pytest.mark.parametrize("model", TRANSFORMERS, ids=lambda m: m.id)
def test_every_packaged_model_fits_at_a_small_context(model: Model):
    fit = model_memory_fit(model.id, "h200-sxm", 2048, 1, "bf16", "bf16")
    # One device holds all the weights at 2 bytes each, a vision encoder's too (Model.vision_parameters).
    assert fit.weights.to("B").magnitude == pytest.approx((model.parameters + (model.vision_parameters or 0)) * 2)
    if model.sliding_window is None and model.index_topk is None:  # a window caps, an indexer adds to the cache
        assert fit.kv_per_token.to("B/token").magnitude == pytest.approx(_kv_bytes_per_token_16bit(model))
    # It fits exactly when the weights and one sequence's cache fit in the capacity.
    assert bool(fit.fits) == (fit.weights + fit.kv <= fit.capacity)


def _precision(model: Model) -> str:
    """bf16, or the precision of the published weights where the repository itself is quantized."""
    return next((c.precision for c in model.checkpoints if c.repo in model.aliases), "bf16")


@pytest.mark.parametrize("model", TRANSFORMERS, ids=lambda m: m.id)
def test_every_packaged_model_sizes_and_its_plan_launches(model: Model):
    workload, targets = Workload(Q_(2, "request/s"), 1024, 128), Targets(Q_(5, "s"), Q_(200, "ms"))
    with warnings.catch_warnings():  # a trillion-parameter model is outside the validated range: a warning
        warnings.simplefilter("ignore")
        plan = size_fleet(model.id, workload, targets, SearchSpace("b200-sxm", _precision(model)), engine="vllm")
        assert plan.feasible or plan.reason
        if not plan.feasible or not any("/" in alias for alias in model.aliases):
            return  # GPT-3 and the chapter's models have no published repository to serve
        launch = launch_command(plan, "vllm")
    # What is served is the model's repository or one of its checkpoints, never a name of its own.
    assert launch.weights.repo in {*model.aliases, *(c.repo for c in model.checkpoints)}
    assert launch.weights.repo in launch.command


def _close(value: float, card: float, step: float) -> bool:
    """Within 1 % of the card's figure, or within the rounding of a figure quoted to ``step``."""
    return abs(value - card) <= max(0.01 * card, step / 2)


#: id, total and active parameters as the cards print them, each with the step it is rounded to, and how many
#: vocabulary-by-hidden matrices the card's active count leaves out (the entries count the input embedding,
#: docs/registry.md: 1 where a card leaves it out, 2 for a "non-embedding" count that drops the LM head too).
CARDS = [
    # Mistral AI's announcement of Mixtral 8x22B: "39B active parameters out of a total of 141B".
    ("mixtral-8x22b", (141e9, 1e9), (39e9, 1e9), 0),
    # Qwen3-Coder-480B-A35B-Instruct (NVIDIA's NIM card quoting Qwen's): "480B total parameters and 35B activated".
    ("qwen3-coder-480b-a35b", (480e9, 1e9), (35e9, 1e9), 0),
    # Kimi-K2-Instruct: the Hugging Face page counts 1026.5B parameters in the checkpoint; the card's model
    # summary "Activated Parameters 32B" (31.69e9 without the embedding, 0.97 % from 32e9).
    ("kimi-k2", (1026.5e9, 0.1e9), (32e9, 1e9), 1),
    # DeepSeek-V3.1 (deepseek-ai's card, its table of models): "#Total Params 671B, #Activated Params 37B".
    ("deepseek-v3.1", (671e9, 1e9), (37e9, 1e9), 1),
    # Qwen2.5-7B (Qwen's card, quoted in a parameter walk-through): 7.61B parameters, 6.53B non-embedding.
    ("qwen2.5-7b", (7.61e9, 0.01e9), (6.53e9, 0.01e9), 2),
]


@pytest.mark.parametrize(("model_id", "total", "active", "embeddings_left_out"), CARDS)
def test_imported_parameter_counts_match_the_cards(model_id, total, active, embeddings_left_out):
    m = REGISTRY.models[model_id]
    assert m.vocab_size is not None and m.hidden_size is not None and m.active_parameters is not None
    assert _close(m.parameters, *total)
    counted = m.active_parameters - embeddings_left_out * m.vocab_size * m.hidden_size
    assert _close(counted, *active)
