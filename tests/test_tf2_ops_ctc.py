"""CTC and tridiagonal ops of ``jta.import_function``, against TensorFlow: ``CTCLoss`` (``tf.nn.ctc_loss`` of
sparse labels, tf_keras's ``ctc_batch_cost``, the raw op with each attribute), ``CTCGreedyDecoder``
(``tf.nn.ctc_greedy_decoder``), ``TridiagonalSolve`` (each algorithm: partial pivoting, Thomas,
``perturb_singular``; singular and near-singular systems) and ``TridiagonalMatMul``.

Each program runs eagerly and under ``jax.jit`` (the decoder's data-sized result under ``jta.checked``);
``jax.grad`` matches the tape's gradient and the imported train step matches TensorFlow's. Bad inputs fail
with TensorFlow's class and text. Tolerances: float32 rounding (CTC: its sums of logs run in another order;
the solves: a few ulp, relative 2e-5 for these well-scaled systems).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import jax  # noqa: E402

import jta  # noqa: E402
from tests.helpers import budget  # noqa: E402
from tests.test_tf2_ops_extra import _check  # noqa: E402

RNG = np.random.default_rng(11)


def _sparse(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A sparse tensor's indices and values of label rows."""
    indices = [[b, t] for b, row in enumerate(rows) for t in range(len(row))]
    return np.array(indices, np.int64).reshape(-1, 2), np.array([v for row in rows for v in row], np.int32)


def _raw_ctc(**attrs: Any) -> Any:
    def loss(x: Any, indices: Any, values: Any, lengths: Any) -> Any:
        return tf.raw_ops.CTCLoss(inputs=x, labels_indices=indices, labels_values=values, sequence_length=lengths,
                                  **attrs)
    return loss


LABELS = [[1, 2], [3], [1, 1, 2]]


@pytest.mark.long_only  # (3 s each; the default runs tf.nn.ctc_loss below)
@pytest.mark.parametrize("attrs", [{}, {"ctc_merge_repeated": False}, {"preprocess_collapse_repeated": True},
                                   {"ignore_longer_outputs_than_inputs": True}])
def test_ctc_loss_op_matches_tensorflow(attrs: dict[str, bool]) -> None:
    """Both outputs (loss, gradient) eagerly and under jit; an empty sequence, a label ending at a value
    >= the blank, and (ignored) labels longer than their sequence."""
    x = RNG.normal(size=(6, 3, 5)).astype(np.float32)
    indices, values = _sparse([[1, 2, 4], [3], [1, 1, 2]])
    lengths = np.array([6, 0 if attrs.get("ignore_longer_outputs_than_inputs") else 4, 2 if attrs else 5], np.int32)
    if not attrs.get("ignore_longer_outputs_than_inputs"):
        lengths[2] = 5
    _check(lambda *a: list(_raw_ctc(**attrs)(*a)), x, indices, values, lengths, rtol=2e-5, atol=2e-6, wrt=())


@pytest.mark.long_only
def test_ctc_loss_no_path_is_infinite_with_the_softmax_as_gradient() -> None:
    """A repeated label needs a blank between: 2 steps for ``[1, 1]`` is no path (loss inf); the gradient
    is the loss's cotangent times the softmax, as TensorFlow's."""
    x = RNG.normal(size=(2, 1, 4)).astype(np.float32)
    indices, values = _sparse([[1, 1]])
    _check(lambda *a: list(_raw_ctc()(*a)), x, indices, values, np.array([2], np.int32), rtol=1e-6, wrt=())
    _check(lambda *a: _raw_ctc()(*a)[0], x, indices, values, np.array([2], np.int32), rtol=1e-6)  # (TF's: g * softmax)


def test_tf_nn_ctc_loss_of_sparse_labels_differentiates_as_tensorflow() -> None:
    """``tf.nn.ctc_loss`` with a ``SparseTensor`` (its CPU function runs ``CTCLoss``): values, ``jax.grad``
    against the tape (TensorFlow's ``_CTCLossGrad``) and the imported train step."""
    x = RNG.normal(size=(3, 7, 6)).astype(np.float32)
    indices, values = _sparse(LABELS)

    def loss(logits: Any, indices: Any, values: Any) -> Any:
        labels = tf.SparseTensor(indices, values, [3, 3])
        return tf.nn.ctc_loss(labels, logits, None, tf.constant([7, 5, 6]), logits_time_major=False, blank_index=-1)

    _check(loss, x, indices, values, rtol=2e-5, atol=2e-5, ops=("CTCLoss",))


