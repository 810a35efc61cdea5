"""Loops whose variables grow (``shape_invariants``) for as many steps as the data decides, under
``jta.checked``: unrolled to the trip count learned at run time, against TensorFlow, forward, ``jax.grad``
and the tape's train step (``jta/graph_import/_growing_loops.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget  # noqa: E402

X = np.float32([0.9, -0.4])


def _model() -> tuple[Any, Any, Any]:
    """A cache grown by ``tf.concat`` for ``n`` steps (an argument), each step attending over it; and one grown
    until the state falls under a tolerance (the data decides the count)."""
    w = tf.Variable(np.float32([[0.5, -0.2], [0.3, 0.8]]), name="w")

    def for_n(x: Any, n: Any) -> Any:
        cache, i = x[None], tf.constant(0)
        while i < n:
            tf.autograph.experimental.set_loop_options(shape_invariants=[(cache, tf.TensorShape([None, 2]))])
            q = tf.nn.softmax(tf.linalg.matvec(cache, cache[-1]))
            cache = tf.concat([cache, tf.tanh(tf.linalg.matvec(tf.transpose(cache), q)[None] @ w)], 0)
            i += 1
        return tf.reduce_sum(cache ** 2), cache

    def to_tolerance(x: Any, scale: Any) -> Any:
        history = x[None]
        s = x
        while tf.reduce_max(tf.abs(s)) > 0.05:
            tf.autograph.experimental.set_loop_options(shape_invariants=[(history, tf.TensorShape([None, 2]))])
            s = tf.linalg.matvec(w, s) * scale
            history = tf.concat([history, s[None]], 0)
        return tf.reduce_sum(tf.reduce_mean(history, 0) ** 2), history

    return w, for_n, to_tolerance


def _close(got: Any, want: Any) -> None:
    for g, t in zip(got, want, strict=True):
        assert np.shape(g) == tuple(t.shape)
        np.testing.assert_allclose(np.asarray(g), t.numpy(), rtol=1e-5, atol=1e-6)


def test_a_cache_grown_for_n_steps_is_tensorflows_for_each_n() -> None:
    """Counts below, at and past the first steps unrolled (8), none, and the learned count kept for the next
    call of the same count; a bare ``jit`` refuses, naming ``jta.checked``."""
    _, for_n, _ = _model()
    for_n = tf.function(for_n)
    fn, params = jta.import_function(for_n, X, np.int32(5))
    checked = jta.checked(jax.jit(fn))
    for n in (5, 8, 0, 12, 5):
        _close(checked(params, X, np.int32(n)), for_n(X, np.int32(n)))
        _close(fn(params, X, np.int32(n)), for_n(X, np.int32(n)))  # (eagerly: step by step)
    with pytest.raises(jta.errors.UnimplementedError, match="a call through jta.checked") as info:
        jax.jit(fn)(params, X, np.int32(3))
    assert GraphError.TF2_LOOP.matches(info.value)


@pytest.mark.long_only  # (8 s: unrolled to 8, 16, 32 and 64 steps before the refusal)
def test_a_count_past_64_steps_is_refused() -> None:
    _, for_n, _ = _model()
    fn, params = jta.import_function(tf.function(for_n), X, np.int32(5))
    with pytest.raises(jta.errors.UnimplementedError, match="a run went past 64 steps") as info:
        jta.checked(jax.jit(fn))(params, X, np.int32(70))
    assert GraphError.TF2_LOOP.matches(info.value)


def test_jax_grad_through_a_loop_run_to_a_tolerance_is_the_tapes() -> None:
    w, _, to_tolerance = _model()
    fn, params = jta.import_function(tf.function(to_tolerance), X, np.float32(0.9))
    grad = jta.checked(jax.jit(jax.grad(lambda p, x, s: fn(p, x, s)[0], argnums=(0, 1))))
    for scale in (0.9, 0.6):
        x = tf.constant(X)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = to_tolerance(x, scale)[0]
        want_w, want_x = tape.gradient(loss, [w, x])
        got_p, got_x = grad(params, X, np.float32(scale))
        np.testing.assert_allclose(got_p["w"], want_w.numpy(), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got_x, want_x.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("mode", ["checked", pytest.param("disable_jit", marks=pytest.mark.long_only)])
def test_the_tapes_train_step_runs_the_learned_count_back(mode: str) -> None:
    """The tape's gradient loop runs as many steps as the forward one ran: unrolled to the same count."""
    w, for_n, _ = _model()

    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = for_n(x, n)[0]
        return loss, tape.gradient(loss, w)

    fn, params = jta.import_function(step, X, np.int32(4))
    run = jta.checked(jax.jit(fn))
    for n in (4, 9) if budget.long_run() else (4,):  # (9: a run past the first 8 steps, 10 s more)
        if mode == "disable_jit":
            with jax.disable_jit():
                _close(run(params, X, np.int32(n)), step(X, n))
        else:
            _close(run(params, X, np.int32(n)), step(X, n))


