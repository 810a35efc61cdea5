"""Stacks that ``pad_stacks=True`` pads (red-team batch 17): a list written in a loop whose trip count
the data decides, stacked under ``jit``, has the buffer's rows, zeros past its length. A sum of it and
the function's outputs see TensorFlow's values (outputs padded, as documented); any other use could
see the zero rows (a mean, a max, a softmax, ``S[-1]``, ``tf.shape(S)[0]``, inside the loop that grows
the stack too) and is refused (code 488), never a wrong value. The enumeration below runs each use of
a padded stack: either jta gives TensorFlow's value, or it refuses.
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

D = 3
X = np.linspace(-1.0, 1.0, D).astype(np.float32)
N = np.int32(5)


def _states(use: Callable[[Any], Any]) -> Any:
    """A decoder's states, stacked after a loop of ``n`` steps (bounded by 8), and ``use`` of the stack."""
    w = tf.Variable(np.random.default_rng(0).normal(size=(D, D)).astype(np.float32) * 0.5, name="w")

    @tf.function
    def f(x: Any, n: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[D])

        def body(t: Any, h: Any, ta: Any) -> Any:
            h = tf.tanh(tf.linalg.matvec(w, h))
            return t + 1, h, ta.write(t, h)

        _, _, ta = tf.while_loop(lambda t, h, ta: t < n, body, (0, x, ta), maximum_iterations=8)
        return use(ta.stack())

    return f


@tf.function
def _summed(s: Any) -> Any:  # (a nested function: its own ops are followed)
    return tf.reduce_sum(2.0 * s, 0)


@tf.function
def _averaged(s: Any) -> Any:
    return tf.reduce_mean(s, 0)


def _branched(s: Any, one: Callable[[Any], Any], other: Callable[[Any], Any]) -> Any:
    """A run-time ``tf.cond`` whose branches take the padded stack (they close over it under ``lax.switch``)."""
    return tf.cond(tf.reduce_sum(s) > -100.0, lambda: one(s), lambda: other(s))


USES: dict[str, tuple[Callable[[Any], Any], bool]] = {  # name: (the use, whether pad_stacks gives TF's value)
    "sum": (lambda s: tf.reduce_sum(s, 0), True),
    "sum_of_squares_scaled": (lambda s: 2.0 * tf.reduce_sum(tf.square(-s), [0, 1]), True),
    "sum_over_columns": (lambda s: tf.reduce_sum(tf.abs(s), 1), True),  # (padded: an output of 8 rows)
    "sum_of_a_sum": (lambda s: tf.reduce_sum(s + s * 3.0), True),
    "transposed_sum": (lambda s: tf.reduce_sum(tf.transpose(s), 1), True),
    "mean": (lambda s: tf.reduce_mean(s, 0), False),
    "max": (lambda s: tf.reduce_max(s, 0), False),
    "softmax": (lambda s: tf.reduce_sum(tf.nn.softmax(s, axis=0) * s), False),
    "last_row": (lambda s: s[-1], False),
    "row_count": (lambda s: tf.cast(tf.shape(s)[0], tf.float32), False),
    "shifted_sum": (lambda s: tf.reduce_sum(s + 1.0), False),
    "exp_sum": (lambda s: tf.reduce_sum(tf.exp(s)), False),
    "matmul_sum": (lambda s: tf.reduce_sum(tf.matmul(s, s, transpose_a=True)), False),
    "nested_sum": (lambda s: _summed(s), True),
    "nested_mean": (lambda s: _averaged(s), False),
    "cond_sum": (lambda s: _branched(s, lambda v: tf.reduce_sum(v, 0), lambda v: _summed(v)), True),
    "cond_mean": (lambda s: _branched(s, lambda v: tf.reduce_sum(v, 0), lambda v: tf.reduce_mean(v, 0)), False),
    "cond_returns": (lambda s: tf.reduce_sum(_branched(s, lambda v: v, lambda v: -v), 0), False),
}
DEFAULT = ("sum", "sum_over_columns", "mean", "last_row", "row_count", "cond_sum")  # (the train steps: nested)


