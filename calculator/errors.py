"""Exceptions raised by the calculator.

Every error names what was wrong and what was expected, so that the dashboard and the CLI can show
the message as it is.
"""

from __future__ import annotations


class CalculatorError(Exception):
    """Base class of every error the calculator raises on purpose."""


class UnitsError(CalculatorError, TypeError):
    """An argument has the wrong physical dimension (or none where one is needed)."""


class InputError(CalculatorError, ValueError):
    """An argument has the right kind but an impossible value (negative rate, probability > 1, ...)."""


class RegistryError(CalculatorError, ValueError):
    """A registry file or a registry lookup is invalid; the message names file, entry and field."""


class UnknownEntryError(RegistryError, KeyError):
    """A registry id that does not exist; the message lists the ids that do."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ExtrapolationWarning(UserWarning):
    """A result computed for a model or an accelerator outside the range the performance model was validated on."""