def test_a_bounded_loop_stops_at_its_bound_and_checkify_cannot_learn() -> None:
    """``maximum_iterations`` caps the count the data would take; ``jax.jit(jta.checkify(fn))`` has no plan to learn
    with: refused, as a bare ``jit`` is."""
    def f(x: Any) -> Any:
        def body(s: Any, h: Any) -> Any:
            s = s * 0.7
            return s, tf.concat([h, s[None]], 0)

        _, h = tf.while_loop(lambda s, h: tf.reduce_max(tf.abs(s)) > 0.05, body, (x, x[None]),
                             shape_invariants=(tf.TensorShape([2]), tf.TensorShape([None, 2])), maximum_iterations=5)
        return (h,)

    fn, params = jta.import_function(tf.function(f), X)
    for x in (X, X * 0.1, X * 30):
        _close(jta.checked(jax.jit(fn))(params, x), f(x))
    with pytest.raises(jta.errors.UnimplementedError) as info:
        jax.jit(jta.checkify(fn))(params, X)
    assert GraphError.TF2_LOOP.matches(info.value)


def test_a_kv_cache_train_step_with_an_array_of_the_argument_size_for_counts_up_and_down() -> None:
    """Red-team batch 20: a decoder growing K/V caches for ``n`` steps (an argument) and writing each step's
    output into a ``TensorArray(size=n)``, in a train step: the tape's loop reads the array's list backwards
    from the forward's last step, so the count must be known before that is traced (a probe). Counts at the
    probe's depth (8, which once reran the probe for ever), below and past it, and back."""
    r = np.random.default_rng(0)
    wq, wk, wv = (tf.Variable(r.normal(size=(4, 4)).astype(np.float32) * 0.5, name=n) for n in "qkv")

    @tf.function
    def step(h: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            k, v = tf.zeros([0, 4]), tf.zeros([0, 4])
            outs = tf.TensorArray(tf.float32, size=n)
            for t in tf.range(n):
                tf.autograph.experimental.set_loop_options(
                    shape_invariants=[(k, tf.TensorShape([None, 4])), (v, tf.TensorShape([None, 4]))])
                k, v = tf.concat([k, h[None] @ wk], 0), tf.concat([v, h[None] @ wv], 0)
                a = tf.nn.softmax(tf.squeeze(k @ tf.transpose(h[None] @ wq), 1) / 2.0)
                h = tf.tanh(tf.reduce_sum(a[:, None] * v, 0) + h)
                outs = outs.write(t, h)
            loss = tf.reduce_sum(outs.stack() ** 2) + tf.reduce_sum(k)
        return (loss, *tape.gradient(loss, [wq, wk, wv]))

    h = r.normal(size=4).astype(np.float32)
    fn, params = jta.import_function(step, h, np.int32(5))
    run = jta.checked(jax.jit(fn))
    for n in (8, 3, 9, 8) if budget.long_run() else (8, 3):
        got, want = run(params, h, np.int32(n)), step(h, np.int32(n))
        for g, t in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), t.numpy(), rtol=1e-4, atol=1e-6)


def test_a_bound_of_one_step_with_a_condition_on_the_data() -> None:
    """The generator's ``grown_tensor`` family (seed 147): ``maximum_iterations=1``; the probe finds the exact count
    (1), but the condition traced after the step (``i < 1 & s < c``) is not static: the count holds (it raised
    JAX's ``TracerArrayConversionError``)."""
    x = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([3, 2], tf.float32)])
    def f(x: Any) -> Any:
        return tf.while_loop(lambda i, s, h: tf.reduce_max(s) < 0.7,
                             lambda i, s, h: (i + 1, s + tf.abs(x[i]) + 0.05, tf.concat([h, x[i][None]], 0)),
                             (tf.constant(0), tf.zeros([2]), tf.zeros([0, 2])),
                             shape_invariants=(tf.TensorShape([]), tf.TensorShape([2]), tf.TensorShape([None, 2])),
                             maximum_iterations=1)[2]

    fn, params = jta.import_function(f, x)
    for run in (fn, jax.jit(fn), jta.checked(jax.jit(fn))):
        np.testing.assert_array_equal(run(params, x), f(x).numpy())
