"""Nested TF1 loops whose gradient stacks are sized from the bounds of the enclosing loops, under jax.jit.

Each case builds a frozen TF1 graph (control flow v1) with ``tf.gradients``, and checks the imported
forward and TensorFlow's gradient graph against ``Session.run`` under ``jax.jit`` (eagerly where the case
exercises eager paths too), and ``jax.grad`` of the imported forward against TensorFlow's gradient.
Found by the TF1 program fuzzer (tests/helpers/tf1_programs.py; findings F3, F4, F5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

import jta
from tests.helpers import budget
from tests.helpers.compare import assert_session_outputs
from tests.helpers.tfgraph import k_graph

pytest.importorskip("tensorflow")


def _check(build: Callable[[], tuple[Any, Any]], feeds: dict[str, np.ndarray], grad: Any = "jit",
           **options: Any) -> None:
    """``build()`` (inside a fresh TF1 graph) returns (loss, x); the graph gets ``gx = tf.gradients(loss, x)``.
    The imported [loss, gx] must match Session.run under jit, and jax.grad of the imported loss wrt x (the first
    feed) TensorFlow's gx: under jit when ``grad`` is "jit", eagerly when true (a fed trip count is static only
    eagerly: under jit its loop is a lax.while_loop, which JAX cannot reverse-differentiate), not when false."""
    import tensorflow as tf

    with k_graph() as g:
        loss, x = build()
        tf.identity(loss, name="loss")
        tf.identity(tf.convert_to_tensor(tf.gradients(loss, [x])[0]), name="gx")
    names = list(feeds)
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run(["loss:0", "gx:0"], feeds)
    f = jta.import_graph_def(g.as_graph_def(), names, ["loss:0", "gx:0"], **options)
    args = [feeds[n] for n in names]
    assert_session_outputs(jax.jit(f)(*args), expected)
    if not grad:
        return
    forward = jta.import_graph_def(g.as_graph_def(), names, ["loss:0"], **options)
    of_forward = jax.grad(lambda v, *rest: forward(v, *rest)[0])
    got = (jax.jit(of_forward) if grad == "jit" else of_forward)(*args)
    np.testing.assert_allclose(np.asarray(got), expected[1], rtol=1e-5, atol=1e-5)


def test_a_bounded_data_dependent_loop_nested_in_a_static_loop():
    """F3: the inner loop runs while ``k < 3 and sum(|g|) < 2`` (at most 3 steps, known at run time); its
    gradient stacks are sized 4 (outer steps) × 3 (the inner bound), with no stack_capacity=."""
    import tensorflow as tf

    def build() -> tuple[Any, Any]:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")

        def inner(e: Any) -> Any:
            return tf.compat.v1.while_loop(
                lambda k, g_: tf.logical_and(k < 3, tf.reduce_sum(tf.abs(g_)) < 2.0),
                lambda k, g_: (k + 1, tf.tanh(g_ * 1.5 + e)), (tf.constant(0), 0.1 * e))[1]

        h = tf.compat.v1.while_loop(lambda i, h: i < 4, lambda i, h: (i + 1, h + inner(x[i])),
                                    (tf.constant(0), tf.zeros([3])))[1]
        return tf.reduce_sum(h * h), x

    _check(build, {"x:0": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)})


def test_a_maximum_iterations_loop_nested_in_a_static_loop():
    """F3 (maximum_iterations=): a data-dependent inner loop bounded by maximum_iterations=2."""
    import tensorflow as tf

    def build() -> tuple[Any, Any]:
        x = tf.compat.v1.placeholder(tf.float32, [3, 2], name="x")

        def inner(e: Any) -> Any:
            return tf.compat.v1.while_loop(lambda g_: tf.reduce_sum(g_) < 1.0, lambda g_: tf.sin(g_ + e) + 0.5,
                                           (e,), maximum_iterations=2)

        h = tf.compat.v1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * inner(x[i])),
                                    (tf.constant(0), tf.ones([2])))[1]
        return tf.reduce_sum(h), x

    _check(build, {"x:0": np.linspace(-1, 0.6, 6, dtype=np.float32).reshape(3, 2)})


def test_a_triangular_loop_inside_a_loop():
    """F5: ``while j < 2: while i < 2: while k < i + 1`` (a triangular loop inside a loop, as in tf.scan's
    body): the middle loop is unrolled in each outer step (the inner count becomes static), as at top level,
    also once the inner loop's stacks are buffers (the second outer step)."""
    import tensorflow as tf

    def triangular(e: Any) -> Any:
        def body(i: Any, h: Any) -> tuple[Any, Any]:
            acc = tf.compat.v1.while_loop(lambda k, a: k < i + 1, lambda k, a: (k + 1, tf.tanh(a + e)),
                                          (tf.constant(0), h))[1]
            return i + 1, acc

        return tf.compat.v1.while_loop(lambda i, h: i < 2, body, (tf.constant(0), e))[1]

    def build() -> tuple[Any, Any]:
        x = tf.compat.v1.placeholder(tf.float32, [2, 2], name="x")
        y = tf.compat.v1.while_loop(lambda j, a: j < 2, lambda j, a: (j + 1, a + triangular(x[j])),
                                    (tf.constant(0), tf.zeros([2])))[1]
        return tf.reduce_sum(y * y), x

    _check(build, {"x:0": np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2)})


