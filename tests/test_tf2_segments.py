"""Segment reductions of ``jta.import_function`` against TensorFlow: values, the row count the ids
decide (``Segment*``: the last id plus one), TensorFlow's errors for ids it rejects (class and text:
not sorted, negative, an unsorted id past ``num_segments``), eagerly and under ``jta.checked`` (from
compiled code), and gradients.

The ids enumerate each way TensorFlow's kernel (``segment_reduction_ops_impl.h``) checks them: sorted,
with gaps, empty segments, a decrease at the start, middle or end, negative first or last, all
negative. By default six of the twelve ids run, every reduction eagerly and two of them under
``jta.checked`` (rotating); ``--long`` runs all the ids, every reduction under ``jta.checked`` too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta.graph_import._messages import GraphError  # noqa: E402
from tests.helpers import budget  # noqa: E402
from tests.helpers.compare import assert_same_outcome, outcome  # noqa: E402

SORTED = ("segment_sum", "segment_max", "segment_min", "segment_mean", "segment_prod")
UNSORTED = ("unsorted_segment_sum", "unsorted_segment_max", "unsorted_segment_prod")
IDS = [[0, 0, 1, 1], [2, 2, 3, 3], [0, 1, 2, 3], [3, 3, 3, 3], [0, 2, 1, 1], [1, 0, 0, 0], [5, 6, 0, 0],
       [-1, 0, 0, 1], [0, 0, 0, -1], [-1, -1, -1, -1], [0, 0, -2, -2], [-2, -1, 0, 1]]
X = np.arange(8, dtype=np.float32).reshape(4, 2) - 3.0


def _function(op: str, ids_shape: tuple[int, ...], rows: tuple[int, ...]) -> Any:
    fn = getattr(tf.math, op)
    args = (3,) if op.startswith("unsorted") else ()
    return tf.function(lambda x, s: fn(x, s, *args),
                       input_signature=[tf.TensorSpec(rows, tf.float32), tf.TensorSpec(ids_shape, tf.int32)])


# (by default one of each kind of ids: sorted, a decrease, a negative last id, all negative; every one under --long)
@pytest.mark.long
@pytest.mark.parametrize("k", range(len(IDS)) if budget.long_run() else [0, 4, 5, 8, 9, 11])
def test_sorted_segments_match_tensorflow(k: int) -> None:
    ids = np.array(IDS[k], np.int32)
    checked = SORTED if budget.long_run() else (SORTED[k % 5], SORTED[(k + 2) % 5])
    for op in SORTED:
        f = _function(op, (4,), (4, 2))
        want = outcome(f, X, ids)
        jax_fn, params = jta.import_function(f, X, ids)
        assert_same_outcome(outcome(jax_fn, params, X, ids), want)
        if op in checked:
            assert_same_outcome(outcome(jta.checked(jax.jit(jax_fn)), params, X, ids), want)


@pytest.mark.parametrize("ids", [[[0, 2], [1, 1]], [[3, 0], [0, 1]], [[0, 5], [1, 1]], [[-1, 0], [0, 2]]])
def test_unsorted_segments_match_tensorflow(ids: list[list[int]]) -> None:
    """An id at or past ``num_segments`` is TensorFlow's error, naming its place (``[0,1]``) from
    compiled code too; a negative id drops its row."""
    ids_ = np.array(ids, np.int32)
    x = np.arange(4, dtype=np.float32).reshape(2, 2) + 1.0
    for op in UNSORTED:
        f = _function(op, (2, 2), (2, 2))
        want = outcome(f, x, ids_)
        jax_fn, params = jta.import_function(f, x, ids_)
        assert_same_outcome(outcome(jax_fn, params, x, ids_), want)
        assert_same_outcome(outcome(jta.checked(jax.jit(jax_fn)), params, x, ids_), want)


@pytest.mark.long_only  # (5 s; run-time ids out of a loop, and segment ops in loops, run by default)
def test_run_time_ids_in_a_loop_with_gradients() -> None:
    """Segment ids given as an argument, in a loop body that adds the result to a fixed shape: a bare
    jit refuses (the row count is the data's), naming jta.checked; jta.checked (whose first guess, 0
    rows, cannot be added to ``[3]``: it learns the count from the program up to that op) gives
    TensorFlow's value, ``jax.grad`` matches the tape, and so does the imported train step."""
    w = tf.Variable(np.linspace(0.5, 1.5, 6).astype(np.float32), name="w")
    spec = [tf.TensorSpec([6], tf.float32), tf.TensorSpec([6], tf.int32)]

    def forward(x: Any, seg: Any) -> Any:
        acc = tf.zeros([3])
        for i in tf.range(2):
            y = x * w + tf.cast(i, tf.float32)
            acc += tf.math.segment_sum(y, seg) * tf.math.unsorted_segment_max(y, seg, 3)
        return tf.reduce_sum(acc ** 2)

    @tf.function(input_signature=spec)
    def train(x: Any, seg: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = forward(x, seg)
        return loss, tape.gradient(loss, w)

    f = tf.function(forward, input_signature=spec)
    x, seg = np.array([0.5, -1.0, 2.0, 0.25, 1.5, -0.5], np.float32), np.array([0, 0, 1, 1, 1, 2], np.int32)
    jax_fn, params = jta.import_function(f, x, seg)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked learns it") as info:
        jax.jit(jax_fn)(params, x, seg)
    assert GraphError.NOT_STATIC.matches(info.value)
    checked = jta.checked(jax.jit(jax_fn))
    np.testing.assert_allclose(checked(params, x, seg), f(x, seg), rtol=1e-5)
    with tf.GradientTape() as tape:
        loss = f(x, seg)
    grad = jta.checked(jax.jit(jax.grad(jax_fn)))(params, x, seg)
    np.testing.assert_allclose(grad["w"], tape.gradient(loss, w).numpy(), rtol=1e-5)
    step, params = jta.import_function(train, x, seg)
    for got, want in zip(jta.checked(jax.jit(step))(params, x, seg), train(x, seg), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    bad = np.array([0, 0, 2, 1, 1, 2], np.int32)  # (a run of the same compilation: its error from compiled code)
    with pytest.raises(jta.errors.InvalidArgumentError, match="segment ids are not increasing"):
        checked(params, x, bad)
    with pytest.raises(jta.errors.InvalidArgumentError, match="segment ids are not increasing"):
        jta.checked(jax.jit(jax_fn))(params, x, bad)  # (nothing learned: from the program up to the first op)


def test_a_traced_segment_product_has_the_derivative() -> None:
    """``SegmentProd`` of traced ids (a segmented scan) against the product of constant ids, with a zero
    in a segment (whose derivative a quotient would lose)."""
    data = jnp.array([2.0, 0.0, 3.0, -1.5, 4.0, 0.5])
    ids = np.array([0, 0, 0, 2, 2, 3], np.int32)
    f = tf.function(lambda x, s: tf.math.segment_prod(x, s),
                    input_signature=[tf.TensorSpec([6], tf.float32), tf.TensorSpec([6], tf.int32)])
    jax_fn, params = jta.import_function(f, np.asarray(data), ids)
    x0 = tf.constant(np.asarray(data))
    with tf.GradientTape() as tape:
        tape.watch(x0)
        loss = tf.reduce_sum(f(x0, ids) * tf.constant([1.0, 2.0, 3.0, 4.0]))
    grad = jta.checked(jax.jit(jax.grad(lambda x, s: jnp.sum(jax_fn(params, x, s) * jnp.array([1.0, 2.0, 3.0, 4.0])))))
    np.testing.assert_allclose(grad(data, ids), tape.gradient(loss, x0).numpy(), rtol=1e-6)
