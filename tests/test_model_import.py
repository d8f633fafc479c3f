"""``servecalc registry import``: a Hugging Face config.json as a user-registry model (calculator.model_import).

The config files are published ones (tests/data/model_configs/README.md names each file's origin). Every
expected number below is worked out apart from the importer: a model card's or paper's published count, the
registry's own notes, or the hand computation in the comment beside it. KV bytes per token are at 16 bits:
``2 (K and V) x layers x KV heads x head_dim x 2 B``, or for MLA ``layers x (kv_lora_rank + qk_rope_head_dim) x 2 B``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from calculator import load_registry
from calculator.cli import app
from calculator.errors import InputError
from calculator.memory import model_kv_bytes_per_token
from calculator.model_import import import_model_config

DATA = Path(__file__).parent / "data" / "model_configs"
runner = CliRunner()


def config(name: str) -> Path:
    return DATA / f"{name}_config.json"


#: file, repository, layers, KV bytes per token (16-bit), parameters, active parameters, sliding window and
#: its layers, and where fit and predict run it (accelerator, tensor-parallel degree, precision).
CASES = [
    # Llama 3.1 8B: 8,030,261,248 (the registry's llama-3.1-8b note); KV 2 x 32 x 8 x 128 x 2 = 131,072.
    ("meta-llama--Meta-Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B", 32, 131_072, 8_030_261_248, 8_030_261_248,
     None, ("h100-sxm", 1, "bf16")),
    # Llama 3.1 70B: 70,553,706,496 (registry note; 141.2 GB at 16 bits, the chapter's figure); KV 2 x 80 x 8 x 128 x 2.
    ("meta-llama--Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B", 80, 327_680, 70_553_706_496, 70_553_706_496,
     None, ("h100-sxm", 4, "bf16")),
    # Llama 2 7B (MHA): 6,738,415,616 (the registry's llama-2-7b note); KV 2 x 32 x 32 x 128 x 2 = 524,288.
    ("meta-llama--Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-chat-hf", 32, 524_288, 6_738_415_616, 6_738_415_616,
     None, ("h100-sxm", 1, "bf16")),
    # Mistral 7B v0.1: embeddings 2 x 32,000 x 4,096 = 262,144,000; per layer attention 4096 x (4096 + 2 x 1024) +
    # 4096 x 4096 = 41,943,040, MLP 3 x 4096 x 14336 = 176,160,768, norms 8,192; x 32 = 6,979,584,000; + final norm
    # 4,096 = 7,241,732,096. Every layer attends through the 4,096-token window. KV 2 x 32 x 8 x 128 x 2.
    ("mistralai--Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.1", 32, 131_072, 7_241_732_096, 7_241_732_096,
     (4096, 32), ("h100-sxm", 1, "bf16")),
    # Mixtral 8x7B: 46,702,792,704 total, 12,879,925,248 active (registry note; Mistral AI: 46.7B / 12.9B).
    ("mistralai--Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", 32, 131_072, 46_702_792_704, 12_879_925_248,
     None, ("h100-sxm", 2, "bf16")),
    # Qwen2.5 7B (q, k, v biases): card 7.61B total, 6.53B without embeddings. By hand: embeddings 2 x 152,064 x
    # 3,584 = 1,089,994,752; per layer q 3584 x 3584 + 3584, k and v 3584 x 512 + 512 each, o 3584 x 3584, MLP
    # 3 x 3584 x 18944, norms 2 x 3584 = 233,054,720; x 28 + 3,584 = 6,525,621,760; total 7,615,616,512.
    ("Qwen--Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", 28, 57_344, 7_615_616_512, 7_615_616_512,
     None, ("h100-sxm", 1, "bf16")),
    # Qwen3 8B: 8,190,735,360 (registry note; card 8.2B); KV 2 x 36 x 8 x 128 x 2 = 147,456.
    ("Qwen--Qwen3-8B", "Qwen/Qwen3-8B", 36, 147_456, 8_190_735_360, 8_190_735_360, None, ("h100-sxm", 1, "bf16")),
    # Qwen3 235B-A22B: 235,093,634,560 / 22,190,763,520 (registry note; card 235B / 22B); KV 2 x 94 x 4 x 128 x 2.
    ("Qwen--Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B", 94, 192_512, 235_093_634_560, 22_190_763_520,
     None, ("h200-sxm", 8, "fp8")),
    # DeepSeek-V3: paper 671B total / 37B activated. By hand (MLA attention per layer 7168 x 1536 + 1536 + 1536 x
    # 128 x 192 + 7168 x 576 + 512 + 512 x 128 x 256 + 128 x 128 x 7168 = 187,107,328; 3 dense layers of 3 x 7168
    # x 18432; 58 MoE layers of 256 routed + 1 shared experts of 3 x 7168 x 2048, a router of 7168 x 256 + 256
    # score biases): 671,026,419,200, and active = total - 58 x 248 x 44,040,192 = 37,552,297,472 (the input
    # embedding, 926,679,040, included). KV (MLA) 61 x (512 + 64) x 2 = 70,272.
    ("deepseek-ai--DeepSeek-V3", "deepseek-ai/DeepSeek-V3", 61, 70_272, 671_026_419_200, 37_552_297_472,
     None, ("h200-sxm", 8, "fp8")),
    # DeepSeek-V2-Lite (no query compression, 2 shared experts, layer 0 dense): 15,706,484,224, the count of the
    # published safetensors' tensors; card 15.7B / 2.4B. Active by hand: total - 26 x 58 x 3 x 2048 x 1408 =
    # 2,661,150,208 (2,451,435,008 without the 209,715,200 input embedding, the card's 2.4B). KV 27 x 576 x 2.
    ("deepseek-ai--DeepSeek-V2-Lite-Chat", "deepseek-ai/DeepSeek-V2-Lite-Chat", 27, 31_104, 15_706_484_224,
     2_661_150_208, None, ("h100-sxm", 1, "bf16")),
    # Kimi K2 (DeepseekV3 architecture, 384 experts, 64 heads, 1 dense layer): card 1T total, 32B activated. By
    # hand as DeepSeek-V3 with these sizes: 1,026,408,232,448 and 32,861,500,928. KV 61 x 576 x 2 = 70,272.
    ("moonshotai--Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct", 61, 70_272, 1_026_408_232_448, 32_861_500_928,
     None, ("b200-sxm", 8, "fp8")),
    # gpt-oss-120b: 116,829,156,672 total and 5,132,849,472 active without the input embedding (the paper's 116.83B
    # / 5.13B, the registry's note); the entry counts the 201,088 x 2,880 = 579,133,440 input embedding in active,
    # as for every other model. Layers alternate 128-token windows and full attention. KV 2 x 36 x 8 x 64 x 2.
    ("openai--gpt-oss-120b", "openai/gpt-oss-120b", 36, 73_728, 116_829_156_672, 5_132_849_472 + 579_133_440,
     (128, 18), ("h100-sxm", 2, "fp8")),
    # Gemma 2 2B (tied embeddings, four norms a layer): the Gemma 2 report's Table 2 gives 2,024,517,888
    # non-embedding parameters; the config's 256,000 x 2,304 = 589,824,000 embedding makes 2,614,341,888. Even
    # layers attend through 4,096 tokens (13 of 26). KV 2 x 26 x 4 x 256 x 2 = 106,496.
    ("google--gemma-2-2b-it", "google/gemma-2-2b-it", 26, 106_496, 2_614_341_888, 2_614_341_888,
     (4096, 13), ("h100-sxm", 1, "bf16")),
    # Gemma 3 1B (one KV head, q and k norms): embedding 262,144 x 1,152 = 301,989,888 (the report's 302M); per
    # layer 1152 x (1024 + 256 + 256) + 1024 x 1152 + 2 x 256 + 3 x 1152 x 6912 + 4 x 1152 = 26,842,112, x 26 +
    # 1,152 = 697,896,064 (the report's 698M); total 999,885,952. Every sixth layer global: 22 of 26 local
    # (512 tokens). KV 2 x 26 x 1 x 256 x 2 = 26,624.
    ("google--gemma-3-1b-it", "google/gemma-3-1b-it", 26, 26_624, 999_885_952, 999_885_952,
     (512, 22), ("l4", 1, "bf16")),
    # Phi-3 mini 4k: card 3.8B; by hand 2 x 32,064 x 3,072 + 32 x (4 x 3072^2 + 3 x 3072 x 8192 + 2 x 3072) + 3,072
    # = 3,821,079,552. Every layer attends through 2,047 tokens. KV 2 x 32 x 32 x 96 x 2 = 393,216.
    ("microsoft--Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", 32, 393_216, 3_821_079_552,
     3_821_079_552, (2047, 32), ("h100-sxm", 1, "bf16")),
]  # fmt: skip
IDS = [case[0] for case in CASES]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Every case imported once: its entry, and the YAML file written."""
    folder = tmp_path_factory.mktemp("imported")
    out = {}
    for name, repo, *_ in CASES:
        file = folder / f"{name}.yaml"
        out[name] = (import_model_config(config(name), repo=repo, model_id=f"imported-{name.lower()}", out=file), file)
    return out


