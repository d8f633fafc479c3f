"""The example notebooks execute from a clean kernel, so they never rot."""

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
PLOTLY = "application/vnd.plotly.v1+json"


def test_there_are_example_notebooks():
    assert {p.stem for p in NOTEBOOKS} >= {"size_llama70b_chat", "kv_memory_precision_whatif"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: clear the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path):
    copy = shutil.copy(path, tmp_path / path.name)  # files the notebook writes land in the temporary folder
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    # the kernel imports this checkout's calculator, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(PLOTLY in o.get("data", {}) for o in outputs), "the notebook should draw its figures"
    assert any("from calculator.plots import" in cell.source for cell in notebook.cells)  # the library's builders
    assert any("text/html" in o.get("data", {}) for o in outputs)  # tables and results render as HTML
    assert list(tmp_path.glob("*.xlsx")), "the notebook exports a workbook"
