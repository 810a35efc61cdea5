"""Variables a ``tf.function`` assigns (``assign``, ``assign_add``, ``assign_sub``): the imported function
computes with the new values as TensorFlow does (a read after an assignment sees it), and with
``with_updates=True`` returns ``(outputs, new_params)``; without it the import warns that the new values
are not returned. A batch norm's moving statistics in a train step, a Keras 3 dropout's seed generator
(its masks are TensorFlow's, call after call), and variables assigned in loops (loop variables) and in
run-time conds' branches (outputs of the ``lax.switch``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.test_tf2_import import _close  # noqa: E402


def _train_step(model: Any, shape: list[int]) -> Any:
    """A train step of ``model`` in training mode: the loss and its tape gradients."""
    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x, training=True) ** 2)
        return loss, tape.gradient(loss, model.trainable_variables)
    return step


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
    step = _train_step(model, [5, 3])
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    fn, params = jta.import_function(step, x, with_updates=True)
    out, new = jax.jit(fn)(params, x)
    _close(out, step(x))
    stats = {v.name[:-2]: v.numpy() for v in model.variables if "moving" in v.name}
    assert sorted(k for k in new if not np.array_equal(new[k], params[k])) == sorted(stats)
    for k, want in stats.items():
        np.testing.assert_allclose(new[k], want, rtol=1e-6)


@pytest.mark.long_only  # (3 s; the batch norm keeps the class by default)
def test_a_keras_3_dropout_draws_tensorflows_masks_call_after_call() -> None:
    keras = pytest.importorskip("keras")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras 3 runs on another backend")
    model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(8), keras.layers.Dropout(0.5),
                              keras.layers.Dense(1)])
    step = _train_step(model, [3, 5])
    x = np.random.default_rng(1).normal(size=(3, 5)).astype(np.float32)
    fn, params = jta.import_function(step, x, with_updates=True)
    run = jax.jit(fn)
    for _ in range(2):  # (the seed generator's state advances, in TensorFlow and in params)
        out, params = run(params, x)
        _close(out, step(x))


@pytest.mark.parametrize("loop", [pytest.param("static", marks=pytest.mark.long_only), "bounded",
                                  pytest.param("unbounded", marks=pytest.mark.long_only)])  # (a cond in a loop)
def test_a_loop_carries_the_variables_it_assigns(loop: str) -> None:
    """Running statistics updated in a loop (a scan of a static trip count, a bounded one with an early
    exit, a jta.while_loop): the variables are loop variables, eagerly and under jit, and jax.grad of the
    outputs is the tape's (a read is the variable's, never the assignment's)."""
    total = tf.Variable(np.float32(0.0), name="total")
    mean = tf.Variable(np.zeros(2, np.float32), name="mean")

    @tf.function(input_signature=[tf.TensorSpec([4, 2], tf.float32)])
    def f(x: Any) -> Any:
        if loop == "unbounded":
            i = tf.constant(0)
            while tf.reduce_sum(mean) < 2.0 and i < 4:
                mean.assign(0.5 * mean + x[i])
                total.assign_add(tf.reduce_sum(x[i] * mean))
                i += 1
        else:
            for i in tf.range(4):
                if loop == "bounded" and tf.reduce_sum(mean) > 2.0:
                    break
                mean.assign(0.5 * mean + x[i])
                total.assign_add(tf.reduce_sum(x[i] * mean))
        return total * 2.0, mean.read_value()

    x = np.abs(np.random.default_rng(2).normal(size=(4, 2))).astype(np.float32)
    fn, params = jta.import_function(f, x, with_updates=True)
    for run in (fn, jax.jit(fn)):
        out, new = run(params, x)
        total.assign(0.0), mean.assign(np.zeros(2, np.float32))
        _close(out, f(x))
        np.testing.assert_allclose(new["total"], total.numpy(), rtol=1e-6)
    with tf.GradientTape() as tape:  # (no gradient through an assignment: total's reads are the variable's)
        xv = tf.constant(x)
        tape.watch(xv)
        loss = f(xv)[0]
    want = tape.gradient(loss, [total, mean, xv], unconnected_gradients="zero")
    got = jax.grad(lambda p, v: fn(p, v)[0][0], argnums=(0, 1))(params, x)
    for g, w in zip((got[0]["total"], got[0]["mean"], got[1]), want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6)