@pytest.mark.parametrize(("name", "repo", "layers", "kv", "total", "active", "window", "run"), CASES, ids=IDS)
def test_the_imported_entry_has_the_published_shapes_and_counts(
    imported, name, repo, layers, kv, total, active, window, run
):
    model = imported[name][0].model
    assert model.layers == layers
    assert model_kv_bytes_per_token(model).m_as("B/token") == kv
    assert model.parameters == total
    assert model.active == active
    assert (model.sliding_window, model.sliding_window_layers) == (window or (None, None))
    assert model.provenance == "user"


@pytest.mark.filterwarnings("ignore::calculator.errors.ExtrapolationWarning")  # Kimi K2's trillion parameters
@pytest.mark.parametrize(("name", "repo", "layers", "kv", "total", "active", "window", "run"), CASES, ids=IDS)
def test_the_written_file_loads_and_fit_and_predict_run_on_it(
    imported, name, repo, layers, kv, total, active, window, run
):
    result, file = imported[name]
    entry = load_registry(extra=[file]).models[result.model.id]
    assert entry.parameters == total and entry.layers == layers
    device, tp, precision = run
    common = [result.model.id, "--extra", str(file), "-a", device, "--tp", str(tp), "-p", precision]
    fit = runner.invoke(app, ["fit", *common, "--context", "4096"])
    assert fit.exit_code == 0, fit.output
    assert f"TP {tp}" in fit.output and re.search(r"^fits +yes +yes$", fit.output, re.MULTILINE)
    predict = runner.invoke(app, ["predict", *common, "--input", "512", "--output", "64", "-c", "2"])
    assert predict.exit_code == 0, predict.output
    assert result.model.id in predict.output


