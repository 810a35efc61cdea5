"""``tf.random.experimental.stateless_shuffle`` (``StatelessShuffle``) and the shape checks of the solves
(``MatrixSolve``, ``MatrixTriangularSolve``, ``tf.linalg.cholesky_solve``, ``tf.linalg.lstsq``,
``TridiagonalSolve``) of ``jta.import_function``, against TensorFlow.

The shuffle is TensorFlow's permutation bit for bit (its Philox stream from the key and counter,
Fisher-Yates over the first axis), eagerly and under ``jax.jit``, with a constant seed and with a seed
passed in (traced); TensorFlow registers no gradient for it: a gradient reaching it raises TensorFlow's
``LookupError``, and one that does not (shuffled indices feeding a gather) matches the tape and the
imported train step. A solve whose right-hand side does not fit its matrix raises TensorFlow's class
with its kernel's text, eagerly and under ``jit`` (shapes are static there: decided while tracing),
where the TensorFlow program has no static shapes (``None`` dimensions: TensorFlow's kernel decides).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import jta  # noqa: E402
from jta import errors  # noqa: E402
from tests.helpers.tf2_steps import op_types, tape_step  # noqa: E402


def _spec(a: np.ndarray) -> Any:
    return tf.TensorSpec(a.shape, tf.as_dtype(a.dtype))


def _same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)


# -- StatelessShuffle -------------------------------------------------------------------------------------
SEED = np.int32([3, 9])
SHAPES = {
    "rows0": np.arange(0, dtype=np.float32),
    "rows1": np.arange(1, dtype=np.float32),
    "rows2": np.arange(2, dtype=np.float32),
    "rows7": np.arange(7, dtype=np.float32),
    "rows300": np.arange(300, dtype=np.float32),
    "matrix": np.arange(24, dtype=np.float32).reshape(6, 4),
    "int3d": np.arange(60, dtype=np.int32).reshape(5, 3, 4),
    "no_columns": np.zeros((4, 0), np.float32),
    "one_column": np.arange(5, dtype=np.float32).reshape(5, 1),
    "scalar": np.float32(2.5),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_stateless_shuffle_is_tensorflows_permutation(case: str) -> None:
    """A seed passed in (the key and counter traced under ``jit``): TensorFlow's rows, bit for bit."""
    x = np.asarray(SHAPES[case])
    seed = np.int32([-7, 123456789]) if case == "int3d" else SEED
    f = tf.function(lambda v, s: tf.random.experimental.stateless_shuffle(v, seed=s),
                    input_signature=[_spec(x), _spec(seed)])
    want = f(x, seed).numpy()
    fn, params = jta.import_function(f, x, seed)
    _same(fn(params, x, seed), want, "eager")
    _same(jax.jit(fn)(params, x, seed), want, "jit")
    if np.ndim(x) and np.shape(x)[0] > 2 and np.size(x):  # (a permutation that moves rows, else the test proves little)
        assert not np.array_equal(want, x)


@pytest.mark.parametrize("alg", ["philox", "auto_select"])
def test_stateless_shuffle_of_a_constant_seed(alg: str) -> None:
    """A constant seed (the order computed while tracing), both algorithms TensorFlow's CPU kernel runs."""
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    f = tf.function(lambda v: tf.random.experimental.stateless_shuffle(v, seed=[5, 8], alg=alg),
                    input_signature=[_spec(x)])
    want = f(x).numpy()
    fn, params = jta.import_function(f, x)
    _same(fn(params, x), want, "eager")
    _same(jax.jit(fn)(params, x), want, "jit")