@pytest.mark.long_only
def test_keras_ctc_batch_cost() -> None:
    """tf_keras's ``backend.ctc_batch_cost`` (dense labels made sparse in the graph, softmax outputs)."""
    tf_keras = pytest.importorskip("tf_keras")
    y = RNG.uniform(0.05, 1, size=(2, 6, 5)).astype(np.float32)
    y /= y.sum(-1, keepdims=True)
    labels = np.array([[1, 2, 0], [3, 3, 1]], np.int32)

    def cost(y_pred: Any, labels: Any) -> Any:
        return tf_keras.backend.ctc_batch_cost(labels, y_pred, tf.constant([[6], [6]]), tf.constant([[2], [3]]))

    _check(cost, y, labels, rtol=2e-5, atol=2e-5, ops=("CTCLoss",))


@pytest.mark.long_only
def test_ctc_loss_second_derivative_is_refused_as_tensorflow_refuses_it() -> None:
    x = RNG.normal(size=(4, 1, 3)).astype(np.float32)
    indices, values = _sparse([[0, 1]])
    f = tf.function(lambda x: tf.reduce_sum(_raw_ctc()(x, indices, values, np.array([4], np.int32))[0]))
    fn, params = jta.import_function(f, x)
    with pytest.raises(LookupError, match="second  derivative of ctc_loss"):
        jax.grad(lambda v: jax.numpy.sum(jax.grad(lambda w: fn(params, w))(v)))(x)


BAD_LABELS = [
    ([[0, 0], [0, 1]], [1, 2], [4, 3], "Labels length is zero in batch 1"),
    ([[0, 0], [0, 1], [0, 2], [1, 0]], [1, 2, 3, 1], [2, 3],
     "Not enough time for target transition sequence (required: 3, available: 2)0You can turn"),
    ([[0, 0], [1, 0]], [1, 3], [-1, 3], "seq_len(0) < 0"),
    ([[0, 0], [1, 0]], [1, 3], [5, 3], "sequence_length(0) <= 4"),
    ([[0, 0], [0, 1], [1, 0]], [4, 2, 3], [4, 3], "Saw a non-null label (index >= num_classes - 1) following a null"),
    ([[0, 0], [0, 1], [1, 0]], [2, -1, 3], [4, 3], "All labels must be nonnegative integers, batch: 0 labels: 2,-1"),
    ([[0, 1], [0, 0], [1, 0]], [2, 1, 3], [4, 3], "indices[1] = [0,0] is out of order"),
    ([[0, 0], [2, 0]], [2, 1], [4, 3], "indices[1] = [2,0] is out of bounds: need 0 <= index < [2,1]"),
    ([[0, 0], [0, 0], [1, 0]], [2, 1, 3], [4, 3], "indices[1] = [0,0] is repeated"),
    ([[0, 0], [1, 0]], [1, 3], [0, 0], "Max time or first dimension of input cannot be 0."),
]


@pytest.mark.parametrize("case", range(len(BAD_LABELS)))
def test_ctc_loss_bad_labels_fail_with_tensorflows_text(case: int) -> None:
    """Known labels: the kernel's text (TensorFlow's too); traced (under jit, ``--long``: a compile each):
    the same error class."""
    ind, val, lengths, text = BAD_LABELS[case]
    x = RNG.normal(size=(0 if "Max time" in text else 4, 2, 5)).astype(np.float32)
    args = (x, np.array(ind, np.int64), np.array(val, np.int32), np.array(lengths, np.int32))
    f = tf.function(_raw_ctc())
    with pytest.raises(tf.errors.InvalidArgumentError, match=None) as want:
        f(*args)
    assert text in str(want.value)
    fn, params = jta.import_function(f, *args)
    with pytest.raises(jta.errors.InvalidArgumentError) as got:
        fn(params, *args)
    assert text in str(got.value)
    if budget.LONG or case == 1:
        with pytest.raises(jta.errors.InvalidArgumentError):
            jta.checked(jax.jit(fn))(params, *args)