def test_the_published_totals_round_to_the_cards():
    # The cards' rounded figures, against the exact counts: DeepSeek-V3 671B / 37B, Kimi K2 1T / 32B (activated
    # without the input embedding: 32,861,500,928 - 163,840 x 7,168), Qwen2.5-7B 7.61B total / 6.53B without
    # the embedding and the LM head.
    deepseek = import_model_config(config("deepseek-ai--DeepSeek-V3"), model_id="a")
    assert round(deepseek.model.parameters / 1e9) == 671 and int(deepseek.model.active / 1e9) == 37
    # its config's num_nextn_predict_layers 1: the model's own MTP drafter, which Speculation(method="mtp") needs
    assert deepseek.model.mtp_layers == 1
    assert not import_model_config(config("Qwen--Qwen2.5-7B-Instruct"), model_id="d").model.mtp_layers
    kimi = import_model_config(config("moonshotai--Kimi-K2-Instruct"), model_id="b")
    assert round(kimi.model.parameters / 1e12) == 1
    assert round((kimi.model.active - 163_840 * 7_168) / 1e9) == 32
    qwen = import_model_config(config("Qwen--Qwen2.5-7B-Instruct"), model_id="c").parameters_by_part
    body = sum(qwen[part] for part in qwen if part not in ("unused_experts", "embedding", "lm_head"))
    assert round(body / 1e9, 2) == 6.53


