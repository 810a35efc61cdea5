"""Slices whose bounds the data decides (``x[:n]``, ``x[n:]``, ``x[::-1, n::-2]``, ``ids[b, :lengths[b]]``;
red-team batch 20): under ``jta.checked`` the slice's length is learned at run time, forward, ``jax.grad``
and the imported train step (whose ``StridedSliceGrad`` has the same run-time bounds) giving TensorFlow's
values, also in a loop whose steps slice lengths of their own; a bare ``jit`` refuses, naming ``jta.checked``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402

X = np.arange(24, dtype=np.float32).reshape(4, 6) * 0.25 - 2.0

SLICES: dict[str, Callable[[Any, Any], Any]] = {
    "head": lambda x, n: x[:, :n],
    "tail": lambda x, n: x[n:],
    "from_the_end": lambda x, n: x[:, -n:],
    "reversed": lambda x, n: x[::-1, n::-2],
    "both_bounds": lambda x, n: x[n - 1:n + 1, 1:n + 2],
    "row_then_head": lambda x, n: x[n - 1, :n],
    "ellipsis_new_axis": lambda x, n: x[..., tf.newaxis, :n],
    "clamped": lambda x, n: x[:, :n * 10],
    "empty": lambda x, n: x[:, n:n - 1],
}
_DEFAULT = ("head", "reversed", "row_then_head")


def _train_step(f: Callable[[Any, Any], Any]) -> Any:
    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.sin(f(x, n)) * 3.0)
        return loss, tape.gradient(loss, x)
    return step


@pytest.mark.parametrize("name", [n if n in _DEFAULT else pytest.param(n, marks=pytest.mark.long_only) for n in SLICES])
def test_a_slice_of_run_time_bounds_is_learned_under_checked(name: str) -> None:
    f = tf.function(tf.autograph.experimental.do_not_convert(SLICES[name]))
    step = _train_step(f)
    for n in (np.int32(2), np.int32(3)):
        fn, params = jta.import_function(f, X, n)
        got = jta.checked(jax.jit(fn))(params, X, n)
        want = f(X, n).numpy()
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        loss, grad = step(X, n)
        g = jta.checked(jax.jit(jax.grad(lambda x: (jax.numpy.sin(fn(params, x, n)) * 3.0).sum())))(X)  # noqa: B023
        np.testing.assert_allclose(g, grad.numpy(), rtol=1e-6, atol=1e-6)
        step_fn, step_params = jta.import_function(step, X, n)
        for a, b in zip(jta.checked(jax.jit(step_fn))(step_params, X, n), (loss, grad), strict=True):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked") as info:
        jax.jit(fn)(params, X, n)
    assert GraphError.NOT_STATIC.matches(info.value)


def test_each_step_of_a_loop_slices_its_own_length() -> None:
    """The red team's pooling of ``ids[b, :lengths[b]]`` rows (a loop of a static trip count: unrolled, so
    that each step learns its own length); eagerly the loop runs step by step."""
    table = np.cos(np.arange(30, dtype=np.float32)).reshape(10, 3)

    @tf.function
    def pooled(ids: Any, lengths: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=tf.shape(ids)[0])
        for b in tf.range(tf.shape(ids)[0]):
            ta = ta.write(b, tf.reduce_mean(tf.gather(table, ids[b, :lengths[b]]), 0))
        return ta.stack()

    ids = np.array([[1, 4, 2, 9, 0], [3, 3, 7, 1, 5], [8, 0, 6, 2, 4]], np.int32)
    lengths = np.array([5, 2, 3], np.int32)
    fn, params = jta.import_function(pooled, ids, lengths)
    want = pooled(ids, lengths).numpy()
    np.testing.assert_allclose(fn(params, ids, lengths), want, rtol=1e-6)
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, ids, lengths), want, rtol=1e-6)
