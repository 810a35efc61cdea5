"""A size the data decides where no probe reaches it, under ``jta.checked`` (red-team batches 17 and 18):
a ``boolean_mask`` of each step's row in a loop body, in a run-time ``tf.cond`` branch (the guard
``if tf.reduce_any(m): s = tf.boolean_mask(x, m)[0]``), or both, or an inner loop's stack read in the outer
body, then an op that needs rows (a softmax, ``s[0]``, ``s[1]``, ``s[-1]``, ``top_k(s, 2)``).
``jta.checked`` traces with a guess where it has not learned the size yet (0 rows), and a guess an op
cannot take failed the trace with an error TensorFlow never raises. It now traces again guessing 1 row,
then the largest the size can be (the mask's length, the buffer's rows), and the run reports the size:
learned where every step has the same (TensorFlow's value), refused as documented where the steps differ
(the eager call runs it), unless the loop has a static bound of at most 64 steps: it is then unrolled, each
step under its condition and learning its own. A branch traced twice asks for its size once (its number
is its call site's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from jta._records.catalogue import Error  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget  # noqa: E402
from tests.helpers.tf2_steps import tape_step  # noqa: E402

USES: dict[str, Callable[[Any], Any]] = {
    "softmax": lambda s: tf.reduce_sum(tf.nn.softmax(s) * s),
    "first": lambda s: s[0],
}


def _masked(use: Callable[[Any], Any]) -> Any:
    @tf.function
    def f(x: Any, threshold: Any) -> Any:
        def body(t: Any, acc: Any) -> Any:
            row = x[t % tf.shape(x)[0]]
            return t + 1, acc + use(tf.boolean_mask(row, row > threshold))

        return tf.while_loop(lambda t, acc: acc < 5.0, body, (0, 0.0))[1]

    return f


@pytest.mark.parametrize("name", list(USES))
def test_a_masked_row_in_a_loop_body_is_learned_or_refused_as_documented(name: str) -> None:
    f = _masked(USES[name])
    same = np.array([[2.0, -1.0, 0.5, -3.0], [1.0, 0.25, -2.0, -1.0]], np.float32)  # 2 kept in every row
    args = (same, np.float32(0.0))
    fn, params = jta.import_function(f, *args)
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, *args), f(*args).numpy(), rtol=1e-6)
    differ = np.array([[2.0, -1.0, 0.5, 3.0], [1.0, -0.25, -2.0, -1.0]], np.float32)  # 3 kept, then 1
    args = (differ, np.float32(0.0))
    fn, params = jta.import_function(f, *args)
    np.testing.assert_allclose(fn(params, *args), f(*args).numpy(), rtol=1e-6)  # eagerly: step by step
    with pytest.raises(jta.errors.UnimplementedError, match="an eager call runs any loop step by step") as info:
        jta.checked(jax.jit(fn))(params, *args)
    assert Error.RESULT_SIZE_LEARNED.matches(info.value)


NEEDS_ROWS: dict[str, Callable[[Any], Any]] = {
    "first": lambda s: s[0],
    "second": lambda s: s[1],
    "last": lambda s: s[-1],
    "top2": lambda s: tf.reduce_sum(tf.math.top_k(s, 2).values),
    "softmax": lambda s: tf.reduce_sum(tf.nn.softmax(s) * s),
    "mean": tf.reduce_mean,
}


def _placed(place: str, use: Callable[[Any], Any]) -> Any:
    """``use`` of a selection the data sizes, at ``place``; ``x`` keeps 2 or more entries in every row."""

    def guarded(row: Any) -> Any:
        keep = row > 0.0
        return tf.cond(tf.reduce_any(keep), lambda: use(tf.boolean_mask(row, keep)), lambda: tf.constant(-7.0))

    @tf.function
    def f(x: Any, n: Any) -> Any:
        if place == "cond":
            return guarded(x[0]) + guarded(-x[1])  # two masks, two counts
        if place == "inner_stack":  # the rows of an inner loop of n steps, read in the outer loop's body
            def outer(t: Any, acc: Any) -> Any:
                ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
                ta = tf.while_loop(lambda j, ta: j < n, lambda j, ta: (j + 1, ta.write(j, x[t % 2, j] * 1.5)),
                                   (0, ta))[1]
                return t + 1, acc + use(ta.stack())
            return tf.while_loop(lambda t, acc: t < n, outer, (0, 0.0))[1]

        def body(t: Any, acc: Any) -> Any:
            row = x[t % 2]
            return t + 1, acc + (guarded(row) if place == "cond_in_loop" else use(tf.boolean_mask(row, row > 0.0)))

        return tf.while_loop(lambda t, acc: t < n, body, (0, 0.0))[1]

    return f


PLACES = ("loop", "cond", "cond_in_loop", "inner_stack")
# By default each place once, with a use that needs 2 rows where a guess of 1 fails; --long runs them all.
_DEFAULT = {("loop", "top2"), ("cond", "first"), ("cond_in_loop", "second"), ("inner_stack", "second")}


@pytest.mark.parametrize("place,name", [pytest.param(p, u, marks=() if (p, u) in _DEFAULT or budget.long_run()
                                                     else pytest.mark.long_only)
                                        for p in PLACES for u in NEEDS_ROWS])
def test_a_size_no_probe_reaches_is_learned_for_ops_that_need_rows(place: str, name: str) -> None:
    f = _placed(place, NEEDS_ROWS[name])
    x = np.array([[2.0, -1.0, 0.5, 3.0, -2.0], [1.0, 0.25, -2.0, 4.0, 0.5]], np.float32)  # 3 kept, then 4
    x = x if place == "inner_stack" else np.where(x == 0.5, -0.5, x)  # (a mask keeps 2, then 3)
    x = x if place == "inner_stack" else np.array([x[0], x[0]], np.float32)  # (the same count every step)
    args = (x, np.int32(3))
    fn, params = jta.import_function(f, *args)
    want = f(*args).numpy()
    np.testing.assert_allclose(fn(params, *args), want, rtol=1e-6)
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, *args), want, rtol=1e-6)


def test_a_branch_never_taken_is_traced_with_a_guess_and_never_run() -> None:
    f = _placed("cond", NEEDS_ROWS["second"])
    x = -np.abs(np.arange(10, dtype=np.float32).reshape(2, 5)) - 1.0  # x[0] keeps nothing; -x[1] keeps 5
    fn, params = jta.import_function(f, x, np.int32(1))
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, x, np.int32(1)), f(x, np.int32(1)).numpy(), rtol=1e-6)


@pytest.mark.long_only  # (5 s; the inner_stack places keep the class by default)
def test_an_inner_stack_read_by_row_in_a_train_step() -> None:
    """Red-team batch 18: the tape's gradient of an outer loop reading its inner loop's last row (the final state)."""
    w = tf.Variable(np.float32(0.9), name="w")

    def forward(x: Any, m: Any) -> Any:
        def outer(k: Any, s: Any, acc: Any) -> Any:
            inner = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[2])
            inner = tf.while_loop(lambda i, v, ta: i < m, lambda i, v, ta: (i + 1, v * w, ta.write(i, v)),
                                  (0, s, inner))[2]
            return k + 1, s * 0.5, acc + tf.reduce_sum(inner.stack()[-1])

        return tf.while_loop(lambda k, s, acc: tf.reduce_max(tf.abs(s)) > 0.3, outer, (0, x, 0.0))[2]

    @tf.function
    def step(x: Any, m: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = forward(x, m)
        return loss, tape.gradient(loss, w)

    args = (np.array([1.0, 2.0], np.float32), np.int32(5))
    fn, params = jta.import_function(step, *args)
    for got, want in zip(jta.checked(jax.jit(fn))(params, *args), step(*args), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5)


def _bounded(place: str) -> Any:
    """An outer loop the data stops (after 3 steps) within ``maximum_iterations=4`` whose steps have counts of their own:
    a mask keeping ``t + 1`` entries, or an inner loop of ``t + 1`` steps whose stack the outer body reads."""
    @tf.function
    def f(x: Any, w: Any) -> Any:
        def body(t: Any, s: Any, acc: Any) -> Any:
            if place == "mask":
                kept = tf.boolean_mask(x * w, tf.range(6) <= t)
            else:
                ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
                kept = tf.while_loop(lambda j, ta: j <= t, lambda j, ta: (j + 1, ta.write(j, x[j] * w + s)),
                                     (0, ta))[1].stack()
            return t + 1, s * 1.7 + 1.0, acc + tf.reduce_max(kept) * kept[-1]

        return tf.while_loop(lambda t, s, acc: s < 10.0, body, (0, w + 0.1, 0.0), maximum_iterations=4)[2]

    return f


@pytest.mark.parametrize("place", ["mask", pytest.param("inner_stack", marks=pytest.mark.long_only)])  # (20 s)
def test_counts_that_differ_between_the_steps_of_a_short_bounded_loop_are_learned_per_step(place: str) -> None:
    """A loop of at most 64 steps whose trip count the data decides runs its steps unrolled, each under its
    condition, where a run saw its body's size differ between steps: each step learns its own (the scan
    it would be shares one)."""
    f = _bounded(place)
    args = (np.array([0.5, -1.0, 2.0, 1.5, -0.5, 3.0], np.float32), np.float32(0.9))
    fn, params = jta.import_function(f, *args)
    want = f(*args).numpy()
    np.testing.assert_allclose(fn(params, *args), want, rtol=1e-6)
    np.testing.assert_allclose(jta.checked(jax.jit(fn))(params, *args), want, rtol=1e-6)
    w = tf.constant(args[1])
    with tf.GradientTape() as tape:
        tape.watch(w)
        loss = f(args[0], w)
    grad = jta.checked(jax.jit(jax.grad(lambda w: fn(params, args[0], w))))(args[1])
    np.testing.assert_allclose(grad, tape.gradient(loss, w).numpy(), rtol=1e-5)


@pytest.mark.long_only  # (3 s)
@pytest.mark.parametrize("place", ["mask", "inner_stack"])
def test_a_train_step_through_a_short_bounded_loop_of_differing_counts_is_refused(place: str) -> None:
    """The tape keeps each step's rows for the backward loop, which pops them at steps the data decides:
    one buffer cannot hold rows of other shapes, so a loop that pushes (a tape's forward) is not unrolled
    (its steps would learn their sizes only to be refused), and it is refused, naming the eager call."""
    f = _bounded(place)
    args = (np.array([0.5, -1.0, 2.0, 1.5, -0.5, 3.0], np.float32), np.float32(0.9))
    step = tape_step(f, args, (1,))
    fn, params = jta.import_function(step, *args)
    for got, want in zip(fn(params, *args), step(*args), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5)
    with pytest.raises(jta.errors.UnimplementedError, match="call the imported function eagerly") as info:
        jta.checked(jax.jit(fn))(params, *args)
    assert GraphError.BUFFER_SHAPE.matches(info.value)


def test_an_array_of_the_arguments_size_made_again_at_each_step() -> None:
    """Red-team batch 22: beam histories reordered by parent, a ``TensorArray(size=n)`` made again in each step from
    the carry's stack (``unstack(gather(hist.stack(), perm))``) and written: under ``jta.checked`` the body's fresh
    list did not fit the carry's buffer (JAX's carry-type error, after the guess of 0 rows failed a write as
    TensorFlow's misuse text). Forward and ``jax.grad`` for two counts."""
    @tf.function
    def f(x: Any, n: Any) -> Any:
        hist = tf.TensorArray(tf.float32, size=n, element_shape=[2])
        for t in tf.range(n):
            hist = tf.TensorArray(tf.float32, size=n, element_shape=[2]).unstack(
                tf.gather(hist.stack(), [1, 0], axis=1)).write(t, x[t] * x[t])
        return hist.stack()

    x = np.arange(8, dtype=np.float32).reshape(4, 2) / 4
    fn, params = jta.import_function(f, x, np.int32(3))
    run = jta.checked(jax.jit(fn))
    grad = jta.checked(jax.jit(jax.grad(lambda x, n: (fn(params, x, n) ** 3).sum())))
    for n in (3, 4):
        np.testing.assert_allclose(run(params, x, np.int32(n)), f(x, np.int32(n)).numpy())
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_sum(f(xt, np.int32(n)) ** 3)
        np.testing.assert_allclose(grad(x, np.int32(n)), tape.gradient(loss, xt).numpy(), rtol=1e-5)
