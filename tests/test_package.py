"""Package hygiene: the import stays light, and the README's commands are the ones CI runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_calculator_loads_no_heavy_modules():
    code = (
        "import sys, calculator; "
        "heavy = ('streamlit', 'sympy', 'plotly', 'pandas', 'pydantic'); "
        "models = ('calculator.batching', 'calculator.fleet', 'calculator.memory', 'calculator.parallelism', "
        "'calculator.performance', 'calculator.phases', 'calculator.queueing', 'calculator.routing', "
        "'calculator.simulation'); "
        "print(','.join(m for m in (*heavy, *models) if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_lazy_submodules_resolve():
    import calculator

    assert calculator.memory.kv_bytes_per_token.name == "kv_bytes_per_token"
    assert callable(calculator.load_registry)


def test_every_public_model_is_importable_from_the_top_level():
    import importlib
    import pkgutil

    import calculator

    modules = [m.name for m in pkgutil.iter_modules(calculator.__path__) if not m.name.startswith("_")]
    for name in modules:
        if name in ("cli", "plots", "__main__"):
            continue
        module = importlib.import_module(f"calculator.{name}")
        public = [n for n in getattr(module, "__all__", ()) if n != "formula"]
        for item in public:
            assert item in calculator.__all__ and getattr(calculator, item) is getattr(module, item), (name, item)
    # One name per thing: the calibrated step functions keep the plain names, the roofline ones say so.
    assert calculator.decode_step_time.__module__ == "calculator.performance.steps"
    assert calculator.roofline_decode_step_time.__module__ == "calculator.phases.roofline"
    assert calculator.formula.__name__ == "calculator.formula"  # the module, not its decorator


def packages():
    """The model packages directly under ``calculator`` (a folder with an ``__init__.py``; not the CLI)."""
    import calculator

    folders = (ROOT / "calculator").glob("*/__init__.py")
    return sorted(path.parent.name for path in folders if path.parent.name not in calculator._OUTSIDE)


def test_the_flat_namespace_reads_the_packages_and_skips_plain_folders():
    import calculator

    exports = calculator._exports()
    assert {
        "batching",
        "fleet",
        "memory",
        "parallelism",
        "performance",
        "phases",
        "queueing",
        "routing",
        "simulation",
    } <= set(packages())
    assert "data" not in packages() and "data" not in exports.values()
    for package in packages():
        assert package in exports.values(), package
    assert exports["batch_service_time"] == "batching" and exports["ring_allreduce_time"] == "parallelism"
    assert exports["prefill_flops"] == "phases" and exports["predict_benchmark"] == "performance"
    assert exports["kv_handoff_time"] == "memory"  # the transfer of eq. 10 sits with the memory tiers
    assert exports["size_fleet"] == "fleet" and exports["verify_plan"] == "simulation"


def test_a_package_exports_exactly_the_public_names_of_its_submodules():
    import importlib
    import pkgutil

    for name in packages():
        package = importlib.import_module(f"calculator.{name}")
        assert len(package.__all__) == len(set(package.__all__)), name
        defined: list[str] = []
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            names = list(getattr(module, "__all__", ()))
            if info.name.startswith("_"):
                assert not names, (name, info.name)
            for item in names:
                assert getattr(package, item) is getattr(module, item), (name, info.name, item)
            defined += names
        assert sorted(defined) == sorted(package.__all__), name


def test_a_split_module_keeps_serving_its_public_names_outside_all():
    # Callers (fleet, simulation, calibration, the benchmarks) import these from the package, as from the module.
    from calculator import performance
    from calculator.performance import benchmark, engines, iteration

    for module, names in [
        (engines, ("ROOFLINE", "GENERIC_FRACTIONS", "kv_capacity_tokens", "usable_kv_bytes", "sglang_memory_fraction")),
        (iteration, ("ACTIVATION_BYTES", "ELEMENTWISE_PASSES", "MLA_DECODE_COMPUTE_FRACTION", "decode_step_seconds")),
        (iteration, ("prefill_seconds",)),
        (benchmark, ("REQUESTS_PER_CLIENT", "closed_loop_seconds")),
    ]:
        for name in names:
            assert getattr(performance, name) is getattr(module, name) and name not in performance.__all__, name


def test_star_import_works_without_the_front_end_libraries():
    code = (
        "import sys; from calculator import *; "
        "assert callable(size_fleet) and callable(kv_bytes_per_token) and callable(verify_plan); "
        "print(','.join(m for m in ('streamlit', 'plotly', 'sympy', 'typer', 'distributed', 'dask') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_the_library_needs_no_dask():
    # dask is the optional 'cluster' extra (an executor for seeds and sweep points); with dask absent
    # the library imports and runs.
    code = (
        "import sys; sys.modules['dask'] = None; sys.modules['distributed'] = None; "
        "from calculator import Q_; from calculator.sweeps import sweep_fleet; "
        "frame = sweep_fleet('llama-3.1-8b', 'h100-sxm', 'fp8', Q_([5, 10], 'request/s'), 512, 128, Q_(1, 's'), "
        "Q_(50, 'ms')); print(len(frame), bool(frame.feasible.all()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["2", "True"]


def test_dask_stays_importable_after_the_library_hid_it_from_pint():
    # calculator.units hides an installed dask while pint loads (pint would import dask.base, 0.1 s).
    code = "import calculator, sys; assert 'dask' not in sys.modules; import dask.base; print(dask.base.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "dask.base"


def readme_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Set up and run\n(.*?)\n## ", text, re.S).group(1)
    return re.findall(r"^```sh\n(.*?)\n```", block, re.S | re.M)


def test_readme_gives_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = readme_commands()
    assert len(commands) == 2
    dashboard, tests = commands
    assert "streamlit run app.py" in dashboard
    assert "pytest" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci


def test_mypy_is_clean_on_the_library():
    out = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]


def test_ruff_is_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--quiet", "."], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_wheel_carries_its_data_and_needs_no_front_end_libraries(tmp_path):
    import zipfile

    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        archive_registry = archive.read("calculator/data/hardware_registry.yaml")
        archive.extractall(tmp_path / "site")
    # The registry users edit sits at the top of the repository; the wheel carries it, byte for byte.
    assert archive_registry == (ROOT / "hardware_registry.yaml").read_bytes()
    # Every module ships, the ones in subpackages (calculator/cli/, calculator/fleet/, ...) too.
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "calculator").rglob("*.py")}
    assert "calculator/cli/__init__.py" in modules and modules <= names, sorted(modules - names)
    assert any(n.startswith("calculator/data/calibration/kernels/") for n in names)
    # The core requirements (no extra marker) leave out the dashboard, figure and workbook libraries.
    core = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert core and not any(lib in line for line in core for lib in ("streamlit", "plotly", "openpyxl"))
    # Installed away from the repository, the package finds its own registry and sizes a fleet.
    code = (
        "import calculator; from calculator import Q_, SearchSpace, Targets, Workload, load_registry, size_fleet; "
        "assert calculator.__file__.startswith({!r}), calculator.__file__; "
        "assert 'h100-sxm' in load_registry().accelerators; "
        "plan = size_fleet('llama-3.1-8b', Workload(Q_(10, 'request/s'), 512, 128), Targets(Q_(1, 's'), "
        "Q_(50, 'ms')), SearchSpace('h100-sxm', 'fp8')); print(plan.feasible, plan.gpus > 0)"
    ).format(str(tmp_path / "site"))
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=away, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True True"
