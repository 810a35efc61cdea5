"""A loop without a bound that grows lists inside a loop whose trip count the data decides (red-team
batch 16: an L-BFGS-style inner loop over ``tf.minimum(k, 3)`` history entries, in a train step whose tape
accumulates the inner lists; an inner solver writing the outer loop's TensorArray).

The outer loop's body is traced several times before it runs (abstract steps that size its carry), and
the inner loop asks ``jta.checked``'s plan for its rows at each: it keeps one plan number however often
it is traced, so the buffers of the abstract steps are those of the run. A list of the outer loop's carry
keeps the outer loop's buffer and plan. Under a bare ``jit`` each gets 256 rows, and a run past them fails
from compiled code naming ``jta.checked``; under ``jta.checked`` the plan grows and the run is TensorFlow's.
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


def _close(got: Any, want: Any) -> None:
    got, want = jax.tree_util.tree_leaves(got), [np.asarray(w) for w in tf.nest.flatten(want)]
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), b, rtol=2e-5, atol=1e-6)


def _solver(w: Any) -> Any:
    """An outer loop to a tolerance, whose body runs ``n`` inner steps (no static bound)."""
    def forward(x: Any, n: Any) -> Any:
        def body(k: Any, y: Any) -> Any:  # (defined here, so that autograph converts its loops)
            acc = tf.zeros_like(y)
            for j in tf.range(n):
                acc = acc + tf.sin(y * w + tf.cast(j, tf.float32) * 1e-3)
            return k + 1, y * 0.5 + 1e-3 * acc * y

        k, y = tf.while_loop(lambda k, y: tf.reduce_max(tf.abs(y)) > 1e-2, body, (0, x))
        return y, k
    return forward


def _writer(w: Any) -> Any:
    """An inner loop without a bound writing the outer loop's dynamic_size TensorArray."""
    def forward(x: Any, n: Any) -> Any:
        acc = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(k: Any, c: Any, s: Any, acc: Any) -> Any:
            def inner(j: Any, c: Any, s: Any, acc: Any) -> Any:
                s = s * w
                return j + 1, c + 1, s, acc.write(c, tf.reduce_sum(s))

            _, c, s, acc = tf.while_loop(lambda j, c, s, acc: j < n + k, inner, (0, c, s, acc))
            return k + 1, c, s * 0.5, acc

        k, c, s, acc = tf.while_loop(lambda k, c, s, a: tf.reduce_max(tf.abs(s)) > 0.05, body, (0, 0, x, acc))
        return acc.stack(), k
    return forward


def _programs(build: Any) -> tuple[Any, Any, Any]:
    w = tf.Variable(np.float32(0.9), name="w")
    forward = tf.function(build(w))

    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            out, k = forward(x, n)
            loss = tf.reduce_sum(out) + 0.5 * tf.reduce_sum(out ** 2)
        return loss, tape.gradient(loss, [w, x]), k

    return w, forward, step


@pytest.mark.parametrize("n", [5, pytest.param(300, marks=pytest.mark.long_only)])
def test_an_inner_loop_without_a_bound_in_a_data_dependent_loop(n: int) -> None:
    """Forward and train step under jit (n=5) and jta.checked (n=300 needs more than the 256 rows an
    inner list starts with: the plan grows), and jax.grad of the forward against the tape."""
    w, forward, step = _programs(_solver)
    args = (X, np.int32(n))
    for program in (forward, step):
        fn, params = jta.import_function(program, *args)
        _close(jta.checked(jax.jit(fn))(params, *args), program(*args))
        if n < 256:
            _close(jax.jit(fn)(params, *args), program(*args))
    fn, params = jta.import_function(forward, *args)
    grad = jta.checked(jax.jit(jax.grad(lambda p: fn(p, *args)[0].sum())))(params)
    with tf.GradientTape() as tape:
        want = tape.gradient(tf.reduce_sum(forward(*args)[0]), w)
    np.testing.assert_allclose(grad["w"], want.numpy(), rtol=2e-5)


@pytest.mark.long_only
def test_a_bare_jit_fails_past_its_rows_naming_jta_checked() -> None:
    _, _, step = _programs(_solver)
    args = (X, np.int32(300))
    fn, params = jta.import_function(step, *args)
    with pytest.raises(Exception, match="through jta.checked") as info:
        jax.block_until_ready(jax.jit(fn)(params, *args))
    assert "grows the list past the 256 elements" in str(info.value)


def test_an_inner_loop_writing_the_outer_loops_tensor_array() -> None:
    """The outer loop's TensorArray keeps the outer loop's buffer inside the inner loop: its stack has
    TensorFlow's shape under jta.checked (forward and train step); a bare jit refuses the stack (438)."""
    _, forward, step = _programs(_writer)
    args = (X, np.int32(3))
    for program in (forward, step):
        fn, params = jta.import_function(program, *args)
        _close(jta.checked(jax.jit(fn))(params, *args), program(*args))
    with pytest.raises(jta.errors.UnimplementedError) as info:
        jax.jit(fn)(params, *args)
    assert GraphError.PADDED_STACK.matches(info.value)


def _history_step(static_inner: bool) -> Any:
    w = tf.Variable(np.float32(0.5), name="w")

    @tf.function
    def step(x: Any) -> Any:
        def body(k: Any, y: Any) -> Any:
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


@pytest.mark.parametrize("static_inner", [False, pytest.param(True, marks=pytest.mark.long_only)])  # (False: the class)
def test_the_l_bfgs_history_loop_in_a_train_step(static_inner: bool) -> None:
    """The inner loop over ``tf.minimum(k, 3)`` entries, as batch 16 found it (a bare jit crashed with
    JAX's IndexError, jta.checked refused), and over a static ``tf.range(3)`` with an ``if``."""
    step = _history_step(static_inner)
    want = step(X)
    fn, params = jta.import_function(step, X)
    _close(jax.jit(fn)(params, X), want)
    _close(jta.checked(jax.jit(fn))(params, X), want)
