"""``tf.unique`` (``Unique``, ``UniqueV2``, ``UniqueWithCounts``) through ``jta.import_function``, against
TensorFlow: the distinct entries in first-occurrence order (``-0.0`` equal to ``0.0``, each NaN distinct),
slices along an axis, counts, TensorFlow's errors; eagerly and under ``jta.checked`` (the count is the
data's: learned at run time), refused under a bare ``jit``; and the embedding idiom's train step."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402

NAN = np.float32(np.nan)

# name -> (function, argument)
CASES = {
    "floats": (lambda x: tf.unique(x), np.array([3, 1, NAN, 3, -0.0, 0, NAN, 1], np.float32)),
    "counts_int64": (lambda x: tf.unique_with_counts(x, out_idx=tf.int64),
                     np.array([5, 5, 2**40, 7, 2**40 + 1, 2**40], np.int64)),
    "empty": (lambda x: tf.unique(x), np.zeros(0, np.float32)),
    "rows": (lambda x: tf.raw_ops.UniqueV2(x=x, axis=[0]), np.array([[1, 2], [3, 4], [1, 2], [0, 2]], np.int32)),
    "columns_counts": (lambda x: tf.raw_ops.UniqueWithCountsV2(x=x, axis=tf.constant([-1], tf.int64)),
                       np.array([[1, 2, 1, 1], [3, 4, 3, 0]], np.float32)),
    "nan_rows": (lambda x: tf.raw_ops.UniqueV2(x=x, axis=[0]), np.array([[NAN, 1], [NAN, 1], [2, 1]], np.float32)),
    "not_a_vector": (lambda x: tf.unique(x), np.ones((2, 2), np.float32)),
    "axis_outside": (lambda x: tf.raw_ops.UniqueV2(x=x, axis=[2]), np.ones((2, 2), np.float32)),
    "two_axes": (lambda x: tf.raw_ops.UniqueV2(x=x, axis=[0, 1]), np.ones((2, 2), np.float32)),
}


def _outcome(fn, *args):
    try:
        return "ok", [np.asarray(v) for v in fn(*args)]
    except Exception as e:  # noqa: BLE001 - compared with TensorFlow's
        return type(e).__name__, str(e)


def _same(got, want) -> None:
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        for g, w in zip(got[1], want[1], strict=True):
            assert g.shape == w.shape and g.dtype == jax.dtypes.canonicalize_dtype(w.dtype), (got, want)
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w)) if g.dtype.kind == "f" else None
    else:
        assert got[1].split("): ", 1)[1] in want[1], (got, want)


@pytest.mark.parametrize("name", [n if n in ("floats", "counts_int64", "columns_counts", "two_axes")
                                  else pytest.param(n, marks=pytest.mark.long_only) for n in CASES])
def test_unique_matches_tensorflow(name: str) -> None:
    build, x = CASES[name]
    with jax.enable_x64(x.dtype == np.int64):  # (int64 is int64 in JAX only under x64)
        _compare(build, x)


def _compare(build, x: np.ndarray) -> None:
    # (of unknown rank: TensorFlow's shape inference would reject the bad cases while tracing)
    f = tf.function(lambda v: list(build(v)), input_signature=[tf.TensorSpec(None, tf.as_dtype(x.dtype))])
    want = _outcome(f, x)
    jax_fn, params = jta.import_function(f, x)
    _same(_outcome(jax_fn, params, x), want)
    checked = jta.checked(jax.jit(jax_fn))
    _same(_outcome(checked, params, x), want)
    if want[0] == "ok" and x.size:  # (a bare jit cannot know the count: refused, naming jta.checked)
        with pytest.raises(jta.errors.UnimplementedError, match="jta.checked learns it"):
            jax.jit(jax_fn)(params, x)


@pytest.mark.long_only  # (4 s; the cases above run unique under jta.checked by default)
def test_embedding_of_unique_ids_trains_as_tensorflow() -> None:
    """The deduplicated lookup: gather the distinct ids' rows once, then each id's row by ``idx``. The
    tape's gradient (a gather's, of the table) and ``jax.grad`` under ``jta.checked`` agree with TF's,
    for two batches with different counts (one compilation each)."""
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(6, 2) / 7.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def step(ids):
        with tf.GradientTape() as tape:
            y, idx = tf.unique(ids)
            rows = tf.gather(tf.gather(table, y), idx)
            loss = tf.reduce_sum(tf.sin(rows) * tf.cast(tf.range(tf.size(ids))[:, None] + 1, tf.float32))
        return loss, tf.convert_to_tensor(tape.gradient(loss, table))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def forward(ids):
        y, idx = tf.unique(ids)
        rows = tf.gather(tf.gather(table, y), idx)
        return tf.reduce_sum(tf.sin(rows) * tf.cast(tf.range(tf.size(ids))[:, None] + 1, tf.float32))

    ids_a = np.array([4, 1, 4, 0, 1], np.int32)
    jax_step, params = jta.import_function(step, ids_a)
    jax_fwd, _ = jta.import_function(forward, ids_a)
    key = next(iter(params))
    run = jta.checked(jax.jit(jax_step))
    grad = jta.checked(jax.jit(jax.grad(lambda p, i: jax_fwd(p, i))))
    for ids in (ids_a, np.array([2, 2, 5, 3, 3, 3, 0], np.int32)):
        loss, g = step(ids)
        got_loss, got_g = run(params, ids)
        np.testing.assert_allclose(got_loss, loss.numpy(), rtol=1e-5)
        np.testing.assert_allclose(got_g, g.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad(params, ids)[key], g.numpy(), rtol=1e-5, atol=1e-6)
    assert jnp.shape(got_g) == (6, 2)
