"""Helpers shared by the conformance tests (spec §8): execution modes, K-mode error texts,
and a driver that exposes ``jta.raw_ops`` behind the ``tf.TensorArray`` method names."""

from __future__ import annotations

import contextlib
import re

import jax
import numpy as np
import pytest
from jax import lax

import jta
from jta import raw_ops as ops

# How a case is executed: as plain Python, traced by ``jax.jit``, traced as the body of a
# one-step ``lax.scan``, or with the jit+scan wrappers switched off by ``jax.disable_jit()``.
MODES = ("eager", "jit", "scan", "disable_jit")

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


def k_text(text: str, name: str = r"foo_\d+") -> str:
    """An anchored regex for the exact text ``text``, where ``NAME`` stands for the array's
    runtime name (a regex: raw arrays are ``foo_<n>``, ``jta.TensorArray`` is ``foo``)."""
    # JAX appends a note on traceback filtering to exceptions raised while tracing.
    return "(?s)^" + re.escape(text).replace("NAME", name) + r"(\n-+\nFor simplicity, JAX has removed .*)?\Z"


# Runtime name of an array created with ``tensor_array_name="foo"`` through each API.
NAMES = {"raw": r"foo_\d+", "ta": "foo"}


class RawTA:
    """Mode K's ``tf.TensorArray`` over ``jta.raw_ops``: one explicit state threaded through
    the raw ops in program order (as the flow chain orders a K graph). Mutators return
    ``self``, so code written for the functional ``jta.TensorArray`` (``ta = ta.write(...)``)
    runs unchanged; reads mark/clear slots as TF's kernels do.

    Like TF's Python layer, ``infer_shape`` becomes the kernel's ``identical_element_shapes``
    and ``stack``/``gather``/``concat`` pass the (kernel's) element shape as their attribute.
    """

    def __init__(self, dtype, size, dynamic_size=False, clear_after_read=True, tensor_array_name=None,
                 infer_shape=True, element_shape=None):
        self.dtype = dtype
        self.state, self.handle, self.flow = ops.TensorArrayV3(
            ops.new_state(), size, dtype, element_shape=element_shape, dynamic_size=dynamic_size,
            clear_after_read=clear_after_read, identical_element_shapes=infer_shape,
            tensor_array_name=tensor_array_name or "")

    @property
    def element_shape(self):
        return self.state[self.handle].element_shape

    def write(self, index, value):
        self.state, self.flow = ops.TensorArrayWriteV3(self.state, self.handle, index, value, self.flow)
        return self

    def read(self, index):
        self.state, value = ops.TensorArrayReadV3(self.state, self.handle, index, self.flow, self.dtype)
        return value

    def gather(self, indices):
        self.state, value = ops.TensorArrayGatherV3(self.state, self.handle, indices, self.flow, self.dtype,
                                                    element_shape=self.element_shape)
        return value

    def stack(self):
        # TF's Python layer gathers range(size()); the size is static here (also inside jit).
        return self.gather(np.arange(self.state[self.handle]._static_size("stack()")))

    def scatter(self, indices, value):
        self.state, self.flow = ops.TensorArrayScatterV3(self.state, self.handle, indices, value, self.flow)
        return self

    def unstack(self, value):
        return self.scatter(np.arange(np.shape(value)[0]), value)

    def concat(self):
        es = self.element_shape
        self.state, value, _ = ops.TensorArrayConcatV3(
            self.state, self.handle, self.flow, self.dtype,
            element_shape_except0=None if es is None else es[1:])
        return value

    def split(self, value, lengths):
        self.state, self.flow = ops.TensorArraySplitV3(self.state, self.handle, value, lengths, self.flow)
        return self

    def size(self):
        _, size = ops.TensorArraySizeV3(self.state, self.handle, self.flow)
        return size

    def close(self):
        self.state = ops.TensorArrayCloseV3(self.state, self.handle)
        return self


# The two APIs under test, by the ids used in parametrizations.
APIS = {"raw": RawTA, "ta": jta.TensorArray}


def pytree(x):
    """What a case returns from a traced function: a RawTA's state, else ``x`` itself."""
    return x.state if isinstance(x, RawTA) else x


def expect_error(mode, build, cls, pattern, *args):
    """``build(*args)`` (run in ``mode``) fails with ``cls`` and a message matching ``pattern``:
    at call/trace time, or (errors recorded inside jit/scan) when ``jta.throw`` sees the result."""
    with pytest.raises(cls, match=pattern):
        jta.throw(run(mode, lambda *a: pytree(build(*a)), *args))
