"""A loop without a bound that grows a list inside a loop whose trip count the data decides (red-team
batch 16: an L-BFGS-style inner loop over ``tf.minimum(k, 3)`` history entries, in a train step whose tape
accumulates the inner lists). The outer loop sizes every step's buffers before it runs, so neither a bare
``jit`` nor ``jta.checked`` can: both refuse with code 486 (a bare ``jit`` raised JAX's ``IndexError``
from a buffer of no rows), naming the ways out, and those ways out run: an eager call, and the inner loop
over a static ``tf.range(3)`` with an ``if``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402

X = np.array([1.0, -2.0], np.float32)


def _train_step(static_inner: bool) -> Any:
    w = tf.Variable(np.float32(0.5), name="w")

    @tf.function
    def step(x: Any) -> Any:
        def body(k: Any, y: Any) -> Any:  # (defined here, so that autograph converts its loops)
            acc = tf.zeros_like(y)
            if static_inner:
                for j in tf.range(3):
                    if j < k:
                        acc = acc + tf.sin(y * w + tf.cast(j, tf.float32))
            else:
                for j in tf.range(tf.minimum(k, 3)):
                    acc = acc + tf.sin(y * w + tf.cast(j, tf.float32))
            return k + 1, y * 0.5 + 0.1 * acc * y

        with tf.GradientTape() as tape:
            k, y = tf.while_loop(lambda k, y: tf.reduce_max(tf.abs(y)) > 1e-3, body, (0, x))
            loss = tf.reduce_sum(y)
        return loss, tape.gradient(loss, w), k

    return step


def _close(got: Any, want: Any) -> None:
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-5, atol=1e-7)


def test_an_unbounded_loop_growing_lists_in_a_data_dependent_loop_is_refused_naming_what_runs():
    step = _train_step(static_inner=False)
    want = step(X)
    fn, params = jta.import_function(step, X)
    _close(fn(params, X), want)  # eagerly: step by step
    for run in (jax.jit(fn), jta.checked(jax.jit(fn))):
        with pytest.raises(jta.errors.UnimplementedError, match="give this loop a static bound") as info:
            run(params, X)
        assert GraphError.NESTED_GROWTH.matches(info.value)


def test_the_inner_loop_over_a_static_range_runs_under_jit():
    step = _train_step(static_inner=True)
    want = step(X)
    fn, params = jta.import_function(step, X)
    _close(jax.jit(fn)(params, X), want)
    _close(jta.checked(jax.jit(fn))(params, X), want)
