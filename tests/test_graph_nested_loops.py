"""jta.import_graph_def: loops whose body creates a loop, with conds around or between them, against Session.run.

Each case is a class of TF1 programs the fuzzer (``tests/helpers/tf1_programs.py``) found failing where
TensorFlow runs them; each graph holds the forward values and TF's ``tf.compat.v1.gradients``, compared with
``Session.run`` eagerly and under ``jax.jit``, and ``jax.grad`` of the imported forward with TF's gradient.

- A ``tf.scan`` nested in a ``tf.foldl`` inside a ``tf.cond``: the inner scan's arrays are created once per
  outer step, and so are their gradient arrays in TF's gradient loop. Under a cond TensorFlow guards the pop
  of the forward array's handle with a ``Switch``: the importer renews the gradient arrays at each step of
  the gradient loop also then (they were created once for the whole loop: "Could not write to TensorArray
  index 0 because it has already been read").
- A loop run step by step whose cond reads the counter: a ``ControlTrigger`` is never dead (TensorFlow's
  executor rule), so the gradient's forward count, which waits on one, does not die with a pruned branch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta import errors  # noqa: E402
from tests.helpers.tfgraph import k_graph  # noqa: E402


def _check(g, feeds: dict[str, Any], x: str = "x:0", jax_grad: bool = True) -> None:
    """``y:0`` and ``gx:0`` (TF's gradient of sum(y²) with respect to ``x``) of ``g`` imported, eagerly and
    under jit, against Session.run, and (``jax_grad``) jax.grad of the imported ``y`` against ``gx``."""
    import tensorflow as tf

    names = list(feeds)
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run(["y:0", "gx:0"], feeds)
    f = jta.import_graph_def(g.as_graph_def(), names, ["y:0", "gx:0"])
    args = [feeds[n] for n in names]
    for label, fn in (("eager", f), ("jit", jax.jit(f))):
        for got, want in zip(fn(*args), expected, strict=True):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5, err_msg=label)
    if not jax_grad:
        return
    k = names.index(x)

    def loss(v):
        return jnp.sum(f(*args[:k], v, *args[k + 1:])[0] ** 2)

    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(loss))(args[k])), expected[1], rtol=1e-5, atol=1e-5)


@pytest.mark.long_only  # (4 s; the other nested loops here keep the class by default)
def test_scan_nested_in_foldl_inside_a_cond():
    """F8: the gradient arrays of a loop created in an outer loop's body, with a cond around both (a fed
    predicate; a constant one failed the same way). The forward graph had no fault: jax.grad is not rerun."""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3, 2, 2], name="x")
        flag = tf.compat.v1.placeholder(tf.bool, [], name="flag")

        def nested():
            def inner(e):
                return tf.scan(lambda a, r: tf.tanh(a + r), e)
            return x * tf.foldl(lambda acc, e: tf.tanh(acc + inner(e)), x, initializer=tf.zeros([2, 2]))

        y = tf.cond(flag, nested, lambda: 0.5 * x)
        y = tf.identity(y, name="y")
        (gx,) = tf.compat.v1.gradients(tf.reduce_sum(y * y), [x])
        tf.identity(gx, name="gx")
    _check(g, {"x:0": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 2, 2), "flag:0": np.bool_(True)},
           jax_grad=False)


def test_loop_run_step_by_step_with_a_cond_on_its_counter():
    """F9: a loop run step by step (eagerly: a dynamic_size array grows, the count is data-dependent) whose
    cond reads the counter, static in each step: the untaken branch's gradient pushes are dead, and so was
    the ControlTrigger (f_sync) that TF's forward count waits on, which TensorFlow never makes dead; the
    count went dead and a dead marker reached JAX. (Under jit, stack() of the array's run-time size is refused:
    405, documented; there the counter is traced and no branch is dead.)"""
    import tensorflow as tf

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, [3, 2], name="x")

        def body(i, h, ta):
            v = tf.cond(i > 0, lambda: tf.sin(x[i]) * h, lambda: x[i] + 0.5)
            h = tf.tanh(h + v)
            return i + 1, h, ta.write(i, h)

        _, h, ta = tf.compat.v1.while_loop(
            lambda i, h, ta: tf.logical_and(i < 3, tf.reduce_sum(h) < 100.0), body,
            (tf.constant(0), tf.zeros([2]), tf.TensorArray(tf.float32, size=0, dynamic_size=True)))
        y = tf.identity(h + tf.reduce_sum(ta.stack(), 0), name="y")
        (gx,) = tf.compat.v1.gradients(tf.reduce_sum(y * y), [x])
        tf.identity(gx, name="gx")
        xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    with tf.compat.v1.Session(graph=g) as session:
        expected = session.run(["y:0", "gx:0"], {"x:0": xv})
    f = jta.import_graph_def(g.as_graph_def(), ["x:0"], ["y:0", "gx:0"])
    for got, want in zip(f(xv), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    # F10: under jit, neither a bounded lax.while_loop nor a masked scan keeps the growing array's structure:
    # the refusal names the array and the way out (it escaped as 418, "failed inside with Unstable").
    with pytest.raises(errors.UnimplementedError, match="TensorArrayV3 node TensorArray is dynamic_size and needs "
                       "a static capacity") as caught:
        jax.jit(f)(xv)
    assert "failed inside" not in str(caught.value)
