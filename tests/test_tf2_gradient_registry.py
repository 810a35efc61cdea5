"""``jax.grad`` of an import goes through an op as TensorFlow's gradient registry says
(:mod:`jta.graph_import._no_gradient`): no gradient through a ``NotDifferentiable`` op, TensorFlow's
``LookupError`` where the registry has no entry and a gradient reaches the op, and nothing where it
does not (an op's integer output feeding a gather)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._no_gradient import NOT_DIFFERENTIABLE, UNREGISTERED  # noqa: E402
from jta.graph_import._ops import OPS  # noqa: E402
from jta.graph_import._random_kernels import KERNEL_OPS  # noqa: E402
from tests.test_tf2_import import _close  # noqa: E402


def test_the_sets_are_tensorflows_registry() -> None:
    """Every op of jta's table (and every random kernel) that TensorFlow registers as not
    differentiable, or not at all, is in the set that says so, and no other op is."""
    from tensorflow.python.framework import ops

    none, missing = set(), set()
    for op in {*OPS, *KERNEL_OPS}:
        try:
            if ops._gradient_registry.lookup(op) is None:
                none.add(op)
        except LookupError:
            missing.add(op)
    assert none == NOT_DIFFERENTIABLE & {*OPS, *KERNEL_OPS}
    assert missing == UNREGISTERED & {*OPS, *KERNEL_OPS}


def _grads(f: Any, *args: Any) -> tuple[Any, Any]:
    """``jax.grad`` of ``sum(f)`` of the import (under ``jta.checked(jit)``: sizes the data decides are
    learned) and TensorFlow's tape gradient."""
    fn, params = jta.import_function(f, *args)
    mine = jta.checked(jax.jit(jax.grad(lambda *a: jnp.sum(fn(params, *a)), argnums=tuple(range(len(args))))))(*args)
    xs = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = tf.reduce_sum(f(*xs))
    want = [np.zeros_like(a) if g is None else tf.convert_to_tensor(g)  # (a gather's IndexedSlices)
            for g, a in zip(tape.gradient(y, xs), args, strict=True)]
    return mine, want


@pytest.mark.filterwarnings("ignore:.*steps random generators")
@pytest.mark.parametrize("case", ["one_hot", "hsv_to_rgb", "shuffle"])
def test_no_gradient_through_a_not_differentiable_op(case: str) -> None:
    fns = {
        "one_hot": (lambda on, x: tf.one_hot([0, 2, 1], 3, on_value=on, off_value=-on) * x, (np.float32(2.0),
                                                                                           np.ones(3, np.float32))),
        "hsv_to_rgb": (lambda hsv, x: tf.image.hsv_to_rgb(hsv) * x,
                       (np.array([[0.2, 0.5, 0.7]], np.float32), np.float32(2.0))),
        "shuffle": (lambda v, x: tf.random.shuffle(v, seed=2) * x, (np.arange(4, dtype=np.float32), np.float32(3.0))),
    }
    body, args = fns[case]
    f = tf.function(body, input_signature=[tf.TensorSpec(np.shape(a), tf.float32) for a in args])
    mine, want = _grads(f, *args)
    assert not np.any(np.asarray(mine[0]))
    _close(list(mine), want)


def test_a_gradient_reaching_an_unregistered_op_raises_tensorflows_lookup_error() -> None:
    f = tf.function(lambda x: tf.unique(x)[0] * 2.0, input_signature=[tf.TensorSpec([5], tf.float32)])
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0], np.float32)
    fn, params = jta.import_function(f, x)
    with pytest.raises(LookupError, match="gradient registry has no entry for: Unique"):
        jta.checked(jax.jit(jax.grad(lambda x: jnp.sum(fn(params, x)))))(x)

    @tf.function(input_signature=[tf.TensorSpec([5], tf.float32), tf.TensorSpec([3], tf.float32)])
    def dedup(x: Any, table: Any) -> Any:  # (only the integer output is used: no gradient reaches Unique)
        return tf.gather(table, tf.unique(x)[1]) * x

    mine, want = _grads(dedup, x, np.array([0.5, 2.0, -1.0], np.float32))
    _close(list(mine), want)