def test_the_entry_records_the_attention_kind_experts_and_the_latent_sizes():
    gemma = import_model_config(config("google--gemma-3-1b-it"), model_id="g").model
    assert (gemma.attention, gemma.kv_heads, gemma.head_dim) == ("mqa", 1, 256)
    llama2 = import_model_config(config("meta-llama--Llama-2-7b-chat-hf"), model_id="l").model
    assert (llama2.attention, llama2.head_dim) == ("mha", 128)  # 4096 / 32: the config has no head_dim
    ds = import_model_config(config("deepseek-ai--DeepSeek-V3"), model_id="d").model
    assert (ds.attention, ds.kv_lora_rank, ds.qk_rope_head_dim, ds.q_lora_rank) == ("mla", 512, 64, 1536)
    assert (ds.experts, ds.experts_per_token, ds.shared_experts, ds.intermediate_size) == (256, 8, 1, 2048)
    lite = import_model_config(config("deepseek-ai--DeepSeek-V2-Lite-Chat"), model_id="v").model
    assert lite.q_lora_rank is None and lite.head_dim == 128  # qk_nope_head_dim; the re-saved head_dim 64 is not it


# ------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("meta-llama--Llama-4-Scout-17B-16E-Instruct", "text_config.attention_chunk_size"),
        ("moonshotai--Kimi-K3", "text_config.linear_attn_config"),
    ],
)
def test_an_architecture_the_registry_cannot_express_is_refused_naming_the_field(name, field):
    with pytest.raises(InputError, match=f"field '{field}'.*cannot express it") as error:
        import_model_config(config(name), model_id="refused")
    if name == "moonshotai--Kimi-K3":
        assert "Kimi Delta Attention" in str(error.value)


def test_an_unknown_architecture_is_refused_naming_it(tmp_path):
    file = tmp_path / "config.json"
    file.write_text(json.dumps({"architectures": ["DeciLMForCausalLM"], "hidden_size": 8192}))
    with pytest.raises(InputError, match="field 'architectures': 'DeciLMForCausalLM' is not an architecture"):
        import_model_config(file, model_id="m")


def _llama(**changes):
    document = json.loads(config("meta-llama--Meta-Llama-3.1-8B").read_text())
    document.update(changes)
    return {key: value for key, value in document.items() if value is not None}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hidden_size": None}, "field 'hidden_size' is missing"),
        ({"num_hidden_layers": -32}, "field 'num_hidden_layers': expected a whole number >= 1, found -32"),
        ({"num_key_value_heads": 7}, "field 'num_key_value_heads': 7 does not divide num_attention_heads 32"),
        ({"vocab_size": "128256"}, "field 'vocab_size': expected a whole number >= 1, found '128256'"),
        ({"tie_word_embeddings": "no"}, "field 'tie_word_embeddings': expected true or false"),
        ({"max_position_embeddings": 8}, "field 'max_context': 8 is outside the plausible range"),
    ],
)
def test_a_malformed_config_names_the_argument_and_the_field(tmp_path, changes, message):
    file = tmp_path / "config.json"
    file.write_text(json.dumps(_llama(**changes)))
    with pytest.raises(InputError, match=message) as error:
        import_model_config(file, model_id="bad")
    assert "config" in str(error.value)


def test_a_file_that_is_not_json_or_too_big_names_the_argument(tmp_path):
    text = tmp_path / "config.json"
    text.write_text("hidden_size: 4096\n")
    with pytest.raises(InputError, match=r"config: config.json: malformed JSON at line 1"):
        import_model_config(text, model_id="x")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(InputError, match=r"config: list.json: expected a JSON object, found list"):
        import_model_config(listed, model_id="x")
    big = tmp_path / "big.json"
    with big.open("wb") as handle:  # 50 MB, past the 32 MB read
        handle.truncate(50_000_000)
    with pytest.raises(InputError, match=r"^config: .*big.json has more than 32,000,000 bytes"):
        import_model_config(big, model_id="x")
    with pytest.raises(InputError, match="argument 'config' must be the path of a JSON file, got 42"):
        import_model_config(42, model_id="x")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"index: .*cannot read"):
        import_model_config(config("Qwen--Qwen3-8B"), model_id="x", index=tmp_path / "absent.json")


