"""Helpers the simulation submodules share: time arguments, statistic names, the seeds and the default pool."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._support import random_seed
from ..errors import InputError
from ..units import shown, ureg

__all__: list[str] = []


def _time_seconds(function: str, name: str, value: Any) -> float:
    """A finite positive time in seconds, or an InputError naming ``function`` and ``name``."""
    if not isinstance(value, ureg.Quantity) or value.dimensionality != ureg.s.dimensionality:
        raise InputError(f"{function}: argument '{name}' must be a time such as Q_(200, 'ms'), got {value!r}")
    seconds = float(value.m_as("s"))
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"{function}: argument '{name}' must be a finite time > 0, got {value!r}")
    return seconds


def _positive_seconds(function: str, argument: str, value: Any) -> float:
    """A wall-clock budget in seconds: a finite number above 0 (an InputError naming it otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InputError(f"{function}(): argument '{argument}' must be a finite number of seconds > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class _Deadline:
    """One wall clock for a whole call (setup, every seed, every replica count), created once at its start.

    ``end`` is a Unix time, so a worker process (or a machine of a cluster, its clock synchronized)
    reads the same deadline: each seed gets what is left of it, not a budget of its own.
    ``seconds`` is the call's ``time_limit``, for the messages.
    """

    end: float
    seconds: float

    @classmethod
    def start(cls, function: str, seconds: Any) -> _Deadline:
        seconds = _positive_seconds(function, "time_limit", seconds)
        return cls(time.time() + seconds, seconds)

    def left(self) -> float:
        """Seconds left (negative once it has passed)."""
        return self.end - time.time()

    def stopped(self) -> str:
        """What a run cut short by this deadline says (``truncated``)."""
        return f"stopped after {self.seconds:.3g} s of wall clock (time_limit)"


class _NoTimeLeftError(InputError):
    """The call's deadline passed before any seed could start (verify_plan stops its search on it)."""


def _seeds(seeds: int | Sequence[int], function: str = "simulate") -> tuple[int, ...]:
    """The seeds to run: ``range(seeds)`` for a count in [1, 1000], else the seeds listed (each a random seed)."""
    if not isinstance(seeds, bool) and isinstance(seeds, int | np.integer):
        if not 1 <= seeds <= 1000:
            raise InputError(f"{function}(): argument 'seeds' must be a count in [1, 1000] or a list, got {seeds!r}")
        return tuple(range(int(seeds)))
    if isinstance(seeds, str) or not isinstance(seeds, Sequence | np.ndarray):
        raise InputError(
            f"{function}(): argument 'seeds' must be a count in [1, 1000] or a list of seeds, got {shown(seeds)}"
        )
    out = tuple(seeds)
    if not out:
        raise InputError(f"{function}(): argument 'seeds' must name at least one seed")
    return tuple(random_seed(function, "seeds", s) for s in out)


def _process_pool(jobs: int) -> Executor:
    """The default executor: a process pool over this machine's cores (no more workers than jobs)."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=max(1, min(jobs, os.cpu_count() or 1)))
