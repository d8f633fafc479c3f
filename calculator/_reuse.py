"""Values the points of one study share, computed once: :func:`reusing` opens the scope, :func:`shared` reads it.

A sweep sizes hundreds of points that differ in their rate, lengths or targets but not in their model,
accelerator, precision, engine or registry, so each point would rebuild the same step arrays and
price the same candidate grid. Inside ``with reusing():`` (:func:`~calculator.sweeps.sweep_fleet`
opens one) :func:`shared` keeps what it computed under its key, the least recently used beyond
``size`` entries dropped; outside any scope it just computes. The scope lives in a context variable:
a thread (or a worker process) that did not open one computes everything afresh.

Keys are tuples of values compared by value (ids, precisions, floats, the bytes of a grid) and of
objects compared by identity (:class:`Same`: a registry, a model or an engine profile given by the
caller, which compare equal to nothing else, so a user's registry entry never takes the packaged
one's place). A key holds its objects, so none is freed and its ``id`` reused while the scope lasts;
the scope is one call, during which the caller's objects do not change.

Examples
--------
>>> calls = []
>>> with reusing():
...     first = shared(("square", 3), lambda: calls.append(3) or 9)
...     again = shared(("square", 3), lambda: calls.append(3) or 9)
>>> first, again, calls
(9, 9, [3])
>>> shared(("square", 3), lambda: calls.append(3) or 9), calls  # no scope: computed again
(9, [3, 3])
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["DEFAULT_SIZE", "Same", "reusing", "shared"]

_T = TypeVar("_T")

#: Entries a scope keeps (the most recently used). A sweep's points share a handful: the step arrays
#: and the priced grid of each (accelerator, precision) family, at the plan and at the ends of its
#: error interval.
DEFAULT_SIZE = 256


class Same:
    """A key part that is one object: equal only to itself, hashed by identity (it holds the object)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value

    def __repr__(self) -> str:
        return f"Same({type(self.value).__name__} at {id(self.value):#x})"


class _Scope:
    """The entries of one scope, least recently used first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], _T]) -> _T:
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]  # type: ignore[no-any-return]
        value = make()
        self.entries[key] = value
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value


_SCOPE: ContextVar[_Scope | None] = ContextVar("calculator_reuse", default=None)


@contextlib.contextmanager
def reusing(size: int = DEFAULT_SIZE) -> Iterator[None]:
    """A scope in which :func:`shared` keeps up to ``size`` values (a scope already open is kept)."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set(_Scope(size))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def shared(key: Hashable, make: Callable[[], _T]) -> _T:
    """``make()``, computed once per ``key`` in the open scope (every time outside one)."""
    scope = _SCOPE.get()
    return make() if scope is None else scope.get(key, make)
