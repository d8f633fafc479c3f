"""Tables for people: titled sections of labelled rows, rendered by rich without colour or markup.

Every table-printing command builds its rows as text (labels with units, numbers rounded by
:func:`calculator.results.format_number`) and renders them here; the CSV and JSON outputs keep the
library's field names and base units. A table is as wide as the terminal (at least :data:`MIN_WIDTH`
columns, so a redirected output is not squeezed to 80).
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Sequence

#: The narrowest rendering: a pipe or a file gets this many columns rather than a terminal's 80.
MIN_WIDTH = 120


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> str:
    """``rows`` under the ``columns`` headers (the first column left-aligned, the others right-aligned).

    Columns with no header at all make a list of label and value, left-aligned. A ``title`` is printed on
    its own line above. Cells are plain text: brackets are not rich markup.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    headed = any(columns)
    grid = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="", show_header=headed)
    for position, column in enumerate(columns):
        grid.add_column(Text(column), justify="right" if position and headed else "left", overflow="fold")
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    width = max(shutil.get_terminal_size((MIN_WIDTH, 24)).columns, MIN_WIDTH)
    console = Console(file=out, width=width, no_color=True, highlight=False, emoji=False, color_system=None)
    if title:
        console.print(Text(title))
    console.print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def sections(parts: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]]) -> str:
    """Several :func:`table` s, each ``(title, columns, rows)``, a blank line apart (empty ones left out)."""
    return "\n\n".join(table(columns, rows, title) for title, columns, rows in parts if rows)
