"""Command-line interface: ``servecalc`` (or ``python -m calculator``).

Commands print tables for people. The commands that return tables (``registry list``, ``size``, ``fit``,
``predict``, ``compare``, ``simulate``, ``frontier``) also take ``--format csv|json|xlsx`` (``--json`` is
``--format json``); CSV and JSON go to standard output or to ``--out FILE``, XLSX needs ``--out FILE`` and
writes the workbook of :func:`calculator.export.to_xlsx` (inputs, results, and the formulas and registry
sources used). ``simulate`` checks a plan (``size --json``'s file, or the sizing options) by simulating every
request (:mod:`calculator.simulation`); its progress bar goes to standard error. A bad registry file exits
with status 2 and the :class:`~calculator.errors.RegistryError` message; other bad input also exits with
status 2 and an ``error:`` line.

``size``, ``compare`` and ``simulate`` share the sizing options (:class:`~calculator.cli.sizing.SizingFlags`,
declared once); ``compare`` sizes colocated and disaggregated serving side by side
(:func:`calculator.fleet.compare_serving_modes`).

The modules, each registering its commands on :data:`app` when imported here:

* :mod:`~calculator.cli._app`: the typer app with plain help, ``--version``, the output options
  (``--format``, ``--json``, ``--out``) and their writer, the error exit (library messages told in the
  command's flags), token counts with ``K``/``k`` suffixes and the progress bar.
* :mod:`~calculator.cli._tables`: the tables for people (docs/cli.md).
* :mod:`~calculator.cli.registry`: ``registry list|show|validate|import|schema``.
* :mod:`~calculator.cli.sizing`: the sizing options (:class:`~calculator.cli.sizing.SizingFlags`) read
  into the fleet sizer's inputs, and a plan shown as text (the "understood" header, values, labels).
* :mod:`~calculator.cli.size`: ``size`` (with ``--emit``, ``--disaggregated``, ``--demand``, ``--verify``)
  and ``compare``.
* :mod:`~calculator.cli.fit`: ``fit`` (does a model fit on a tensor-parallel group; how many sequences at once).
* :mod:`~calculator.cli.predict`: ``predict`` (what a closed-loop serving benchmark would report, per concurrency).
* :mod:`~calculator.cli.simulate`: ``simulate`` and reading a plan written by ``size --json``.
* :mod:`~calculator.cli.frontier`: ``frontier``.
* :mod:`~calculator.cli.calibrate`: ``calibrate`` (an engine's costs fitted to the user's own benchmark files).
* :mod:`~calculator.cli.bench`: ``bench`` (the benchmark runs that measure a plan) and ``check`` (their results
  against the plan).
* :mod:`~calculator.cli.day`: ``day`` (a plan played through a day of demand with its autoscaler, failures,
  retries and overload control: :func:`calculator.dynamics.run_day`).
"""

from __future__ import annotations

# Importing a module registers its commands on app; the help lists them in the order of this import.
from . import registry, size, fit, predict, simulate, frontier, calibrate, bench, day  # noqa: F401  # isort: skip
from ._app import app, main
from .simulate import _plan_from_json as _plan_from_json

__all__ = ["app", "main"]
