"""``docs/ARCHITECTURE.md`` is true to the code: its size rule, its lists of exceptions, and its module tree.

The "Size" decision: every module of ``calculator/`` under 1,000 lines, and every function of ``calculator/`` and
``app_pages/`` under 80 lines of code except those listed under "Functions over 80 lines", each with its reason.
A listed one that is back under the limit fails too, so the list shrinks as the code does. "The house" names
every module file of ``calculator/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_MODULE_LINES = 1_000
MAX_FUNCTION_LINES = 80


def code_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines of code of a function: its body after the docstring, blank and comment-only lines aside.

    Nested functions count in their parent (and again on their own).
    """
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    first = body[0].lineno if body else node.lineno
    assert node.end_lineno is not None
    return sum(1 for text in lines[first - 1 : node.end_lineno] if text.strip() and not text.strip().startswith("#"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def function_sizes(source: str, module: str) -> dict[str, int]:
    """``module.Class.function`` (nested: ``module.outer.inner``) -> lines of code, for every function of ``source``."""
    lines = source.splitlines()
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}.{child.name}"
                sizes[name] = max(sizes.get(name, 0), code_lines(lines, child))
                visit(child, name)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}")
            else:
                visit(child, prefix)  # under an if, a try, a with: the same scope

    visit(ast.parse(source), module)
    return sizes


def _sources(*folders: str) -> dict[str, Path]:
    return {_module_name(path): path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))}


def listed(heading: str, text: str | None = None) -> dict[str, str]:
    """The bullets under ``### heading`` of ARCHITECTURE.md (or ``text``): name (in backquotes) -> its reason."""
    text = ARCHITECTURE.read_text(encoding="utf-8") if text is None else text
    match = re.search(rf"^### {re.escape(heading)}\n(.*?)(?=^#|\Z)", text, flags=re.S | re.M)
    assert match, f"docs/ARCHITECTURE.md has no section '### {heading}'"
    found: dict[str, str] = {}
    for line in match.group(1).splitlines():
        bullet = re.match(r"- `([\w.]+)`(.*)", line)
        if bullet:
            assert bullet.group(1) not in found, f"{bullet.group(1)} is listed twice under '{heading}'"
            found[bullet.group(1)] = bullet.group(2).strip(" :;,-—")
    return found


def test_the_line_count_skips_the_docstring_blank_lines_and_comments_and_counts_nested_functions():
    source = '''
class Box:
    def method(self):
        """A docstring
        of two lines."""
        # a comment

        x = 1
        def inner():
            """Counted: the inner docstring is code of method."""
            return x  # a trailing comment is code
        return inner


async def waits():
    return 1
'''
    assert function_sizes(source, "m") == {"m.Box.method": 5, "m.Box.method.inner": 1, "m.waits": 1}


def test_the_lists_read_names_and_reasons():
    functions = listed("Functions over 80 lines")  # empty today: every function is under the limit
    assert all(re.fullmatch(r"(calculator|app_pages)(\.\w+)+", name) for name in functions)
    sample = "### Functions over 80 lines\n\nNone but:\n- `calculator.a.b`: its reason\n\n## Next\n- `x`: not listed\n"
    assert listed("Functions over 80 lines", sample) == {"calculator.a.b": "its reason"}
    with pytest.raises(AssertionError, match="no section"):
        listed("A heading the file does not have")


def test_every_module_is_under_a_thousand_lines():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _sources("calculator").items()}
    over = {name: lines for name, lines in sizes.items() if lines >= MAX_MODULE_LINES}
    assert not over, f"modules of {MAX_MODULE_LINES:,} lines or more (move a coherent part into a sibling): {over}"


def test_every_function_is_under_eighty_lines_of_code_or_listed_with_its_reason():
    allowed = listed("Functions over 80 lines")
    sizes: dict[str, int] = {}
    for module, path in _sources("calculator", "app_pages").items():
        sizes.update(function_sizes(path.read_text(encoding="utf-8"), module))
    over = {name: lines for name, lines in sizes.items() if lines > MAX_FUNCTION_LINES}
    unlisted = {name: over[name] for name in sorted(set(over) - set(allowed))}
    assert not unlisted, f"functions over {MAX_FUNCTION_LINES} lines of code (split them into named steps): {unlisted}"
    back = {name: sizes.get(name) for name in allowed if name not in over}
    assert not back, f"listed under 'Functions over 80 lines' but not over (take them off the list): {back}"
    assert all(allowed.values()), f"listed without a reason: {[n for n, why in allowed.items() if not why]}"


def house_tree() -> set[str]:
    """The files of the tree under "The house": ``calculator/registry.py``, ``calculator/memory/__init__.py``, ...

    A name ending in ``/`` is a folder (its ``__init__.py`` with it); the names below it are indented under it.
    Descriptions start in a column of their own, further right than any name.
    """
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("\n## The house\n", 1)[1].split("```", 2)[1]
    files: set[str] = set()
    folders: list[tuple[int, str]] = []
    for line in block.splitlines():
        entry = re.match(r"( {0,16})(\S+/|\S+\.py)(?:\s|$)", line)
        if entry is None:
            continue  # a description's next line, or a file that is not a module
        indent, name = len(entry.group(1)), entry.group(2)
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = "/".join([folder for _, folder in folders] + [name.rstrip("/")])
        if name.endswith("/"):
            folders.append((indent, name.rstrip("/")))
            files.add(f"{path}/__init__.py")
        else:
            files.add(path)
    return files


def test_the_house_reads_nested_folders():
    tree = house_tree()
    assert {"calculator/registry.py", "calculator/memory/kv.py", "calculator/cli/_app.py"} <= tree
    assert "calculator/kv.py" not in tree and "calculator/memory/_app.py" not in tree


def test_the_house_names_every_module_file_of_the_package():
    tree = house_tree()
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "calculator").rglob("*.py")}
    missing = sorted(modules - tree)
    assert not missing, f"docs/ARCHITECTURE.md, 'The house', does not list: {missing}"
    stale = sorted(p for p in tree - modules if p.startswith("calculator/") and not p.endswith("/__init__.py"))
    assert not stale, f"docs/ARCHITECTURE.md, 'The house', lists modules that do not exist: {stale}"
