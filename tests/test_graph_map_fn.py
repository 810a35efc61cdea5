"""jta.import_graph_def: ``tf.map_fn`` over more elements than ``max_unroll``, against Session.run.

``map_fn`` creates its result array without an element shape; the loop that writes it runs as a
``lax.scan`` (the array is made dense before the loop with the shape its first write gives it), so
the element count is not bounded by ``max_unroll``. The forward graph, its ``tf.compat.v1.gradients``
graph (eagerly and under ``jax.jit``) and ``jax.grad`` of the imported forward match TensorFlow.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402

N = 300  # more than the default max_unroll


@pytest.fixture(scope="module")
def case():
    """(graph, x, Session.run's loss and gradient) for a map_fn over N rows."""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [N, 3], name="x")
        y = tf.map_fn(lambda row: tf.sin(row) * tf.reduce_sum(row), x)
        loss = tf.reduce_sum(y * y, name="loss")
        (grad,) = tf.compat.v1.gradients(loss, [x])
        tf.identity(grad, name="grad")
    xv = np.random.RandomState(0).randn(N, 3).astype(np.float32)
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run(["loss:0", "grad:0"], {"x:0": xv})
    return g, xv, expected


def _close(got, expected):
    for value, reference in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(value), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_map_fn_over_more_elements_than_max_unroll_matches_session_run(case, jit):
    g, xv, expected = case
    f = jta.import_graph_def(g.as_graph_def(), ["x:0"], ["loss:0", "grad:0"])
    _close((jax.jit(f) if jit else f)(xv), expected)


def test_jax_grad_of_a_long_map_fn_matches_tf_gradients(case):
    g, xv, expected = case
    forward = jta.import_graph_def(g.as_graph_def(), ["x:0"], ["loss:0"])
    _close([jax.grad(lambda v: forward(v)[0])(xv)], expected[1:])
