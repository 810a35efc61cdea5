"""Execution modes and mode-K error texts (spec §8)."""

from __future__ import annotations

import contextlib
import re

import jax
import numpy as np
from jax import lax

# How a case is executed: as plain Python, traced by ``jax.jit``, traced as the body of a
# one-step ``lax.scan``, or with the jit+scan wrappers switched off by ``jax.disable_jit()``.
MODES = ("eager", "jit", "scan", "disable_jit")

# Runtime name of an array created with ``tensor_array_name="foo"`` through each API (a regex):
# raw arrays (``jta.raw_ops``) are ``foo_<n>``, ``jta.TensorArray`` is ``foo``.
NAMES = {"raw": r"foo_\d+", "ta": "foo"}


def _scan_once(fn, *args):
    """``fn(*args)`` as the body of a length-1 ``lax.scan`` whose carry holds ``args``."""
    _, out = lax.scan(lambda carry, _: (carry, fn(*carry)), args, None, length=1)
    return jax.tree_util.tree_map(lambda x: x[0], out)


def run(mode: str, fn, *args):
    """Run ``fn(*args)`` in ``mode`` (one of :data:`MODES`). ``args`` are traced outside eager
    mode, so pass data (values, traced indices) as arguments and keep static things
    (Python-int indices, sizes, dtypes) inside ``fn``."""
    if mode == "eager":
        return fn(*args)
    if mode == "jit":
        return jax.jit(fn)(*args)
    if mode == "scan":
        return _scan_once(fn, *args)
    assert mode == "disable_jit", mode
    with jax.disable_jit():
        return jax.jit(lambda *a: _scan_once(fn, *a))(*args)


def x64_if(dtype) -> contextlib.AbstractContextManager:
    """``jax.enable_x64`` for 64-bit dtypes (restored on exit), else nothing."""
    wide = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.complex128))
    return jax.enable_x64(True) if wide else contextlib.nullcontext()


def k_text(text: str, name: str = NAMES["raw"]) -> str:
    """An anchored regex for the exact text ``text``, where ``NAME`` stands for the array's
    runtime name (a regex, see :data:`NAMES`)."""
    # pytest matches the notes too: jta's note naming the array and source line of an error
    # from compiled code, and JAX's note on traceback filtering (errors raised while tracing).
    return "(?s)^" + re.escape(text).replace("NAME", name) + NOTE + r"(\n-+\nFor simplicity, JAX has removed .*)?\Z"


# The note (PEP 678) that jta adds to an error from compiled code, which pytest's ``match`` sees.
NOTE = r"(\nTensorArray '[^\n]*', at [^\n]*)?"
