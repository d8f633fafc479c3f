"""Execute the example notebooks in place, so they are stored with their outputs.

Run from the repository after changing a notebook or the library:

    .venv/bin/python tools/run_notebooks.py

Each notebook runs from a clean kernel in ``examples/`` and writes its exports into a temporary folder
(the notebooks' ``OUT``), never into the working folder. ``tests/test_notebooks.py`` checks that the
stored notebooks carry outputs in execution order and still execute.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    """Execute every notebook under examples/ and store it with its outputs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for path in sorted((ROOT / "examples").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        client = NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})  # fmt: skip
        client.execute(env=env)
        nbformat.write(notebook, path)
        print(f"executed {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