def test_a_run_time_cond_outputs_the_variables_its_branches_assign() -> None:
    v = tf.Variable(np.float32(1.0), name="v")

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x: Any) -> Any:
        if tf.reduce_sum(x) > 0:
            v.assign_add(x[0])
        else:
            v.assign(v * x[1])
        return v * 2.0

    fn, params = jta.import_function(f, np.ones(3, np.float32), with_updates=True)
    run = jax.jit(fn)
    for x in (np.array([2.0, 3.0, 1.0], np.float32), np.array([-2.0, 3.0, -1.0], np.float32)):
        out, new = run(params, x)
        v.assign(1.0)
        _close(out, f(x))
        np.testing.assert_allclose(new["v"], v.numpy())


def test_jax_grad_differentiates_no_assignment() -> None:
    """TensorFlow's tape differentiates no assignment: a read after one is a read of the variable, whose
    gradient sums over its reads (spectral normalization assigns the kernel it then uses). ``jax.grad``
    chained through the assignments."""
    v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")

    def body(x: Any) -> Any:
        v.assign(v * 0.5 + x)
        a = v.read_value()
        v.assign_add(a)
        return tf.reduce_sum(v * x) + tf.reduce_sum(a)

    f = tf.function(body, input_signature=[tf.TensorSpec([2], tf.float32)])
    x = np.array([0.3, -0.2], np.float32)
    fn, params = jta.import_function(f, x, with_updates=True)
    start = v.numpy()
    with tf.GradientTape() as tape:
        xv = tf.constant(x)
        tape.watch(xv)
        loss = body(xv)
    want = tape.gradient(loss, [v, xv])
    v.assign(start)
    got = jax.grad(lambda p, u: fn(p, u)[0], argnums=(0, 1))(params, x)
    np.testing.assert_allclose(got[0]["v"], want[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1].numpy(), rtol=1e-6)


@pytest.mark.parametrize("kind", ["cond", *(pytest.param(k, marks=pytest.mark.long_only)
                                           for k in ("switch", "inner_function"))])
def test_assignments_in_a_function_without_outputs_run(kind: str) -> None:
    """A cond's branches, a switch's, or an inner ``tf.function`` that assign and return nothing (a loss
    scale's cond around an optimizer's update): the assignments are the function's control outputs, which
    run though no output needs them; an assertion among them too."""
    v = tf.Variable(np.float32(1.0), name="v")

    def add(x: Any) -> None:
        v.assign_add(x)
        tf.debugging.assert_less(x, 10.0)

    inner = tf.function(add)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def f(x: Any) -> Any:
        if kind == "cond":
            tf.cond(x > 0, lambda: add(x), lambda: None)
        elif kind == "switch":
            tf.switch_case(tf.cast(x > 0, tf.int32), [lambda: None, lambda: add(x)])
        else:
            inner(x)
        return x * 2

    fn, params = jta.import_function(f, np.float32(2.0), with_updates=True)
    run = jax.jit(fn)
    for x in (np.float32(2.0), np.float32(-1.0)):
        start = v.numpy()
        _, new = run({"v": start}, x)
        f(x)
        np.testing.assert_allclose(new["v"], v.numpy())
    with pytest.raises(jta.errors.InvalidArgumentError):
        fn({"v": v.numpy()}, np.float32(20.0))


def test_an_optimizer_whose_variable_the_function_does_not_list_updates_it() -> None:
    """A ``tf_keras`` legacy ``RMSprop.apply_gradients`` in the train step (red-team batch 21): its
    ``iterations`` variable, made while TensorFlow first traced the function, is captured but missing from
    the function's variables, and was refused as 'neither a variable nor a tensor of known value'; it is
    found among the objects the function reaches, and two steps update every variable as TensorFlow's."""
    tf_keras = pytest.importorskip("tf_keras")
    model = tf_keras.Sequential([tf_keras.layers.Dense(3, input_shape=(4,))])
    optimizer = tf_keras.optimizers.legacy.RMSprop(0.01)

    @tf.function(input_signature=[tf.TensorSpec([8, 4], tf.float32)])
    def step(x: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - 1.0) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables,
                                      strict=True))
        return loss

    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    fn, params = jta.import_function(step, x, with_updates=True)
    assert any("iter" in k for k in params)
    for _ in range(2):
        loss, params = jax.jit(fn)(params, x)
        np.testing.assert_allclose(loss, step(x).numpy(), rtol=1e-5)
    for v in optimizer.variables():
        np.testing.assert_allclose(params[v.name[:-2]], v.numpy(), rtol=1e-5)