def test_a_gradient_reaching_stateless_shuffle_raises_tensorflows_lookup_error() -> None:
    x = np.arange(6, dtype=np.float32)
    f = tf.function(lambda v: tf.random.experimental.stateless_shuffle(v, seed=[1, 2]) * 2.0,
                    input_signature=[_spec(x)])
    # (a function called under a tape builds its gradient at once: "No gradient defined for operation")
    with pytest.raises(LookupError, match="StatelessShuffle"), tf.GradientTape() as tape:
        v = tf.constant(x)
        tape.watch(v)
        tape.gradient(tf.reduce_sum(f(v) * tf.range(6.0)), v)
    fn, params = jta.import_function(f, x)
    with pytest.raises(LookupError, match="gradient registry has no entry for: StatelessShuffle"):
        jax.jit(jax.grad(lambda v: jnp.sum(fn(params, v) * jnp.arange(6.0))))(x)


def test_shuffled_minibatch_gradient_and_train_step() -> None:
    """Red team 20's program: a seeded order of the rows (integer indices: no gradient reaches the
    shuffle) picks a minibatch; ``jax.grad`` and the imported train step match the tape's."""
    x = np.arange(12, dtype=np.float32).reshape(6, 2) / 7
    w = np.float32([[0.5, -1.0], [2.0, 0.25]])
    seed = np.int32([3, 9])

    def loss(x: Any, w: Any, seed: Any) -> Any:
        order = tf.random.experimental.stateless_shuffle(tf.range(tf.shape(x)[0]), seed=seed)
        batch = tf.gather(x, order[:4])
        return tf.reduce_sum(tf.tanh(batch @ w) * tf.range(1.0, 9.0)[:, None][:4])

    f = tf.function(loss, input_signature=[_spec(x), _spec(w), _spec(seed)])
    fn, params = jta.import_function(f, x, w, seed)
    np.testing.assert_allclose(fn(params, x, w, seed), f(x, w, seed).numpy(), rtol=1e-6)
    xs = [tf.constant(x), tf.constant(w)]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        value = loss(*xs, seed)
    want = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(value, xs)]  # (x's: IndexedSlices)
    got = jax.jit(jax.grad(lambda a, b: fn(params, a, b, seed), argnums=(0, 1)))(x, w)
    for g, t in zip(got, want, strict=True):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-6)
    step = tape_step(loss, (x, w, seed), (0, 1))
    assert "StatelessShuffle" in op_types(step)
    jax_step, step_params = jta.import_function(step, x, w, seed)
    for g, t in zip(jax.jit(jax_step)(step_params, x, w, seed), step(x, w, seed), strict=True):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-5, atol=1e-6)


# -- solves whose right-hand side does not fit ------------------------------------------------------------
EYE = np.eye(3, dtype=np.float32) * 2 + np.tril(np.ones((3, 3), np.float32))
COL3, COL4 = np.ones((3, 1), np.float32), np.ones((4, 1), np.float32)

