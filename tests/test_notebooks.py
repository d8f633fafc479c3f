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
def test_notebook_is_stored_executed(path):
    # A reader sees the results without running anything (tools/run_notebooks.py stores them).
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), f"{path.name}: run it in order"
    outputs = [output for cell in code for output in cell.outputs]
    assert outputs and not [o for o in outputs if o.output_type == "error"], path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path, tmp_path_factory):
    copy = shutil.copy(path, tmp_path / path.name)  # files the notebook writes land in the temporary folder
    notebook = nbformat.read(copy, as_version=4)
    client = NotebookClient(
        notebook, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    # the kernel imports this checkout's calculator, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    scratch = tmp_path_factory.mktemp("notebook-tmp")
    env["TMPDIR"] = str(scratch)  # its temporary folders go where pytest prunes them, not into the system's
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # The exports go to the notebook's temporary folder, never into the working folder.
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert [p.name for p in scratch.iterdir() if p.name.startswith("servecalc-example-")]
    assert any(PLOTLY in o.get("data", {}) for o in outputs), "the notebook should draw its figures"
    assert any("from calculator.plots import" in cell.source for cell in notebook.cells)  # the library's builders
    assert any("text/html" in o.get("data", {}) for o in outputs)  # tables and results render as HTML
    # It exports a workbook into its temporary folder and reads it back (the read-back renders above).
    assert any("to_xlsx(" in cell.source and "OUT /" in cell.source for cell in notebook.cells)