# ------------------------------------------------------------------------------------ ids, index, checkpoints


def test_an_id_derived_from_a_packaged_model_is_refused_unless_given(tmp_path):
    llama = config("meta-llama--Meta-Llama-3.1-8B")
    with pytest.raises(InputError, match=r"derived from --repo, already names the registry's models\['llama-3.1-8b'\]"):
        import_model_config(llama, repo="meta-llama/Llama-3.1-8B")
    with pytest.raises(InputError, match=r"argument 'model_id' \(--id\) must be a lowercase id"):
        import_model_config(llama, model_id="meta-llama/Llama-3.1-8B")  # a repository, not an id
    with pytest.raises(InputError, match=r"argument 'model_id' \(--id\) already names the registry's models"):
        import_model_config(llama, model_id="llama-3.1-8b")  # would override the packaged entry's fields
    mine = import_model_config(llama, repo="meta-llama/Llama-3.1-8B", model_id="my-llama", out=tmp_path / "m.yaml")
    assert mine.model.id == "my-llama" and mine.model.aliases == ()  # the repository stays the packaged alias
    assert any("already names the registry's model 'llama-3.1-8b'" in note for note in mine.notes)
    both = load_registry(extra=[tmp_path / "m.yaml"])
    assert both.models["meta-llama/Llama-3.1-8B"].id == "llama-3.1-8b" and "my-llama" in both.models


def test_the_safetensors_index_checks_the_count_and_reports_both(tmp_path):
    # Llama 3.1 8B's index: total_size 16,060,522,496 B at bf16 = 8,030,261,248 parameters, the count exactly.
    index = DATA / "meta-llama--Meta-Llama-3.1-8B_model.safetensors.index.json"
    result = import_model_config(config("meta-llama--Meta-Llama-3.1-8B"), model_id="l8", index=index)
    assert result.index_parameters == 8_030_261_248
    assert any("16,060,522,496 B / 2 B (bfloat16) = 8,030,261,248 parameters" in n for n in result.notes)
    off = tmp_path / "index.json"
    # 7.9e9 parameters at 2 bytes: the count is 130,261,248 / 7.9e9 = 1.649 % more.
    off.write_text(json.dumps({"metadata": {"total_size": 2 * 7_900_000_000}, "weight_map": {}}))
    gap = r"index index.json: .* = 7,900,000,000 parameters; the shapes count 8,030,261,248 \(1.649% apart\), more than 1%"
    with pytest.raises(InputError, match=gap):
        import_model_config(config("meta-llama--Meta-Llama-3.1-8B"), model_id="l8", index=off)
    off.write_text(json.dumps({"metadata": {}}))
    with pytest.raises(InputError, match=r"field 'metadata.total_size': expected a positive byte count, found None"):
        import_model_config(config("meta-llama--Meta-Llama-3.1-8B"), model_id="l8", index=off)
    with pytest.raises(InputError, match="the checkpoint is quantized \\(block-scaled FP8"):
        import_model_config(config("deepseek-ai--DeepSeek-V3"), model_id="ds", index=index)


def test_a_repository_that_only_a_derived_name_held_becomes_the_new_entrys_alias_with_a_note():
    # nvidia/Llama-3.1-8B-Instruct-FP4 is a packaged checkpoint's repository (it named llama-3.1-8b, not as an alias):
    # the imported entry takes it, and the note says what it named before
    imported = import_model_config(
        config("meta-llama--Meta-Llama-3.1-8B"), repo="nvidia/Llama-3.1-8B-Instruct-FP4", model_id="my-8b"
    )
    assert imported.model.aliases == ("nvidia/Llama-3.1-8B-Instruct-FP4",)
    assert any("named the registry's model 'llama-3.1-8b' too" in note for note in imported.notes)


