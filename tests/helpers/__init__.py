"""Helpers shared by the test modules (import as ``from tests.helpers import ...``).

* :mod:`.modes` — execution modes (``MODES``, ``run``), ``x64_if``, mode-K error texts
  (``k_text``, ``NAMES``);
* :mod:`.drivers` — the raw-op driver ``Raw``, the ``jta.gradients`` driver ``Rules``
  (``BACKENDS``), the ``tf.TensorArray`` view ``RawTA`` (``APIS``), ``pytree``, ``with_backend``;
* :mod:`.errors` — ``expect_error``;
* :mod:`.compare` — ``assert_close``, ``max_abs_diff``;
* :mod:`.budget` — ``scaled``/``long_run``: counts for ``pytest --long``;
* :mod:`.tfgraph` — ``k_graph`` (TensorFlow's mode K);
* :mod:`.internals` — every access to jta's private names (import it explicitly).

The names below are loaded on first use, so ``tests/conftest.py`` can import
``tests.helpers.budget`` without importing jax or jta.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "long_run": "budget", "scaled": "budget",
    "assert_close": "compare", "max_abs_diff": "compare",
    "APIS": "drivers", "BACKENDS": "drivers", "SOURCE": "drivers", "Raw": "drivers", "RawTA": "drivers",
    "Rules": "drivers", "TensorArrayView": "drivers", "f32": "drivers", "pytree": "drivers",
    "with_backend": "drivers",
    "expect_error": "errors",
    "MODES": "modes", "NAMES": "modes", "k_text": "modes", "run": "modes", "x64_if": "modes",
    "k_graph": "tfgraph",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
