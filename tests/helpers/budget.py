"""How big the statistical runs are: default counts, larger ones under ``pytest --long``.

``tests/conftest.py`` sets :data:`LONG` from the ``--long`` option before collection, so test
modules may size their parametrizations at import time with :func:`scaled`."""

from __future__ import annotations

LONG = False  # set by tests/conftest.py (pytest_configure) from --long


def long_run() -> bool:
    """Whether this session runs the long versions (``pytest --long``)."""
    return LONG


def scaled(default: int, long: int) -> int:
    """``long`` under ``--long``, else ``default``."""
    return long if LONG else default