def test_the_checkpoint_precision_comes_from_hf_quant_config_or_the_config(tmp_path):
    fp8 = import_model_config(
        config("nvidia--Llama-3.1-70B-Instruct-FP8"),
        repo="nvidia/Llama-3.1-70B-Instruct-FP8",
        quant=DATA / "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json",
        out=tmp_path / "fp8.yaml",
    )
    # hf_quant_config.json: quant_algo FP8, kv_cache_quant_algo FP8 (ModelOpt).
    checkpoint = fp8.model.checkpoint("fp8")
    assert (checkpoint.repo, checkpoint.format, checkpoint.kv_cache) == (
        "nvidia/Llama-3.1-70B-Instruct-FP8",
        "modelopt",
        "fp8",
    )
    assert load_registry(extra=[tmp_path / "fp8.yaml"]).sources[checkpoint.source].url.endswith("hf_quant_config.json")
    gpt = import_model_config(config("openai--gpt-oss-120b"), repo="example/gpt-oss-copy")
    assert (gpt.model.checkpoint("fp4").format, gpt.model.checkpoint("fp4").kv_cache) == ("mxfp4", None)
    unnamed = import_model_config(config("openai--gpt-oss-120b"), model_id="oss")
    assert unnamed.model.checkpoints == () and any("no repository was given" in note for note in unnamed.notes)
    bad = tmp_path / "q.json"
    bad.write_text(json.dumps({"quantization": {"quant_algo": "FP6"}}))
    with pytest.raises(InputError, match=r"quant: q.json: field 'quant_algo': expected one of"):
        import_model_config(config("meta-llama--Meta-Llama-3.1-8B"), model_id="q", quant=bad)


def test_the_cli_writes_the_file_and_prints_the_notes(tmp_path):
    out = tmp_path / "mistral.yaml"
    args = ["registry", "import", str(config("mistralai--Mistral-7B-v0.1")), "--repo", "mistralai/Mistral-7B-v0.1"]
    result = runner.invoke(app, [*args, "--id", "my-mistral", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "4096-token window" in result.output
    assert load_registry(extra=[out]).models["mistralai/Mistral-7B-v0.1"].id == "my-mistral"
    printed = runner.invoke(app, [*args, "--id", "my-mistral"])
    assert printed.exit_code == 0 and "id: my-mistral" in printed.stdout
    refused = runner.invoke(app, ["registry", "import", str(config("moonshotai--Kimi-K3")), "--id", "q"])
    assert (
        refused.exit_code == 2
        and "error: CONFIG: moonshotai--Kimi-K3_config.json: field 'text_config.linear_attn_config'" in refused.output
    )


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        # compressed-tensors (llm-compressor): 8-bit float weights in every group, an 8-bit float KV scheme.
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
                "kv_cache_scheme": {"num_bits": 8, "type": "float"},
            },
            ("fp8", "compressed-tensors", "fp8"),
        ),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, ("int4", "awq", None)),
        ({"quant_method": "gptq", "bits": 8}, ("int8", "gptq", None)),
        # ModelOpt written into config.json by newer exporters: NVFP4 weights, no KV declaration.
        ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": None}, ("fp4", "modelopt", None)),
    ],
)
def test_the_config_quantization_formats_map_to_the_registry_precisions(tmp_path, declared, expected):
    file = tmp_path / "config.json"
    file.write_text(json.dumps(_llama(quantization_config=declared)))
    model = import_model_config(file, repo="example/quantized-llama").model
    checkpoint = model.checkpoints[0]
    assert (checkpoint.precision, checkpoint.format, checkpoint.kv_cache) == expected


def test_an_unknown_quantization_method_is_refused_naming_it(tmp_path):
    file = tmp_path / "config.json"
    file.write_text(json.dumps(_llama(quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True})))
    with pytest.raises(InputError, match=r"quantization_config: field 'quant_method': 'bitsandbytes' is not a format"):
        import_model_config(file, repo="example/quantized-llama")