def _fed_inner_concat() -> tuple[Any, Any]:
    """An inner loop of fed trip count (``i < minimum(n, 2)``) writing an array read by concat(), nested in a
    static loop: concat's gradient pops the lengths vector that the outer loop pushed in line."""
    import tensorflow as tf

    x = tf.compat.v1.placeholder(tf.float32, [2, 2, 2], name="x")
    n = tf.compat.v1.placeholder(tf.int32, [], name="n")

    def inner(e: Any) -> Any:
        in_ta = tf.TensorArray(tf.float32, size=2).unstack(e)

        def step(i: Any, h: Any, ta: Any) -> tuple[Any, Any, Any]:
            h = tf.tanh(h + in_ta.read(i))
            return i + 1, h, ta.write(i, h)

        out = tf.compat.v1.while_loop(lambda i, h, ta: i < tf.minimum(n, 2), step,
                                      (tf.constant(0), tf.zeros([2]), tf.TensorArray(tf.float32, 2,
                                                                                     element_shape=[2])))[2]
        return tf.reshape(out.concat(), [2, 2])

    h = tf.compat.v1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, h + inner(x[i])),
                                (tf.constant(0), tf.zeros([2, 2])))[1]
    return tf.reduce_sum(h * h), x


_FED = {"x:0": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 2, 2), "n:0": np.int32(2)}


@pytest.mark.long
def test_concat_of_a_fed_count_loop_nested_in_a_loop():
    """F4: with stack_capacity= (the inner count is fed, so nothing else sizes its stacks) the import runs
    under jit: the in-line pushed lengths (static int64) no longer look like a change of the carry's structure."""
    _check(_fed_inner_concat, _FED, grad=budget.LONG, stack_capacity=16)


def test_concat_of_a_fed_count_loop_without_capacity_names_the_inner_loop():
    """Without stack_capacity=, the refusal (406) names the inner loop, whose count is fed, and the way out."""
    import tensorflow as tf

    with k_graph() as g:
        loss, x = _fed_inner_concat()
        tf.identity(tf.gradients(loss, [x])[0], name="gx")
    f = jta.import_graph_def(g.as_graph_def(), ["x:0", "n:0"], ["gx:0"])
    with pytest.raises(jta.errors.UnimplementedError, match=r"pushed inside the while loop while/while/"
                       r"while_context, .*pass stack_capacity=N"):
        jax.jit(f)(*_FED.values())


def test_a_gather_gradient_in_a_bounded_loop_is_refused_with_a_way_out_that_works():
    """F7: embedding_lookup of a fed table in a loop bounded by maximum_iterations (a greedy decoder until EOS):
    TensorFlow's gradient loop grows the IndexedSlices each step, which a lax loop cannot carry, so the import
    of its gradient graph under jit is refused (407) naming the gradient loop and its variable; the way out it
    gives, jax.grad of the imported forward graph, matches TensorFlow's gradient under jit."""
    import tensorflow as tf

    with k_graph() as g:
        table = tf.compat.v1.placeholder(tf.float32, [5, 3], name="table")
        tokens = tf.constant([[1, 4], [0, 2], [3, 3]], tf.int32)

        def body(i: Any, h: Any) -> tuple[Any, Any]:
            return i + 1, tf.tanh(h + tf.nn.embedding_lookup(table, tokens[i]))

        h = tf.compat.v1.while_loop(lambda i, h: tf.reduce_sum(h) > -1.0, body, (tf.constant(0), tf.zeros([2, 3])),
                                    maximum_iterations=3)[1]
        loss = tf.reduce_sum(h * h, name="loss")
        tf.identity(tf.convert_to_tensor(tf.gradients(loss, [table])[0]), name="gt")
    tv = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run("gt:0", {"table:0": tv})
    f = jta.import_graph_def(g.as_graph_def(), ["table:0"], ["gt:0"])
    with pytest.raises(jta.errors.UnimplementedError, match=r"While loop gradients/while/while_context: a loop "
                       r"variable changes shape .*Merge node: gradients/while/embedding_lookup/Enter_grad/b_acc_\d\)\. "
                       r"It is TensorFlow's gradient loop .*jax.grad of the imported forward graph"):
        jax.jit(f)(tv)
    forward = jta.import_graph_def(g.as_graph_def(), ["table:0"], ["loss:0"])
    got = jax.jit(jax.grad(lambda t: forward(t)[0]))(tv)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)
