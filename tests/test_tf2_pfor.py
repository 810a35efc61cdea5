"""Programs pfor vectorizes: ``tape.jacobian`` / ``batch_jacobian`` of loops (pfor vectorizes the
gradient loop, keeping a list of lists for each of the tape's accumulators: ``TensorListReserve`` of
variants, set in a ``while_init`` loop) and ``tf.vectorized_map`` of a loop that writes a
``TensorArray``: eagerly, under ``jit`` and ``jta.checked``, and ``jax.grad`` of them against the
tape's gradient of TensorFlow's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from tests.helpers import budget  # noqa: E402
from tests.test_tf2_import import _close  # noqa: E402

W = np.array([[0.3, -0.2, 0.1], [0.5, 0.4, -0.3], [-0.1, 0.2, 0.6]], np.float32)


def _rnn(w: Any, x: Any, steps: int) -> Any:
    h = tf.zeros([3])
    for i in tf.range(steps):
        h = tf.tanh(tf.linalg.matvec(w, h) + x[i])
    return h


def _program(kind: str, steps: int = 4) -> tuple[Any, Any]:
    w = tf.Variable(W, name="w")
    spec = [tf.TensorSpec([steps, 3], tf.float32)]

    @tf.function(input_signature=spec)
    def jacobian(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = _rnn(w, x, steps)
        return tape.jacobian(h, x)

    @tf.function(input_signature=spec)
    def of_variable(x: Any) -> Any:
        with tf.GradientTape() as tape:
            h = _rnn(w, x, steps)
        return tape.jacobian(h, w)

    @tf.function(input_signature=spec)
    def batch_jacobian(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            ta = tf.TensorArray(tf.float32, size=steps)
            h = tf.zeros([3])
            for i in tf.range(steps):
                h = tf.tanh(tf.linalg.matvec(w, h) * x[i])
                ta = ta.write(i, h)
            y = ta.stack()
        return tape.batch_jacobian(y, x)

    @tf.function(input_signature=spec)
    def to_a_tolerance(x: Any) -> Any:  # (the tape's accumulators have a run-time length)
        with tf.GradientTape() as tape:
            tape.watch(x)
            s, v, k = tf.reduce_sum(tf.abs(x)) * 0.01, tf.zeros([3]), 0
            while s < 1.0 and k < 50:
                v = v + tf.sin(x[0] * v + x[1]) * s
                s, k = s * 1.5 + 0.05, k + 1
        return tape.jacobian(v, x)

    @tf.function(input_signature=spec)
    def vectorized(x: Any) -> Any:
        wv = tf.convert_to_tensor(w)  # (a variable read inside fn makes pfor fall back to a loop of handles)

        def row(r: Any) -> Any:
            ta = tf.TensorArray(tf.float32, size=5)
            s = r
            for k in tf.range(5):
                s = tf.tanh(tf.linalg.matvec(wv, s) * 1.1)
                ta = ta.write(k, s)
            return ta.stack()
        return tf.vectorized_map(row, x)

    fns = {"jacobian": jacobian, "of_variable": of_variable, "batch_jacobian": batch_jacobian,
           "to_a_tolerance": to_a_tolerance, "vectorized": vectorized}
    return fns[kind], w


KINDS = ["jacobian", *(pytest.param(k, marks=pytest.mark.long_only)  # (4-15 s each; the first keeps the class)
                       for k in ("batch_jacobian", "of_variable", "to_a_tolerance", "vectorized"))]


@pytest.mark.parametrize("kind", KINDS)
def test_pfor_programs_run_and_jax_grad_is_the_tapes(kind: str) -> None:
    f, w = _program(kind)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    fn, params = jta.import_function(f, x)
    want = f(x)
    runs = [jta.checked(jax.jit(fn)) if kind == "to_a_tolerance" else jax.jit(fn)]
    for run in runs + ([fn] if budget.LONG else []):  # (an eager call runs op by op: seconds)
        _close(run(params, x), want)
    grads = jax.jit(jax.grad(lambda p, x: jnp.sum(jnp.sin(fn(p, x))), argnums=(0, 1)))(params, x)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        loss = tf.reduce_sum(tf.sin(f(xt)))
    gw, gx = tape.gradient(loss, [w, xt])
    _close(grads[1], gx)
    if gw is not None:
        _close(grads[0]["w"], gw)


@pytest.mark.long_only  # (about 5 s: 100 steps)
def test_a_jacobian_of_a_long_loop() -> None:
    f, _ = _program("jacobian", steps=100)
    x = np.random.default_rng(1).normal(size=(100, 3)).astype(np.float32) * 0.3
    fn, params = jta.import_function(f, x)
    _close(jax.jit(fn)(params, x), f(x))


@pytest.mark.long_only  # (about 9 s)
def test_a_keras_lstms_batch_jacobian() -> None:
    tf_keras = pytest.importorskip("tf_keras")
    tf_keras.utils.set_random_seed(0)
    layer = tf_keras.layers.LSTM(4, return_sequences=True)

    @tf.function(input_signature=[tf.TensorSpec([2, 5, 3], tf.float32)])
    def f(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return tape.batch_jacobian(y, x)

    x = np.random.default_rng(2).normal(size=(2, 5, 3)).astype(np.float32)
    fn, params = jta.import_function(f, x)
    _close(jax.jit(fn)(params, x), f(x))


def _loop(w: Any, h: Any) -> Any:
    return tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(tf.linalg.matvec(w, h))), (0, h))[1]


@pytest.mark.parametrize("kind", ["vectorized_map", "jacobian"])
def test_a_train_step_through_pfor_of_a_loop(kind: str) -> None:
    """A tape through ``tf.vectorized_map`` of a loop, and a second-order gradient through a pfor jacobian
    of a loop (red-team batch 16). pfor runs the loop's body in a cond, whose gradient gets the
    transposes' permutations as optionals that the loop accumulates: static in every branch that gives
    them, they stay static through the cond's ``lax.switch`` and the accumulator, so the gradient's
    transposes have static permutations under ``jit`` too. (The weights are an argument: pfor cannot
    read a variable inside ``vectorized_map``.)"""
    x = np.array([[0.3, -0.2, 0.5], [0.1, 0.4, -0.6]], np.float32)

    @tf.function
    def step(x: Any, w: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(w)
            if kind == "vectorized_map":
                loss = tf.reduce_sum(tf.vectorized_map(lambda r: _loop(w, r), x) ** 2)
            else:
                with tf.GradientTape() as inner:
                    inner.watch(x)
                    h = _loop(w, x[0])
                loss = tf.reduce_sum(inner.jacobian(h, x) ** 2)
        return loss, tape.gradient(loss, w)

    fn, params = jta.import_function(step, x, W)
    _close(jax.jit(fn)(params, x, W), step(x, W))
