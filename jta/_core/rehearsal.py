"""Runs whose results are thrown away, and the host effects they must not have.

Eager reverse mode through a loop without a bound runs the loop once to count its steps (its stacks
then need exactly that many rows, as TensorFlow's eager tape's do), then again filling them. The
program ran once as far as its user can tell: a ``tf.print`` in the body prints at the second run
only. An effect that only writes to the host (no output the program reads) asks :func:`rehearsing`
when it runs, and stays silent during a :func:`rehearsal`.

A plain counter, not a context variable: the host callbacks run on XLA's threads, and the runs
they belong to finish (their results are read) before the rehearsal ends.

    >>> from jta._core.rehearsal import rehearsal, rehearsing
    >>> with rehearsal():
    ...     rehearsing()
    True
    >>> rehearsing()
    False
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["rehearsal", "rehearsing"]

_LOCK = threading.Lock()
_DEPTH = 0


@contextlib.contextmanager
def rehearsal() -> Iterator[None]:
    """Within it, :func:`rehearsing` is true: the code run here runs again for its results."""
    global _DEPTH
    with _LOCK:
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1


def rehearsing() -> bool:
    """Whether a run whose results are thrown away is going on (its host writes stay silent)."""
    return _DEPTH > 0