# (program, matrix, right-hand side): TensorFlow's kernel raises InvalidArgumentError on each
SOLVES: dict[str, Any] = {
    "solve_rows": (tf.linalg.solve, EYE, COL4),
    "solve_adjoint_rows": (lambda a, b: tf.linalg.solve(a, b, adjoint=True), EYE, np.ones((2, 3), np.float32)),
    "solve_not_square": (tf.linalg.solve, np.ones((3, 4), np.float32), COL3),
    "solve_batches": (tf.linalg.solve, np.stack([EYE, EYE]), np.stack([COL3] * 3)),
    "solve_no_broadcast": (tf.linalg.solve, EYE[None], np.stack([COL3] * 2)),
    "triangular_rows": (tf.linalg.triangular_solve, EYE, COL4),
    "triangular_upper_adjoint_rows": (lambda a, b: tf.linalg.triangular_solve(a, b, lower=False, adjoint=True),
                                      EYE, COL4),
    "triangular_not_square": (tf.linalg.triangular_solve, np.ones((3, 4), np.float32), COL3),
    "triangular_batches": (tf.linalg.triangular_solve, np.stack([EYE, EYE]), np.stack([COL3] * 3)),
    "solve_vector_rhs": (tf.linalg.solve, EYE, np.ones(3, np.float32)),  # (ranks unknown: see below)
    "triangular_vector_rhs": (tf.linalg.triangular_solve, EYE, np.ones(3, np.float32)),
    "cholesky_solve_rows": (lambda a, b: tf.linalg.cholesky_solve(tf.linalg.cholesky(a), b), EYE @ EYE.T, COL4),
    "tridiagonal_rows": (lambda d, b: tf.linalg.tridiagonal_solve(d, b), np.ones((3, 3), np.float32), COL4),
    # (fast=True is a composite whose first mismatch is a MatMul's: TensorFlow's "Matrix size-incompatible")
    "lstsq_rows": (lambda a, b: tf.linalg.lstsq(a, b), EYE, COL4),
    # the products (MatMul, BatchMatMulV2) whose operands do not fit
    "matmul_rows": (lambda a, b: tf.raw_ops.MatMul(a=a, b=b), EYE, COL4),
    "matmul_transposed": (lambda a, b: tf.raw_ops.MatMul(a=a, b=b, transpose_a=True), np.ones((3, 2), np.float32),
                          COL4),
    "matmul_vector": (lambda a, b: tf.raw_ops.MatMul(a=a, b=b), np.ones(3, np.float32), COL3),
    "batch_matmul_rows": (tf.matmul, np.stack([EYE, EYE]), np.stack([COL4] * 2)),
    "batch_matmul_adjoint": (lambda a, b: tf.matmul(a, b, adjoint_b=True), np.stack([EYE, EYE]),
                             np.stack([COL4] * 2)),
    "batch_matmul_batches": (tf.matmul, np.stack([EYE, EYE]), np.stack([COL3] * 3)),
    "batch_matmul_vector": (lambda a, b: tf.raw_ops.BatchMatMulV2(x=a, y=b), np.stack([EYE, EYE]),
                            np.ones(3, np.float32)),
}


def _tf_error(f: Any, *args: np.ndarray) -> Exception:
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        f(*args)
    return caught.value


@pytest.mark.parametrize("case", list(SOLVES))
def test_a_rhs_that_does_not_fit_raises_tensorflows_error(case: str) -> None:
    """No static shapes in the TensorFlow program (its kernel decides); jta decides while tracing, so
    an eager call and ``jit`` raise before running: TensorFlow's class and its kernel's text."""
    build, a, b = SOLVES[case]
    # (a rank TensorFlow knows it checks while tracing, with a ValueError: those are of unknown rank)
    shapes = [None, None] if "vector" in case else [[None] * a.ndim, [None] * b.ndim]
    f = tf.function(build, input_signature=[tf.TensorSpec(shape, tf.float32) for shape in shapes])
    want = str(_tf_error(f, a, b))
    fn, params = jta.import_function(f, a, b)
    for mode, g in (("eager", fn), ("jit", jax.jit(fn))):
        with pytest.raises(errors.InvalidArgumentError) as caught:
            g(params, a, b)
        text = re.sub(r"^Node \S+ \(\w+\): ", "", str(caught.value).splitlines()[0])
        assert text in want, (mode, text, want)


@pytest.mark.parametrize("case", ["solve", "solve_batch", "triangular_broadcast"])
def test_solves_that_fit_still_match_tensorflow(case: str) -> None:
    """The checks refuse nothing TensorFlow runs: a solve, a batch of them, and a triangular solve whose
    matrix broadcasts over the right-hand sides' batch (TensorFlow's ``MatMulBCast``)."""
    rng = np.random.default_rng(4)
    a, b = EYE, rng.standard_normal((3, 2)).astype(np.float32)
    build: Any = tf.linalg.solve
    if case == "solve_batch":
        a, b = np.stack([EYE, EYE.T]), np.stack([b, -b])
    elif case == "triangular_broadcast":
        build, b = tf.linalg.triangular_solve, np.stack([b, 2 * b])
    f = tf.function(build, input_signature=[_spec(a), _spec(b)])
    fn, params = jta.import_function(f, a, b)
    want = f(a, b).numpy()
    np.testing.assert_allclose(fn(params, a, b), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jax.jit(fn)(params, a, b), want, rtol=1e-5, atol=1e-6)