# -- the greedy decoder ---------------------------------------------------------------------------------------------
def _decoded(got: Any, want: Any) -> None:
    """The decoder's outputs: the same integers (int32 without x64) and log probabilities."""
    for a, b in zip(jax.tree_util.tree_leaves(got), [np.asarray(w) for w in tf.nest.flatten(want)], strict=True):
        np.testing.assert_array_equal(np.asarray(a).astype(b.dtype), b)


@pytest.mark.parametrize("attrs", [{}, pytest.param({"merge_repeated": False}, marks=pytest.mark.long_only),
                                   pytest.param({"blank_index": 0}, marks=pytest.mark.long_only)])
def test_ctc_greedy_decoder_matches_tensorflow(attrs: dict[str, Any]) -> None:
    """Ties take the first class, a NaN is never taken (but at class 0), an empty sequence decodes to
    nothing; eagerly, and under ``jta.checked(jax.jit)``, which learns how many entries; a bare jit refuses."""
    x = RNG.integers(0, 3, size=(6, 3, 4)).astype(np.float32)
    x[1, 0, 0], x[2, 1, 2] = np.nan, np.nan
    lengths = np.array([6, 0, 4], np.int32)
    f = tf.function(lambda x, s: tf.raw_ops.CTCGreedyDecoder(inputs=x, sequence_length=s, **attrs))
    want = f(x, lengths)
    fn, params = jta.import_function(f, x, lengths)
    _decoded(fn(params, x, lengths), want)
    _decoded(jta.checked(jax.jit(fn))(params, x, lengths), want)
    with pytest.raises(jta.errors.UnimplementedError, match="jta.checked"):
        jax.jit(fn)(params, x, lengths)


def test_tf_nn_ctc_greedy_decoder_errors() -> None:
    x = RNG.normal(size=(3, 2, 4)).astype(np.float32)
    f = tf.function(lambda x, s: tf.nn.ctc_greedy_decoder(x, s)[1])
    for lengths, error, text in (([4, 1], tf.errors.FailedPreconditionError, "sequence_length(0) <= 3"),):
        s = np.array(lengths, np.int32)
        with pytest.raises(error, match=None) as want:
            f(x, s)
        assert text in str(want.value)
        fn, params = jta.import_function(f, x, s)
        with pytest.raises(jta.errors.FailedPreconditionError) as got:
            fn(params, x, s)
        assert text in str(got.value)


# -- tridiagonal ------------------------------------------------------------------------------------------------
SOLVERS = [{"partial_pivoting": True}, {"partial_pivoting": False},
           {"partial_pivoting": True, "perturb_singular": True}]


def _solve(**attrs: Any) -> Any:
    return lambda d, r: tf.raw_ops.TridiagonalSolve(diagonals=d, rhs=r, **attrs)


@pytest.mark.parametrize("m, attrs", [  # (by default one: partial pivoting, TF's default; the others 2 s each)
    pytest.param(m, attrs, marks=() if (m, k) == (5, 0) else pytest.mark.long_only)
    for m in (1, 2, 5, 17) for k, attrs in enumerate(SOLVERS)])
def test_tridiagonal_solve_matches_tensorflow(m: int, attrs: dict[str, bool]) -> None:
    """Random (diagonally weak: rows interchange) batched systems; gradient: TensorFlow's (a transposed solve)."""
    d = RNG.normal(size=(2, 3, m)).astype(np.float32)
    r = RNG.normal(size=(2, m, 3)).astype(np.float32)
    _check(_solve(**attrs), d, r, rtol=2e-5, atol=2e-5, wrt=(0, 1), grad_tol=2e-4, ops=("TridiagonalSolve",))


@pytest.mark.parametrize("attrs", [pytest.param(SOLVERS[0], marks=pytest.mark.long_only), SOLVERS[1],
                                   pytest.param(SOLVERS[2], marks=pytest.mark.long_only)])
def test_tridiagonal_solve_singular_and_near_singular(attrs: dict[str, bool]) -> None:
    """A zero pivot: NaN (no error, as TensorFlow's kernel only logs a warning); ``perturb_singular``: its
    perturbed finite values. Pivots of 1e-8 and 1e-7: values within float32 rounding."""
    rhs = np.ones((4, 2), np.float32)
    singular = np.zeros((3, 4), np.float32)
    singular[1] = [1, 0, 1, 1]
    near = np.ones((3, 4), np.float32)
    near[1] = [1e-8, 2, 1e-7, 3]
    for d in (singular, np.zeros((3, 4), np.float32), near):
        _check(_solve(**attrs), d, rhs, rtol=2e-5, atol=0, wrt=())


