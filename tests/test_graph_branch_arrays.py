"""jta.import_graph_def: TensorArrays created inside a branch of a ``tf.cond`` whose predicate is fed.

Both branches of such a cond run (as JAX must), and each stateful op is selected on the predicate;
an array created in the branch is the branch's own, so its first write may fix its element shape
(``tf.map_fn``, ``tf.scan`` and ``tf.foldl`` make such arrays). Their gradient graphs pop stacks under
a cond inside the gradient loop, behind a control edge from the loop's ``Switch``, which is live
while one of the ``Switch``'s outputs is (TensorFlow's executor rule).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.helpers.compare import assert_session_outputs  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402

LOOPS = {
    "map_fn": lambda tf, x: tf.map_fn(tf.sin, x),
    "foldl": lambda tf, x: x * tf.foldl(lambda a, e: a + tf.sin(e), x, initializer=tf.zeros([3])),
    "foldr_tuple": lambda tf, x: x * tf.foldr(lambda a, e: (a[0] + e[0] * a[1], a[1] * 0.5), (x, x),
                                              initializer=(tf.zeros([3]), tf.ones([3])))[0],
}
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


@pytest.fixture(scope="module", params=sorted(LOOPS))
def case(request):
    """(graph_def, {flag: Session.run's [y, dy/dx]}) for ``y = cond(flag, loop(x), 2x)``."""
    import tensorflow as tf

    with k_graph() as graph:
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        flag = tf.compat.v1.placeholder(tf.bool, [], name="flag")
        y = tf.identity(tf.cond(flag, lambda: LOOPS[request.param](tf, x), lambda: 2.0 * x), name="y")
        tf.identity(tf.gradients(tf.reduce_sum(y * y), [x])[0], name="gx")
        with tf.compat.v1.Session(graph=graph) as session:
            expected = {f: session.run(["y:0", "gx:0"], {"x:0": X, "flag:0": f}) for f in (True, False)}
    return graph.as_graph_def(), expected


def test_the_loop_and_its_tf_gradient_match_session_run(case):
    graph_def, expected = case
    f = jta.import_graph_def(graph_def, inputs=["x:0", "flag:0"], outputs=["y:0", "gx:0"])
    for flag in (True, False):
        assert_session_outputs(jax.jit(f)(X, np.bool_(flag)), expected[flag])
    assert_session_outputs(f(X, np.bool_(True)), expected[True])  # eagerly: op by op


def test_jax_grad_of_the_forward_matches_tf_gradient(case):
    graph_def, expected = case
    forward = jta.import_graph_def(graph_def, inputs=["x:0", "flag:0"], outputs=["y:0"])
    for flag in (True, False):
        grad = jax.jit(jax.grad(lambda x, p: (forward(x, p)[0] ** 2).sum()))(X, np.bool_(flag))
        np.testing.assert_allclose(grad, expected[flag][1], rtol=1e-5, atol=1e-5)


def test_tf_gradient_of_a_gather_in_a_branch_is_refused_with_jax_grad_as_the_way_out():
    """TF's gradient of ``embedding_lookup`` in a run-time cond merges IndexedSlices of the gathered rows
    with the other branch's dense zeros (a Merge of two shapes): refused, naming ``jax.grad`` of the
    imported forward, which gives TF's gradient."""
    import tensorflow as tf

    from jta import errors

    table = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    with k_graph() as graph:
        t = tf.compat.v1.placeholder(tf.float32, [5, 3], name="table")
        flag = tf.compat.v1.placeholder(tf.bool, [], name="flag")
        ids = tf.constant([1, 4, 1, 0], tf.int32)
        y = tf.identity(tf.cond(flag, lambda: tf.tanh(tf.nn.embedding_lookup(t, ids)), lambda: tf.ones([4, 3])),
                        name="y")
        (grad,) = tf.gradients(tf.reduce_sum(y * y), [t])
        tf.identity(tf.convert_to_tensor(grad), name="gt")
        with tf.compat.v1.Session(graph=graph) as session:
            expected = {f: session.run("gt:0", {"table:0": table, "flag:0": f}) for f in (True, False)}
    with pytest.raises(errors.UnimplementedError, match="differentiate the imported forward graph with jax.grad"):
        jax.jit(jta.import_graph_def(graph.as_graph_def(), ["table:0", "flag:0"], ["gt:0"]))(table, np.bool_(True))
    forward = jta.import_graph_def(graph.as_graph_def(), ["table:0", "flag:0"], ["y:0"])
    grad = jax.jit(jax.grad(lambda t, p: (forward(t, p)[0] ** 2).sum()))
    for flag_value in (True, False):
        np.testing.assert_allclose(grad(table, np.bool_(flag_value)), expected[flag_value], rtol=1e-5, atol=1e-6)
