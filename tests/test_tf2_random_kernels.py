"""Stateful random ops (``tf.random.uniform`` / ``normal`` / ``truncated_normal`` / ``categorical`` /
``shuffle``, integer ``uniform``, tf_keras ``Dropout`` and ``GaussianNoise`` in training): each kernel's generator is
state in ``params`` (``"random:..."``), drawn from and stepped as TensorFlow's kernel does, so that with
``tf.random.set_seed`` the imported function draws TensorFlow's values call after call: eagerly, under
``jit``, in loops (carried) and in run-time conds' branches (output), and in a train step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.test_tf2_import import _close  # noqa: E402


def _calls(make: Any, args: tuple[Any, ...], calls: int = 2, modes: tuple[str, ...] = ("eager", "jit")) -> None:
    """``make()`` (a new ``tf.function``, made after ``tf.random.set_seed``) imported and called ``calls``
    times threading ``params``, against a fresh TensorFlow function called as often."""
    tf.random.set_seed(11)
    fn, params = jta.import_function(make(), *args, with_updates=True)
    for mode in modes:
        run = {"eager": fn, "jit": jax.jit(fn), "checked": jta.checked(jax.jit(fn))}[mode]
        tf.random.set_seed(11)
        reference, p = make(), dict(params)
        for _ in range(calls):
            out, p = run(p, *args)
            _close(out, reference(*args))


def test_each_op_draws_tensorflows_values_call_after_call() -> None:
    def make() -> Any:
        @tf.function
        def f(x: Any) -> Any:
            return (tf.random.uniform([5]) * x, tf.random.normal([3, 3], dtype=tf.float64),
                    tf.random.truncated_normal([7]), tf.random.uniform([4], -3, 10, tf.int32),
                    tf.random.categorical(tf.math.log([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]), 5),
                    tf.random.uniform([0, 2]), tf.random.shuffle(tf.range(1000)),
                    tf.random.shuffle(tf.reshape(tf.range(12.0), [6, 2]) * x, seed=4))
        return f

    _calls(make, (np.float32(2.0),), calls=3)
    tf.random.set_seed(11)
    _, params = jta.import_function(make(), np.float32(2.0), with_updates=True)
    assert all(k.startswith("random:") and v.dtype == np.uint32 and v.shape == (6,) for k, v in params.items())
    assert len(params) == 8


@pytest.mark.parametrize("loop", [*(pytest.param(k, marks=pytest.mark.long_only) for k in ("static", "bounded")),
                                  "unbounded"])  # (the carry is the same in the three loop forms)
def test_a_loop_carries_the_generators_it_steps(loop: str) -> None:
    """A draw in a loop's body: the scan (static trip count), a bounded loop with an early exit, a
    tolerance loop (``jta.while_loop``); the generator steps once a step, in the loop and after it."""
    def make() -> Any:
        @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
        def f(x: Any) -> Any:
            s = tf.zeros([2])
            if loop == "unbounded":
                while tf.reduce_sum(s) < x[0]:
                    s += tf.random.uniform([2])
            else:
                for _ in tf.range(5):
                    s += tf.random.normal([2]) * x
                    if loop == "bounded" and tf.reduce_sum(s) > x[1]:
                        break
            return s, tf.random.uniform([3])
        return f

    _calls(make, (np.array([4.0, 1.5], np.float32),), modes=("eager", "jit", "checked"))


def test_a_run_time_conds_branch_outputs_its_generator() -> None:
    def make() -> Any:
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def f(x: Any) -> Any:
            y = tf.cond(x > 0, lambda: tf.random.uniform([3]), lambda: -tf.random.normal([3]))
            return y, tf.random.uniform([2])
        return f

    for x in (np.float32(1.0), np.float32(-1.0)):
        _calls(make, (x,), calls=3)


def test_a_keras_train_step_with_dropout_and_noise_is_tensorflows() -> None:
    """tf_keras ``Dropout`` and ``GaussianNoise`` in training (unseeded ops: the global seed decides), and
    a VAE's reparameterized draw: the loss and the tape's gradients, under ``jit``."""
    tf_keras = pytest.importorskip("tf_keras")

    def make() -> Any:
        tf_keras.utils.set_random_seed(3)
        model = tf_keras.Sequential([tf_keras.layers.Dense(6, input_shape=(4,)), tf_keras.layers.Dropout(0.4),
                                     tf_keras.layers.GaussianNoise(0.3), tf_keras.layers.Dense(4)])

        @tf.function(input_signature=[tf.TensorSpec([3, 4], tf.float32)])
        def step(x: Any) -> Any:
            with tf.GradientTape() as tape:
                h = model(x, training=True)
                mean, log_var = h[:, :2], h[:, 2:]
                z = mean + tf.exp(0.5 * log_var) * tf.random.normal(tf.shape(mean))
                loss = tf.reduce_sum(z ** 2) - 0.5 * tf.reduce_sum(1 + log_var - mean ** 2 - tf.exp(log_var))
            return loss, tape.gradient(loss, model.trainable_variables)
        return step

    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    _calls(make, (x,), modes=("jit",))


def test_an_unseeded_kernel_is_seeded_once_and_jax_grad_passes_over_it() -> None:
    """No seed anywhere: TensorFlow seeds each kernel from the OS, and so does the import (two imports
    draw differently); the state is an integer leaf, which ``jax.grad(..., allow_int=True)`` passes."""
    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def f(x: Any) -> Any:
        return tf.reduce_sum(tf.nn.dropout(x, 0.5) * x)

    tf.random.set_seed(None)
    x = np.arange(1.0, 5.0, dtype=np.float32)
    with pytest.warns(UserWarning, match="random generators"):
        fn, params = jta.import_function(f, x)
    _, again = jta.import_function(f, x, with_updates=True)
    assert not np.array_equal(params[next(iter(params))], again[next(iter(again))])
    assert float(fn(params, x)) == float(fn(params, x))  # (without with_updates: the same draw every call)
    grads = jax.grad(lambda p, x: fn(p, x), argnums=(0, 1), allow_int=True)(params, x)
    kept = np.asarray(grads[1]) != 0  # (d/dx of sum(dropout(x) x): 4x where kept, 0 where dropped)
    np.testing.assert_allclose(np.asarray(grads[1])[kept], 4 * x[kept])


def test_each_call_op_of_a_function_has_its_own_kernels() -> None:
    """TensorFlow instantiates a function's kernels once per call op: an inner ``tf.function`` called twice
    draws the same noise at both call sites (two generators), and a call op in a loop steps one."""
    def make() -> Any:
        noisy = tf.function(lambda x: x + tf.random.normal([3], seed=1))

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def f(x: Any) -> Any:
            s = tf.zeros([3])
            for _ in tf.range(2):
                s += noisy(x)
            return noisy(x), noisy(x), s
        return f

    _calls(make, (np.zeros(3, np.float32),))
    tf.random.set_seed(11)
    _, params = jta.import_function(make(), np.zeros(3, np.float32), with_updates=True)
    assert len(params) == 3


def test_an_xla_compiled_function_warns_that_its_draws_are_xlas() -> None:
    f = tf.function(lambda x: x + tf.random.normal([3], seed=1), jit_compile=True)
    with pytest.warns(UserWarning, match="jit_compile=True"):
        jta.import_function(f, np.zeros(3, np.float32), with_updates=True)


def test_a_missing_generator_is_named() -> None:
    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def f(x: Any) -> Any:
        return tf.random.uniform([2], seed=1) + x

    fn, params = jta.import_function(f, np.float32(0.0), with_updates=True)
    with pytest.raises(KeyError, match="random:random_uniform.*random op's generator"):
        fn({}, np.float32(0.0))


def _generator_function() -> Any:
    g = tf.random.Generator.from_seed(5)
    auto = tf.random.Generator.from_seed(6, alg="auto_select")  # (tf_keras's augmentation layers': Philox)

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def f(x: Any) -> Any:
        s = tf.zeros([2])
        for _ in tf.range(3):
            s += g.normal([2])
        return (g.normal([3]) + x, g.uniform([2], 0, 10, tf.int32), g.uniform([2]), g.truncated_normal([2]), s,
                auto.uniform([3]))
    return f


def test_a_generator_draws_tensorflows_values_under_x64_and_is_refused_naming_it_without() -> None:
    """``tf.random.Generator``: ``RngReadAndSkip`` reads and steps its int64 state variable (in a loop
    too), and the stateless V2 ops draw from what it read."""
    with jax.enable_x64(True):
        _calls(_generator_function, (np.float32(0.0),))
    fn, params = jta.import_function(_generator_function(), np.float32(0.0), with_updates=True)
    with pytest.raises(jta.errors.UnimplementedError, match="jax_enable_x64"):
        fn(params, np.float32(0.0))