def _refused(run: Callable[[], Any]) -> None:
    with pytest.raises(jta.errors.UnimplementedError, match="padded with zero rows past its run-time length") as info:
        run()
    assert GraphError.PADDED_USE.matches(info.value)


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.long_only) for n in USES])
def test_a_use_of_a_padded_stack_gives_tensorflows_value_or_is_refused(name: str) -> None:
    use, exact = USES[name]
    f = _states(use)
    want = f(X, N).numpy()
    fn, params = jta.import_function(f, X, N, pad_stacks=True)
    np.testing.assert_allclose(fn(params, X, N), want, rtol=1e-6)  # eagerly: step by step, no padding
    if not exact:
        _refused(lambda: jax.jit(fn)(params, X, N))
        return
    got = np.asarray(jax.jit(fn)(params, X, N))
    if got.shape != want.shape:  # a padded output: the rows past the length zeros
        assert got.shape[0] == 8 and not got[N:].any(), got
        got = got[:N]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_stack_read_in_the_loop_that_grows_it_is_refused() -> None:
    """A running mean over the rows written so far (a memory, a KV cache): the padded stack is read
    inside the loop, by a mean that would count its zero rows."""
    w = tf.Variable(np.eye(D, dtype=np.float32) * 0.7, name="w")

    @tf.function
    def f(x: Any, n: Any) -> Any:
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[D])

        def body(t: Any, h: Any, ta: Any) -> Any:
            ta = ta.write(t, tf.linalg.matvec(w, h))
            return t + 1, tf.tanh(tf.reduce_mean(ta.stack(), 0) + h), ta

        return tf.while_loop(lambda t, h, ta: t < n, body, (0, x, ta), maximum_iterations=8)[1]

    fn, params = jta.import_function(f, X, N, pad_stacks=True)
    np.testing.assert_allclose(fn(params, X, N), f(X, N).numpy(), rtol=1e-6)
    _refused(lambda: jax.jit(fn)(params, X, N))
    _refused(lambda: jax.jit(jax.grad(lambda p: fn(p, X, N).sum()))(params))
    with tf.GradientTape() as tape:  # (jax.grad of concrete arguments: the loop runs step by step)
        want = tape.gradient(tf.reduce_sum(f(X, N)), w).numpy()
    np.testing.assert_allclose(jax.grad(lambda p: fn(p, X, N).sum())(params)["w"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("through", ["", "nested", pytest.param("cond", marks=pytest.mark.long_only)])
def test_a_train_step_summing_a_padded_stack_gives_tensorflows_gradients(through: str) -> None:
    """The tape's gradient ops read the padded stack (its shape, for the sum's gradient): their
    cotangents of the padded rows reach only rows the list's gradient never reads. Also where a nested
    function sums it (its gradient a call of a ``__backward_`` function). A run-time cond's branch that
    sums it keeps what its gradient needs in an optional (``OptionalFromValue``), which is not followed:
    refused (488), as the eager call or ``jta.checked`` run it."""
    use = {"": lambda s: tf.reduce_sum(s, 0), "nested": _summed,
           "cond": lambda s: _branched(s, lambda v: tf.reduce_sum(v, 0), _summed)}[through]
    f = _states(lambda s: tf.reduce_sum(use(tf.square(s))))

    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = f(x, n)
        return loss, tape.gradient(loss, x)

    fn, params = jta.import_function(step, X, N, pad_stacks=True)
    if through == "cond":
        _refused(lambda: jax.jit(fn)(params, X, N))
        return
    for got, want in zip(jax.jit(fn)(params, X, N), step(X, N), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_two_stacks_of_a_loop_do_not_line_up_their_padding() -> None:
    """``a + b`` of two padded stacks: TensorFlow's lengths may differ (here one row broadcasts), where the
    padded buffers would line up: refused (488)."""
    @tf.function
    def f(x: Any, n: Any) -> Any:
        a = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[D])
        b = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[D])

        def body(t: Any, a: Any, b: Any) -> Any:
            b = tf.cond(t < 1, lambda: b.write(t, x * 2.0), lambda: b)  # (one row: it broadcasts in TF)
            return t + 1, a.write(t, x * tf.cast(t, tf.float32)), b

        _, a, b = tf.while_loop(lambda t, a, b: t < n, body, (0, a, b), maximum_iterations=8)
        return tf.reduce_sum(a.stack() + b.stack(), 0)

    fn, params = jta.import_function(f, X, N, pad_stacks=True)
    np.testing.assert_allclose(fn(params, X, N), f(X, N).numpy(), rtol=1e-6)  # eagerly: step by step
    _refused(lambda: jax.jit(fn)(params, X, N))


def test_a_gradient_with_respect_to_a_padded_stack_is_refused() -> None:
    """``tape.gradient(y, S)`` of a padded stack: its padded rows are the padded rows' cotangents (one,
    for a sum), not zeros, so only the tape's gradient ops may read it (red-team batch 18: a sum of it
    counted the padded rows). A train step whose loss uses the stack twice still runs."""
    f = _states(lambda s: s)

    @tf.function
    def count(x: Any, n: Any) -> Any:
        s = f(x, n)
        with tf.GradientTape() as tape:
            tape.watch(s)
            y = tf.reduce_sum(s)
        return tf.reduce_sum(tape.gradient(y, s))

    fn, params = jta.import_function(count, X, N, pad_stacks=True)
    np.testing.assert_allclose(fn(params, X, N), count(X, N).numpy())  # eagerly: N * D
    _refused(lambda: jax.jit(fn)(params, X, N))

    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            s = f(x, n)
            loss = tf.reduce_sum(s) + tf.reduce_sum(tf.square(s))
        return loss, tape.gradient(loss, x)

    fn, params = jta.import_function(step, X, N, pad_stacks=True)
    for got, want in zip(jax.jit(fn)(params, X, N), step(X, N), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stacked", [True, pytest.param(False, marks=pytest.mark.long_only)])
def test_a_train_step_of_a_pushed_list_pops_its_gradient_from_the_real_end(stacked: bool) -> None:
    """The TF2 program generator (counter_write): a list grown by ``TensorListPushBack`` under a branch, then
    stacked (or concatenated). Its gradient makes a list of the stack's cotangent and pops it from the end
    (a ``PushBack``'s gradient is a ``PopBack``): with the padded rows in that list the pops took zeros, a
    wrong zero gradient. The list has the forward list's run-time length."""
    w = tf.Variable(np.array([[0.5, -0.3], [0.2, 0.8]], np.float32), name="w")

    @tf.function
    def step(x: Any, n: Any) -> Any:
        with tf.GradientTape() as tape:
            lst = tf.raw_ops.EmptyTensorList(element_shape=[2], max_num_elements=-1, element_dtype=tf.float32)
            h = tf.zeros([2])
            for i in tf.range(n):
                h = tf.tanh(tf.linalg.matvec(w, x[i]) + 0.5 * h)
                if i < 1 or i == 3:
                    lst = tf.raw_ops.TensorListPushBack(input_handle=lst, tensor=h * 2.0)
            s = (tf.raw_ops.TensorListStack(input_handle=lst, element_dtype=tf.float32, element_shape=[2]) if stacked
                 else tf.raw_ops.TensorListConcatV2(input_handle=lst, element_shape=[2], leading_dims=[],
                                                    element_dtype=tf.float32)[0])
            loss = tf.reduce_sum(s * s)
        return loss, tape.gradient(loss, w)

    args = (np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32), np.int32(5))
    fn, params = jta.import_function(step, *args, pad_stacks=True)
    for got, want in zip(jax.jit(fn)(params, *args), step(*args), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