@pytest.mark.long_only
def test_tridiagonal_solve_formats_of_the_python_api() -> None:
    """``tf.linalg.tridiagonal_solve`` of the ``sequence`` and ``matrix`` formats (packed into the op's)."""
    a, b, c = (RNG.normal(size=4).astype(np.float32) + k for k in (0, 3, 0))
    r = RNG.normal(size=(4, 2)).astype(np.float32)
    _check(lambda a, b, c, r: tf.linalg.tridiagonal_solve((a, b, c), r, diagonals_format="sequence"), a, b, c, r,
           rtol=2e-5, atol=2e-5, wrt=(0, 1, 2, 3), grad_tol=1e-4)
    full = np.diag(b) + np.diag(a[:-1], 1) + np.diag(c[1:], -1)
    _check(lambda m, r: tf.linalg.tridiagonal_solve(m, r, diagonals_format="matrix"), full.astype(np.float32), r,
           rtol=2e-5, atol=2e-5, wrt=(0, 1), grad_tol=1e-4)


def test_tridiagonal_matmul_matches_tensorflow() -> None:
    s = RNG.normal(size=(2, 1, 5)).astype(np.float32)
    r = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    _check(lambda a, b, c, r: tf.raw_ops.TridiagonalMatMul(superdiag=a, maindiag=b, subdiag=c, rhs=r),
           s, s + 1, s * 2, r, rtol=1e-6, atol=1e-6, wrt=(0, 1, 2, 3), ops=("TridiagonalMatMul",))
    if not budget.LONG:
        return
    _check(lambda d, r: tf.linalg.tridiagonal_matmul(d, r), RNG.normal(size=(3, 4)).astype(np.float32),
           RNG.normal(size=(4, 2)).astype(np.float32), rtol=1e-6, atol=1e-6, wrt=(0, 1))


BAD_TRIDIAGONAL = [
    (lambda: (np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)), {},
     "Expected diagonals to be provided as a matrix with 3 rows, got 2 rows."),
    (lambda: (np.ones((3, 3), np.float32), np.ones((4, 2), np.float32)), {},
     "Expected the same number of left-hand sides and right-hand sides, got 3 and 4."),
    (lambda: (np.ones(3, np.float32), np.ones((3, 2), np.float32)), {}, "Input tensor 0 must have rank >= 2, got 1"),
    (lambda: (np.ones((2, 3, 3), np.float32), np.ones((3, 3, 2), np.float32)), {},
     "All input tensors must have the same outer dimensions."),
    (lambda: (np.ones((2, 3, 3), np.float32), np.ones((3, 2), np.float32)), {},
     "All input tensors must have the same rank."),
    (lambda: (np.ones((3, 3), np.float32), np.ones((3, 2), np.float32)),
     {"partial_pivoting": False, "perturb_singular": True},
     "Setting perturb_singular requires also setting partial_pivoting."),
]


@pytest.mark.parametrize("case", range(len(BAD_TRIDIAGONAL)))
def test_tridiagonal_solve_bad_shapes(case: int) -> None:
    make, attrs, text = BAD_TRIDIAGONAL[case]
    d, r = make()
    with pytest.raises(tf.errors.InvalidArgumentError) as want:
        _solve(**attrs)(d, r)
    assert text in str(want.value)
    # (of unknown shapes: TensorFlow's shape inference would refuse these while tracing)
    f = tf.function(_solve(**attrs), input_signature=[tf.TensorSpec(None, tf.float32)] * 2)
    with pytest.raises(jta.errors.InvalidArgumentError, match=None) as got:
        fn, params = jta.import_function(f, d, r)
        fn(params, d, r)
    assert text in str(got.value)


def test_tridiagonal_matmul_bad_shapes() -> None:
    s = np.ones((1, 3), np.float32)
    f = tf.function(lambda a, b, c, r: tf.raw_ops.TridiagonalMatMul(superdiag=a, maindiag=b, subdiag=c, rhs=r),
                    input_signature=[tf.TensorSpec(None, tf.float32)] * 4)
    args = (np.ones((1, 4), np.float32), s, s, np.ones((3, 2), np.float32))
    with pytest.raises(jta.errors.InvalidArgumentError, match="Invalid superdiagonal shape."):
        fn, params = jta.import_function(f, *args)
        fn(params, *args)

