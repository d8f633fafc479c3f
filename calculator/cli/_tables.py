"""Tables for people: titled sections of labelled rows, rendered by rich without colour or markup.

Every table-printing command builds its rows as text (labels with units, numbers rounded by
:func:`calculator.results.format_number`) and renders them here; the CSV and JSON outputs keep the
library's field names and base units. A table is as wide as its contents (up to :data:`MAX_WIDTH`
columns): its headers and numbers are not folded to fit a terminal, which wraps a long line instead.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: The widest rendering; a table is only as wide as its contents.
MAX_WIDTH = 1000


def table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None, *, left: bool = False
) -> str:
    """``rows`` under the ``columns`` headers (the first column left-aligned, the others right-aligned).

    Columns with no header at all make a list of label and value, left-aligned, as ``left`` makes every
    column; a column empty in every row is left out. A ``title`` is printed on its own line above. Cells
    are plain text: brackets are not rich markup.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    kept = [position for position in range(len(columns)) if not position or any(row[position] for row in rows)]
    columns, rows = [columns[i] for i in kept], [[row[i] for i in kept] for row in rows]
    headed = any(columns)
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="", show_header=headed)
    for position, column in enumerate(columns):
        grid.add_column(Text(column), justify="right" if position and headed and not left else "left", overflow="fold")
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    console = Console(file=out, width=MAX_WIDTH, no_color=True, highlight=False, emoji=False, color_system=None)
    if title:
        console.print(Text(title))
    console.print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def sections(parts: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]], *, left: bool = False) -> str:
    """Several :func:`table` s, each ``(title, columns, rows)``, a blank line apart (empty ones left out)."""
    return "\n\n".join(table(columns, rows, title, left=left) for title, columns, rows in parts if rows)


#: Words a column name abbreviates, as a header writes them.
HEADER_WORDS = {"ttft": "TTFT", "tpot": "TPOT", "tbt": "TBT", "tp": "TP", "gpu": "GPU", "gpus": "GPUs", "kv": "KV"}
#: Units a column name ends with, as a header writes them.
HEADER_UNITS = {"ms": "ms", "s": "s", "gb": "GB", "usd": "USD", "pct": "%"}


def header(name: str) -> str:
    """A column name for people: ``ttft_mean_ms`` reads ``TTFT mean [ms]``, ``meets_targets`` ``meets targets``."""
    words = name.split("_")
    unit = HEADER_UNITS.get(words[-1]) if len(words) > 1 else None
    words = words[:-1] if unit else words
    text = " ".join(HEADER_WORDS.get(word, word) for word in words)
    return f"{text} [{unit}]" if unit else text


def frame_table(frame: Any, headers: Mapping[str, str] | None = None, title: str | None = None) -> str:
    """The columns of ``frame`` named in ``headers`` (in its order), under those headers, as :func:`table`.

    Without ``headers`` every column is shown under its :func:`header`.
    Numbers are rounded by :func:`~calculator.results.format_number` (four significant digits, whole
    numbers exact), booleans read yes or no; a column ``headers`` does not name is left out.
    """
    from ..results import format_number

    def cell(value: Any) -> str:
        if isinstance(value, bool | np.bool_):
            return "yes" if value else "no"
        if isinstance(value, int | float | np.integer | np.floating):
            return format_number(value)
        return str(value)

    headers = headers or {column: header(column) for column in frame.columns}
    columns = [column for column in headers if column in frame.columns]
    rows = [[cell(value) for value in record] for record in frame[columns].itertuples(index=False)]
    return table([headers[column] for column in columns], rows, title)
