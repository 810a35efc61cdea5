"""The rule of ``tests/test_adversarial.py`` against live TensorFlow: for odd inputs, jta gives
TensorFlow's result or raises a jta error, ValueError or TypeError whose message names the problem.

TensorFlow runs in mode K (``tf.TensorArray`` in a ``tf.compat.v1`` graph, fetched with a
``Session``; raw ``TensorArrayGradWithShape`` for ``shape_to_prepend``), jta eagerly. Per input:
TF answers and jta answers -> the same value, dtype and shape; TF answers and jta refuses -> the
refusal must name the problem (jta may refuse TF's int32 truncations such as ``np.float32(1.5)``
as an index or ``2**40`` as a size); TF raises -> jta must raise (a value would be silent). The
judging is ``tests/test_adversarial.py``'s. Six probes (index of write, index of read, size,
value written, dtype, shape_to_prepend) draw 50 inputs each by default (500 under ``--long``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import jax.numpy as jnp  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.ops import gen_data_flow_ops  # noqa: E402

import jta  # noqa: E402
from jta import raw_ops as ops  # noqa: E402
from tests.helpers import k_graph  # noqa: E402
from tests.test_adversarial import SETTINGS, Outcome, attempt, case, judge, same  # noqa: E402

INDICES = [0, 1, 2, 3, -1, 2**31, 2**40, True, False, 1.0, 1.5, -0.5, 1j, "1", None, [1],
           np.int8(1), np.uint64(2), np.int64(2**40), np.float32(1.0), np.float32(1.5), np.float64(-0.5),
           np.float32(np.nan), np.bool_(True), np.complex64(1), np.array(1), np.array(1.5), np.array([1])]
SIZES = [0, 1, 3, True, False, 2.0, 2.5, "2", None, [2], np.int8(2), np.uint64(3), np.float32(2), np.float32(2.5),
         np.float64(0), np.float64(3), np.bool_(True), np.array(2), np.array(2.0), np.complex64(2), -1,
         np.float32(-1)]
VALUES = [None, object(), [1, None], [[1.0], [1.0, 2.0]], "x", 2**70, -2**70, 2**63, 2**40, 2**31, 300, -129,
          1e40, float("nan"), float("inf"), 1.5, True, 1 + 2j, np.float64(1e300), np.int64(2**40), np.uint8(200)]
VALUE_DTYPES = ["bool", "int8", "uint8", "int32", "float16", "float32", "complex64"]
DTYPES = [float, bool, int, complex, None, object, str, "float32", "int32", "bool", "foo", np.float32, np.int8,
          np.dtype("uint16"), np.complex64, np.float16]
PREPENDS = [[], [2], (2, 3), [0], [-1], [2.5], None, "2", [[2]], [True], np.array([2]), np.array([2.0]),
            np.array([2], np.int64)]

WORDS = {
    "write-index": ("index", "indices", "int32", "scalar", "rank"),
    "read-index": ("index", "indices", "int32", "scalar", "rank"),
    "size": ("size", "int32", "scalar"),
    "value": ("none", "convert", "dtype", "type", "shape", "sequence", "large", "overflow", "int"),
    "dtype": ("dtype", "type"),
    "shape_to_prepend": ("shape_to_prepend", "dimension", "shape", "int32", "vector"),
}


@contextlib.contextmanager
def quiet_tf() -> Iterator[None]:
    """TF logs an ERROR with a traceback for some dtype mismatches; the oracle only needs its answer."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def tf_k(body: Callable[[Any], Any]) -> Outcome:
    """``body(tf)`` built in a K graph and fetched with a ``Session``."""
    with quiet_tf(), k_graph() as graph:
        try:
            out = body(tf)
            with tf.compat.v1.Session(graph=graph) as sess:
                return Outcome(value=sess.run(out))
        except Exception as e:  # noqa: BLE001 - the oracle's answer
            return Outcome(error=e)


def make(lib: Any, dtype: Any, size: Any, **kw: Any) -> Any:
    if lib is tf:
        try:
            dtype = tf.as_dtype(np.dtype(dtype)) if isinstance(dtype, str) and dtype != "foo" else dtype
        except TypeError:
            pass
        return tf.TensorArray(dtype, size, **kw)
    return jta.TensorArray(dtype, size=size, **kw)


def program(probe: str, x: Any, dtype: str) -> Callable[[Any], Any]:
    """The same program for ``lib`` = ``tf`` (K graph) or ``jta`` (eager)."""
    if probe == "write-index":
        return lambda lib: make(lib, "float32", 3, element_shape=()).write(x, 7.0).stack()
    if probe == "read-index":
        return lambda lib: make(lib, "float32", 3, element_shape=()).unstack(np.array([10, 11, 12], np.float32)).read(x)
    if probe == "size":  # (size(), not stack(): TF's graph-mode stack() refuses NumPy float sizes)
        return lambda lib: make(lib, "float32", x, element_shape=()).size()
    if probe == "value":
        return lambda lib: make(lib, dtype, 1).write(0, x).stack()
    if probe == "dtype":
        return lambda lib: make(lib, x, 2, element_shape=()).stack()
    assert probe == "shape_to_prepend", probe

    def prepend(lib: Any) -> Any:
        if lib is tf:
            ta = tf.TensorArray(tf.float32, size=2, element_shape=())
            h, flow = gen_data_flow_ops.tensor_array_grad_with_shape(ta.handle, ta.flow, shape_to_prepend=x,
                                                                     source="gradients")
            return gen_data_flow_ops.tensor_array_gather_v3(h, [0, 1], flow, dtype=tf.float32)
        state, h, flow = ops.TensorArrayV3(ops.new_state(), 2, jnp.float32, element_shape=())
        state, g, flow = ops.TensorArrayGradWithShape(state, h, flow, x, "gradients")
        dims = tuple(int(d) for d in np.asarray(x).reshape(-1))
        return ops.TensorArrayGatherV3(state, g, [0, 1], flow, jnp.float32, element_shape=dims)[1]
    return prepend


POOLS = {"write-index": INDICES, "read-index": INDICES, "size": SIZES, "value": VALUES, "dtype": DTYPES,
         "shape_to_prepend": PREPENDS}


@pytest.mark.parametrize("probe", [
    case(p) for p in POOLS])
@pytest.mark.long
@SETTINGS
@given(data=st.data())
def test_odd_inputs_against_tensorflow(probe: str, data: Any) -> None:
    x = data.draw(st.sampled_from(POOLS[probe]), label="input")
    dtype = data.draw(st.sampled_from(VALUE_DTYPES), label="dtype") if probe == "value" else "float32"
    body = program(probe, x, dtype)
    want = tf_k(body)
    got = attempt(lambda: body(jta))
    what = f"{probe} {x!r}" + (f" into {dtype}" if probe == "value" else "") + f" (TensorFlow: {want})"
    unless = ("string",) if probe == "value" and not isinstance(x, str) else ()  # None is not a string
    if want.error is not None:
        judge(got, what, words=WORDS[probe], must_raise=True, unless=unless)
    elif judge(got, what, words=WORDS[probe], unless=unless) == "ok":
        same(got.value, want.value, what)
