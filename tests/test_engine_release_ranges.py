"""Engine release ranges (issue 53, item 1): each engine's defaults by release, as read in the released packages,
and ``EngineProfile.for_release`` taking the budget tiers, chunking and scheduler of the range a release falls in.

Every expected value below is the engine source's, quoted in the comment beside it, not the registry's.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from calculator._registry_schema import Engine
from calculator.performance import engine_profile
from calculator.registry import load_registry

GB = 1e9
GIB = 2**30


def _ranges(engine: str) -> dict[str, object]:
    return {r.since: r for r in load_registry().engines[engine].releases}


def _graph(release: object, memory_gb: float, tp: int) -> int:
    """The largest captured decode batch a range states for a device of ``memory_gb`` GB and ``tp`` GPUs."""
    tiers = release.cuda_graph_batch
    tier = [t for t in tiers if t.min_device_memory is None or memory_gb * GB >= t.min_device_memory.m_as("B")][-1]
    return tier.batch_from_tensor_parallel if tp >= (release.graph_tensor_parallel or 10**9) else tier.batch


def test_vllm_ranges_as_read_in_each_release():
    ranges = _ranges("vllm")
    assert list(ranges) == ["0.12", "0.14"]
    # 0.12.0 config/scheduler.py: "async_scheduling: bool = False", "enable_chunked_prefill: bool = True"
    assert ranges["0.12"].overlap_scheduler is False and ranges["0.12"].chunked_prefill is True
    # 0.14.0-0.18.0 config/scheduler.py: "async_scheduling: bool = Field(default=None)", made True by VllmConfig
    assert ranges["0.14"].overlap_scheduler is True
    # config/vllm.py: max_cudagraph_capture_size = min(max_num_seqs * 2, 512), then min(max_num_batched_tokens, .):
    # min(1024 * 2, 512, 8192) = 512 on the large tier and min(256 * 2, 512, 2048) = 512 on the small one
    assert _graph(ranges["0.12"], 80, 1) == 512 and _graph(ranges["0.12"], 40, 8) == 512
    # pad_for_cudagraph: "return self.compilation_config.bs_to_padded_graph_size[batch_size]"
    assert ranges["0.12"].graph_padding is True


def test_vllm_budget_tiers_did_not_change_from_0_12_to_0_18():
    # engine/arg_utils.py in 0.12.0, 0.14.0, 0.15.0, 0.16.0 and 0.18.0: "if device_memory >= 70 * GiB_bytes and
    # 'a100' not in device_name": OPENAI_API_SERVER 8192 tokens and 1024 seqs, else 2048 and 256
    for version in ("0.12", "0.18"):
        profile = engine_profile("vllm").for_release(version)
        assert profile.limits(80 * GIB, "h100_sxm") == (8192, 1024)
        assert profile.limits(69 * GIB) == (2048, 256)
        assert profile.limits(80 * GIB, "a100_80gb") == (2048, 256)


def test_sglang_0_5_1_prefills_8192_tokens_where_0_5_3_on_prefill_4096():
    # 0.5.1 server_args.py: "if gpu_mem < 35 * 1024: 2048 / elif gpu_mem < 160 * 1024: 8192 / else: 16384";
    # 0.5.3-0.5.9: "elif gpu_mem < 60 * 1024: self.chunked_prefill_size = 4096" between them
    sglang = engine_profile("sglang")
    l40s = 48 * GIB  # 49,152 MiB: between 35 and 60 x 1024
    assert sglang.for_release("0.5.1").limits(l40s)[0] == 8192
    assert sglang.for_release("0.5.3").limits(l40s)[0] == 4096
    assert sglang.for_release("0.5.9").limits(l40s)[0] == 4096
    for version in ("0.5.1", "0.5.9"):  # an H100 (81,559 MiB) prefills 8192 and a B200 16384 in both
        assert sglang.for_release(version).limits(81559 * 2**20)[0] == 8192
        assert sglang.for_release(version).limits(180 * GIB)[0] == 16384
        # model_runner: max_num_reqs = min(max(..., 2048), 4096)
        assert sglang.for_release(version).limits(81559 * 2**20)[1] == 4096


def test_sglang_graph_batches_by_release():
    ranges = _ranges("sglang")
    h100 = 81559 * 2**20 / GB
    # 0.5.1 cuda_graph_runner.py: "capture_bs = [1, 2, 4, 8] + list(range(16, 161, 8))", cuda_graph_max_bs unset
    # at >= 35 x 1024 MiB; "if gpu_mem > 90 * 1024: capture_bs += list(range(160, 257, 8))"
    assert _graph(ranges["0.5.1"], h100, 1) == 160 and _graph(ranges["0.5.1"], h100, 8) == 160
    assert _graph(ranges["0.5.1"], 141, 1) == 256  # H200
    # 0.5.3: "elif gpu_mem < 90 * 1024: ... if self.tp_size < 4: cuda_graph_max_bs = 256 else: 512"
    assert _graph(ranges["0.5.3"], h100, 2) == 256 and _graph(ranges["0.5.3"], h100, 4) == 512
    # under 35 x 1024 MiB below TP 4: 0.5.3 "self.cuda_graph_max_bs = 16", 0.5.6 and 0.5.9 "= 24"
    assert _graph(ranges["0.5.3"], 24, 1) == 16 and _graph(ranges["0.5.6"], 24, 1) == 24
    # cuda_graph_runner.py replay: "index = bisect.bisect_left(self.capture_bs, raw_bs)": padded
    assert ranges["0.5.6"].graph_padding is True and ranges["0.5.1"].graph_padding is True
    # disable_overlap_schedule: bool = False in 0.5.1, 0.5.2, 0.5.3, 0.5.6 and 0.5.9
    assert ranges["0.5.1"].overlap_scheduler is True


def test_tensorrt_llm_captures_128_without_padding():
    (release,) = load_registry().engines["trtllm"].releases
    # llm_args.py CudaGraphConfig: "max_batch_size = self.max_batch_size or 128", "enable_padding ... default=False"
    assert _graph(release, 80, 1) == 128 and release.graph_padding is False
    # commands/serve.py get_llm_args: "enable_chunked_prefill: bool = False"
    assert release.chunked_prefill is False
    profile = engine_profile("trtllm").for_release("1.2")
    assert profile.limits(80 * GIB) == (8192, 2048) and not profile.chunked_prefill


@pytest.mark.parametrize(("engine", "latest"), [("vllm", "0.18"), ("sglang", "0.5.9"), ("trtllm", "1.3")])
def test_the_latest_range_is_the_unstated_profile(engine, latest):
    # An unstated release prices today's defaults, and the newest range reads the same ones: only the release differs.
    profile = engine_profile(engine)
    assert profile.for_release(latest).replace(release=None) == profile


def test_a_release_before_the_first_range_takes_it_and_says_so():
    vllm = engine_profile("vllm")
    old = vllm.for_release("0.11")
    first = vllm.for_release("0.12")
    assert (old.tiers, old.chunked_prefill, old.overlap_scheduler) == (
        first.tiers,
        first.chunked_prefill,
        first.overlap_scheduler,
    )
    assert old.release_before_ranges and not first.release_before_ranges
    assert "precedes 0.12, the first release whose defaults were read" in old.release_note()
    assert "precedes" not in first.release_note()
    assert engine_profile("sglang").for_release("0.4").limits(48 * GIB)[0] == 8192  # 0.5.1's


def _vllm_entry(releases: list[dict[str, object]]) -> Engine:
    text = yaml.safe_load((Path(__file__).parents[1] / "hardware_registry.yaml").read_text())
    entry = copy.deepcopy(next(e for e in text["engines"] if e["id"] == "vllm"))
    return Engine.model_validate({**entry, "releases": releases})


def test_ranges_must_agree_with_the_dated_scheduling_and_come_in_order():
    assert len(_vllm_entry([{"since": "0.12", "overlap_scheduler": False, "note": "read"}]).releases) == 1
    with pytest.raises(ValidationError, match=r"against async_scheduling_since 0\.14"):
        _vllm_entry([{"since": "0.12", "overlap_scheduler": True, "note": "read"}])
    with pytest.raises(ValidationError, match="oldest first"):
        _vllm_entry([{"since": "0.14", "note": "read"}, {"since": "0.12", "note": "read"}])
    with pytest.raises(ValidationError, match="note"):
        _vllm_entry([{"since": "0.12"}])
