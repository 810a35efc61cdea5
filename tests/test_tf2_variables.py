"""Variables a ``tf.function`` assigns (``assign``, ``assign_add``, ``assign_sub``): the imported function
computes with the new values as TensorFlow does (a read after an assignment sees it), and with
``with_updates=True`` returns ``(outputs, new_params)``; without it the import warns that the new values
are not returned. A batch norm's moving statistics in a train step, a Keras 3 dropout's seed generator
(its masks are TensorFlow's, call after call), and an assignment inside a loop (refused)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.test_tf2_import import _close  # noqa: E402


def test_reads_see_the_assignments_before_them() -> None:
    v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
    u = tf.Variable(np.float32(3.0), name="u")

    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def f(x: Any) -> Any:
        before = v * 1.0
        v.assign_add(x)
        middle = v * u
        v.assign_sub(x * 0.5)
        u.assign(tf.reduce_sum(v))
        return before, middle, v * u

    x = np.array([0.5, -1.0], np.float32)
    fn, params = jta.import_function(f, x, with_updates=True)
    with pytest.warns(UserWarning, match="with_updates=True"):
        plain, _ = jta.import_function(f, x)
    start = {k: np.asarray(p) for k, p in params.items()}
    for run in (fn, jax.jit(fn)):
        out, new = run(params, x)
        np.testing.assert_allclose(plain(params, x)[2], out[2])
        v.assign(start["v"]), u.assign(start["u"])
        _close(out, f(x))
        assert sorted(new) == ["u", "v"] and np.allclose(new["v"], v.numpy()) and np.allclose(new["u"], u.numpy())
        assert np.array_equal(params["v"], start["v"])  # (the params given are left alone)


def test_a_batch_norm_train_step_updates_its_moving_statistics() -> None:
    tf_keras = pytest.importorskip("tf_keras")
    model = tf_keras.Sequential([tf_keras.layers.Dense(4), tf_keras.layers.BatchNormalization(),
                                 tf_keras.layers.Dense(1)])
    model.build((None, 3))

    @tf.function(input_signature=[tf.TensorSpec([5, 3], tf.float32)])
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x, training=True) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    fn, params = jta.import_function(step, x, with_updates=True)
    out, new = jax.jit(fn)(params, x)
    _close(out, step(x))
    stats = {v.name[:-2]: v.numpy() for v in model.variables if "moving" in v.name}
    assert sorted(k for k in new if not np.array_equal(new[k], params[k])) == sorted(stats)
    for k, want in stats.items():
        np.testing.assert_allclose(new[k], want, rtol=1e-6)


def test_a_keras_3_dropout_draws_tensorflows_masks_call_after_call() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras 3 runs on another backend")
    model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(8), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])

    @tf.function(input_signature=[tf.TensorSpec([3, 5], tf.float32)])
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x, training=True) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)

    x = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    fn, params = jta.import_function(step, x, with_updates=True)
    run = jax.jit(fn)
    for _ in range(2):  # (the seed generator's state advances, in TensorFlow and in params)
        out, params = run(params, x)
        _close(out, step(x))


def test_an_assignment_inside_a_loop_is_refused() -> None:
    v = tf.Variable(np.float32(0.0), name="v")

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x: Any) -> Any:
        for i in tf.range(3):
            v.assign_add(x[i])
        return v * 2.0

    x = np.ones(3, np.float32)
    fn, params = jta.import_function(f, x, with_updates=True)
    with pytest.raises(jta.errors.UnimplementedError, match="assigned inside a loop's body"):
        fn(params, x)
