"""An engine runs on its vendors' accelerators only: TensorRT-LLM on NVIDIA GPUs (registry ``accelerator_vendors``)."""

from __future__ import annotations

import pytest
from test_app import ROOT, rendered

from calculator import Q_, InputError, load_registry
from calculator.fleet import SearchSpace, Targets, Workload, size_fleet
from calculator.performance import engine_profile, predict_benchmark, step_arrays

REFUSED = r"engine 'trtllm' runs on NVIDIA accelerators only, and accelerator 'mi300x' is AMD's: choose vllm or sglang"


def test_the_registry_says_which_vendors_each_engine_runs_on():
    reg = load_registry()
    assert reg.engines["trtllm"].accelerator_vendors == ("NVIDIA",)
    assert engine_profile("trtllm").accelerator_vendors == ("NVIDIA",)
    for engine in ("vllm", "sglang", "generic"):  # vLLM and SGLang run on ROCm too
        assert reg.engines[engine].accelerator_vendors == ()


def test_tensorrt_llm_on_an_amd_gpu_is_refused_everywhere_the_step_model_is_built():
    with pytest.raises(InputError, match=REFUSED):
        step_arrays("llama-3.1-70b", "mi300x", "fp8", engine="trtllm")
    with pytest.raises(InputError, match=REFUSED):
        predict_benchmark("llama-3.1-70b", "mi300x", "fp8", 8, 1024, 256, 64, "trtllm")
    workload, targets = Workload(Q_(10, "request/s"), 1024, 256), Targets(Q_(1, "s"), Q_(50, "ms"))
    with pytest.raises(InputError, match=REFUSED):
        size_fleet("llama-3.1-70b", workload, targets, SearchSpace(("h100-sxm", "mi300x"), "fp8"), engine="trtllm")
    # The engines that do run there still price it.
    assert predict_benchmark("llama-3.1-70b", "mi300x", "fp8", 8, 1024, 256, 64, "vllm").tpot.m_as("ms") > 0
    assert predict_benchmark("llama-3.1-70b", "h100-sxm", "fp8", 8, 1024, 256, 64, "trtllm").tpot.m_as("ms") > 0


def test_the_dashboard_says_so_instead_of_pricing_it():
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    app.switch_page("app_pages/benchmark.py")
    app.query_params["gpu"], app.query_params["engine"] = "mi300x", "TensorRT-LLM"
    app.run()
    assert not app.exception
    assert [rendered(e.value) for e in app.error] == [REFUSED]
