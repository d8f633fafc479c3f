"""The import graph of calculator/ has no cycle, and the serving layers import downward only.

Every import counts: at module level, inside functions (which hide a cycle from Python's import machinery
but not from a reader: the modules still depend on each other) and under ``if TYPE_CHECKING:`` (an
annotation is a dependency too). The two places that import modules by name count as well, through the
lists they declare: :data:`calculator.formula.FORMULA_MODULES` (what ``catalog()`` imports) and
:data:`calculator.export.CITED_MODULES` (what a sources sheet cites). ``docs/ARCHITECTURE.md``, "Layers".
"""

from __future__ import annotations

import ast
from pathlib import Path

from calculator.export import CITED_MODULES
from calculator.formula import FORMULA_MODULES

PACKAGE = Path(__file__).resolve().parents[1] / "calculator"
#: ``formula.catalog()`` as a node of its own: the index above the formula modules (it imports the declared
#: :data:`FORMULA_MODULES`), kept in ``formula.py`` so that its public name stays; the modules that import
#: ``catalog`` depend on it, the modules that import the ``formula`` decorator do not.
CATALOG = "calculator.formula.catalog"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every import in the file, at any depth (functions, ``if TYPE_CHECKING:``)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            found.append((base, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the library modules it imports (each name imported resolves to its module, else its package)."""
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for base, names in _imports(name, path):
            for target in [f"{base}.{alias}" for alias in names] + [base]:
                if not target.startswith("calculator"):
                    continue
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
                    break
            if base == "calculator.formula" and "catalog" in names:
                graph[name].add(CATALOG)
    graph[CATALOG] = {f"calculator.{module}" for module in FORMULA_MODULES}
    graph["calculator.export"] |= {f"calculator.{module}" for module in CITED_MODULES}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One cycle through a strongly connected component, as the modules in import order (first repeated)."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to the start
        node = frontier.pop(0)
        for other in sorted(graph[node] & members):
            if other == start:
                return [*paths[node], start]
            if other not in paths:
                paths[other] = [*paths[node], other]
                frontier.append(other)
    raise AssertionError(f"{component} is not strongly connected")


def _crossing(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    """The imports from package ``source`` (or its submodules) into package ``target``."""
    inside = lambda module, package: module == package or module.startswith(f"{package}.")  # noqa: E731
    return sorted(f"{a} -> {b}" for a in graph if inside(a, source) for b in graph[a] if inside(b, target))


def test_the_import_graph_finds_the_imports_it_should():
    graph = import_graph()
    # a function-level import counts (calculator.kernels imports the weights' stored bits in a function)
    assert "calculator.memory" in graph["calculator.kernels"]
    assert "calculator.performance.iteration" in graph["calculator.performance"]
    # an import under TYPE_CHECKING counts (the simulator's steps name StepArrays for annotations only)
    assert "calculator.performance" in graph["calculator.simulation.steps"]
    # the declared lists count: the catalogue imports the formula modules, the sources sheet the cited ones
    assert "calculator.memory" in graph[CATALOG] and CATALOG in graph["calculator.sweeps"]
    assert "calculator.fleet" in graph["calculator.export"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycle_path({"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, ["a", "b", "c", "d"]) == ["a", "d", "a"]


def test_the_library_has_no_import_cycle():
    graph = import_graph()
    found = [" -> ".join(cycle_path(graph, component)) for component in cycles(graph)]
    assert not found, "import cycle(s), TYPE_CHECKING and function-level imports counted:\n" + "\n".join(found)


def test_only_the_declared_lists_import_library_modules_by_name():
    # ``calculator/__init__.py`` serves the flat namespace (every module, on first use); of the library, only the
    # command line, above everything, imports it (for ``__version__``).
    by_name = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__")
                and not (node.args and isinstance(node.args[0], ast.Constant))
            ):
                by_name.add(_module(path))
    assert by_name == {"calculator", "calculator.formula", "calculator.export"}
    importers = {module for module, imported in import_graph().items() if "calculator" in imported}
    assert {module.split(".")[1] for module in importers} <= {"cli"}


def test_the_formula_modules_are_the_modules_that_declare_formulas():
    declaring = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "formula"
                for d in node.decorator_list
            ):
                declaring.add(path.relative_to(PACKAGE).parts[0].removesuffix(".py"))
    assert set(FORMULA_MODULES) == declaring
    assert set(FORMULA_MODULES) <= set(CITED_MODULES)  # a formula is cited by its catalogue key or as a function


def test_the_fleet_sizer_imports_nothing_of_the_simulator():
    assert _crossing(import_graph(), "calculator.fleet", "calculator.simulation") == []


def test_the_simulator_imports_nothing_of_the_fleet_sizer():
    assert _crossing(import_graph(), "calculator.simulation", "calculator.fleet") == []


def test_the_serving_vocabulary_sits_below_the_sizer_and_the_simulator():
    graph = import_graph()
    for above in ("calculator.fleet", "calculator.simulation"):
        assert "calculator.serving" in {b for a in graph if a.startswith(above) for b in graph[a]}
    base = {"_files", "_support", "errors", "registry", "results", "types", "units"}
    assert graph["calculator.serving"] <= {f"calculator.{module}" for module in base}


#: Most private names (a leading underscore) one package of the library may import from another (issue 52).
MOST_PRIVATE_CROSSINGS = 10


def _package(module: str) -> str:
    """The top package of a library module: ``calculator.fleet.search`` -> ``fleet``, ``calculator.units`` -> ``units``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def private_crossings() -> list[tuple[str, str, str, bool]]:
    """Every private name imported from another package: (importer, module, name, whether a comment says why).

    The comment is on the import's line or in the three lines above it (a comment over a group of such imports).
    """
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module(path)
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = name.split(".")[: len(name.split(".")) - node.level + (path.name == "__init__.py")]
            source = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
            if not source.startswith("calculator") or _package(source) == _package(name):
                continue
            nearby = "".join(lines[max(node.lineno - 4, 0) : node.lineno])
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((name, source, alias.name, "#" in nearby))
    return found


def test_the_private_names_crossing_packages_are_few_and_each_says_why():
    crossings = private_crossings()
    assert any(name == "_pick_replica" for _, _, name, _ in crossings)  # the scan sees the ones there are
    names = sorted({(source, name) for _, source, name, _ in crossings})
    assert len(names) <= MOST_PRIVATE_CROSSINGS, names
    silent = [(importer, f"{source}.{name}") for importer, source, name, why in crossings if not why]
    assert not silent, f"private imports across packages without a comment saying why: {silent}"
