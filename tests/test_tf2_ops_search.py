"""Searches, bins, spectra, special functions and the other ops added with them, against TensorFlow:
values eagerly and under ``jax.jit``, and ``jax.grad`` against the tape where TensorFlow differentiates
the op."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.helpers.compare import assert_grad_is_the_tapes  # noqa: E402

X = np.linspace(-1, 1, 16).astype(np.float32)

# name -> (function of x (16,), whether TensorFlow differentiates it)
CASES = {
    "stft": (lambda x: tf.abs(tf.signal.stft(tf.exp(x), 8, 4)), True),  # (no bin near 0: |z| has no direction there)
    "fft": (lambda x: tf.math.real(tf.signal.ifft(tf.signal.fft(tf.complex(x, x * 2.0)) * 2.0)), True),
    "rfft2d": (lambda x: tf.math.imag(tf.signal.rfft2d(tf.reshape(x, [4, 4]), fft_length=[4, 6])), True),
    "irfft": (lambda x: tf.signal.irfft(tf.signal.rfft(x * x)), True),
    "complex_abs_at_zero": (lambda x: tf.abs(tf.complex(x - tf.stop_gradient(x[3]), x * 0.0)), True),
    "angle": (lambda x: tf.math.angle(tf.complex(x, 1.0 - x)), True),
    "histogram": (lambda x: tf.histogram_fixed_width(x * 1.5, [-1.0, 1.0], nbins=4), False),
    "searchsorted": (lambda x: tf.searchsorted(tf.reshape(x, [2, 8]), tf.reshape(x[:6] * 0.9, [2, 3]), side="right")
                     + tf.searchsorted(tf.reshape(x, [2, 8]), tf.reshape(x[3:9], [2, 3])), False),
    "bucketize": (lambda x: tf.raw_ops.Bucketize(input=x, boundaries=[-0.5, 0.0, 0.5]), False),
    "xlogy": (lambda x: tf.math.xlogy(tf.nn.relu(x), x + 2.0) + tf.math.xlog1py(x, x * x), True),
    "is_nan_inf": (lambda x: tf.where(tf.math.is_nan(tf.math.log(x)) | tf.math.is_inf(1.0 / x), 0.0, x), True),
    "inverse_trig": (lambda x: tf.atan(x) + tf.asin(x * 0.5) + tf.acos(x * 0.5), True),
    "diag_part": (lambda x: tf.linalg.tensor_diag_part(tf.reshape(x, [4, 4])), True),
    "lu": (lambda x: tf.linalg.lu_solve(*tf.linalg.lu(tf.reshape(x, [4, 4]) + 3.0 * tf.eye(4)), x[:4, None])
           + tf.cast(tf.linalg.lu(tf.reshape(x, [4, 4]))[1][:, None], tf.float32), False),  # (TF: no gradient)
    "betainc_zeta": (lambda x: tf.math.betainc(tf.abs(x) + 1.0, 2.0 - x, tf.sigmoid(x * 3.0))
                     + tf.math.zeta(tf.abs(x) + 2.0, tf.abs(x) + 0.5), True),
    "scatter_norm_unravel": (lambda x: tf.tensor_scatter_nd_max(x, [[0], [5]], x[8:10] * 3.0)
                             + tf.tensor_scatter_nd_sub(x, [[1], [1]], x[2:4]) + tf.math.reduce_euclidean_norm(x)
                             + tf.cast(tf.reduce_sum(tf.unravel_index([5, 0, 7], [2, 4])), tf.float32), True),
}


@pytest.mark.parametrize("name", [n if k % 2 == 0 else pytest.param(n, marks=pytest.mark.long_only)
                                  for k, n in enumerate(CASES)])  # (half by default, all under --long)
def test_op_matches_tensorflow(name: str) -> None:
    build, differentiable = CASES[name]
    f = tf.function(build, input_signature=[tf.TensorSpec(X.shape, tf.float32)])
    want = f(X).numpy()
    jax_fn, params = jta.import_function(f, X)
    for got in (jax_fn(params, X), jax.jit(jax_fn)(params, X)):
        assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype, (got, want)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    if differentiable:
        assert_grad_is_the_tapes(build, jax_fn, params, X, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("dims", [(2, 5), (3, 4, 2)])
def test_unravel_index_is_tensorflows_kernel(dims: tuple[int, ...]) -> None:
    """Red-team batch 22: an index past the dimensions' product fails with TensorFlow's text (jta clamped it,
    eagerly and compiled: a silent value); a negative one is not checked, and divides as C does (towards zero),
    where ``jnp.unravel_index`` wraps it."""
    f = tf.function(lambda i: tf.unravel_index(i, dims))
    ids = np.array([0, 3, 9, -1, -13, 7], np.int32)
    fn, params = jta.import_function(f, ids)
    for run in (fn, jax.jit(fn), jta.checked(jax.jit(fn))):
        np.testing.assert_array_equal(run(params, ids), f(ids).numpy())
    bad = np.array([1, 0, 2, 0, 3, int(np.prod(dims))], np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="index is out of bound as with dims"):
        f(bad)
    for run in (fn, jta.checked(jax.jit(fn))):
        with pytest.raises(jta.errors.InvalidArgumentError, match="index is out of bound as with dims"):
            run(params, bad)


def test_bincount_of_no_entries_known_while_tracing() -> None:
    """Red-team batch 22: ``bincount`` of an empty vector fixed while tracing raised NumPy's reshape error."""
    f = tf.function(lambda x: tf.math.bincount(tf.constant([], tf.int32), minlength=3) + x)
    fn, params = jta.import_function(f, np.int32(1))
    np.testing.assert_array_equal(fn(params, np.int32(1)), f(np.int32(1)).numpy())
