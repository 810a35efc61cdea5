"""The gradient sweep of the non-elementwise ops (``tests/test_tf2_gradient_sweep.py``): a table of small
TensorFlow API calls, and a runner that checks jta against TensorFlow on each.

A :class:`Case` is a name, a TensorFlow callable (tensors in, a tensor or a tuple of tensors out) and its
input makers (each ``rng -> array``; the rng is seeded by the case's name). The float inputs are the
function's arguments and are differentiated (or those ``diff`` names; ``variables`` makes some captured
``tf.Variable`` s instead); the integer ones (indices, ids, labels) are constants of the function, or
run-time arguments with ``int_args=True``. The outputs are contracted with fixed random cotangents (a
complex output's real and imaginary parts each with its own; integer outputs are left out; only finite,
not huge entries are read: an empty segment's max is the dtype's lowest), and

1. the imported forward's value is TensorFlow's, and
2. ``jax.grad`` of the contraction of the imported forward is ``tf.GradientTape``'s gradient (eager)
   (both under one ``jax.jit``; the forward runs eagerly too where that fails, to tell what failed;
   ``run_case(..., eager_grad=True)``, as ``pytest --long`` runs it, checks an eager ``jax.grad`` too);
3. the imported train step (the tape inside a ``tf.function``, returning the loss and the gradients),
   run eagerly and under ``jax.jit``, gives what TensorFlow's train step gives.

:func:`run_case` returns a :class:`Result`: ``PASS``, ``WRONG_GRAD``, ``WRONG_VALUE``, ``REFUSED``
(jta's code 430: an op outside the table), ``CRASH`` (any other exception of jta's), or ``TF_ERROR``
(TensorFlow cannot differentiate the call, or its eager and graph gradients differ: nothing to compare
with). Where TensorFlow's gradient is ``None`` (not connected) it counts as zeros, and ``Result.tf_none``
says so; an ``IndexedSlices`` gradient is made dense.

``python -m tests.helpers.gradsweep [--eager-grad] [NAME ...]`` runs cases and prints their results (all
without names).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Maker = Callable[[np.random.Generator], np.ndarray]

F32 = np.float32
RTOL, ATOL = 1e-4, 1e-5
LINALG_TOL = (2e-3, 2e-4)  # decompositions and inverses in float32: the two libraries' kernels differ


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    args: tuple[Maker, ...]
    x64: bool = False  # float64 inputs, run under ``jax.enable_x64(True)``
    tol: tuple[float, float] = (RTOL, ATOL)
    diff: tuple[int, ...] | None = None  # the arguments differentiated (default: every float one)
    variables: tuple[int, ...] = ()  # inputs that are variables the function captures (differentiated too)
    int_args: bool = False  # the integer inputs are arguments too (run-time indices), not constants

    def inputs(self) -> list[np.ndarray]:
        rng = np.random.default_rng(zlib.crc32(self.name.encode()))
        return [m(rng) for m in self.args]


@dataclasses.dataclass
class Result:
    name: str
    status: str
    detail: str = ""
    tf_none: bool = False

    def __str__(self) -> str:
        note = " (TF gradient None for some input)" if self.tf_none else ""
        return f"{self.name}: {self.status}{note}{': ' + self.detail if self.detail else ''}"


# -- input makers -------------------------------------------------------------------------------------

def r(*shape: int, scale: float = 1.0) -> Maker:
    """Standard normals (times ``scale``)."""
    return lambda rng: (scale * rng.standard_normal(shape)).astype(F32)


def u(lo: float, hi: float, *shape: int) -> Maker:
    return lambda rng: rng.uniform(lo, hi, shape).astype(F32)


def c(values: Any, dtype: Any = F32) -> Maker:
    """A constant."""
    arr = np.array(values, dtype)
    return lambda rng: arr.copy()


def i(values: Any) -> Maker:
    """An int32 constant (indices, ids, labels)."""
    return c(values, np.int32)


def wellcond(n: int, batch: tuple[int, ...] = ()) -> Maker:
    """A random square matrix plus ``n`` on the diagonal: far from singular."""
    return lambda rng: (rng.standard_normal((*batch, n, n)) + n * np.eye(n)).astype(F32)


def spd(n: int, batch: tuple[int, ...] = ()) -> Maker:
    def make(rng: np.random.Generator) -> np.ndarray:
        a = rng.standard_normal((*batch, n, n))
        return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(F32)
    return make


def tri(n: int, lower: bool = True) -> Maker:
    def make(rng: np.random.Generator) -> np.ndarray:
        a = rng.standard_normal((n, n)) + 3 * np.eye(n)
        return (np.tril(a) if lower else np.triu(a)).astype(F32)
    return make


def distinct(*shape: int) -> Maker:
    """Entries far apart (no near-ties: a sort, an eigendecomposition, an SVD is well defined)."""
    def make(rng: np.random.Generator) -> np.ndarray:
        n = int(np.prod(shape))
        return (rng.permutation(n) * 0.5 + rng.uniform(0, 0.1, n)).reshape(shape).astype(F32)
    return make


def f64(m: Maker) -> Maker:
    return lambda rng: m(rng).astype(np.float64)


# Ties along both axes: rows (1, 3, 3, -2), (0, 0, -1, -1), (2, 2, 2, 2).
TIES = c([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, -1.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
# A 1x4x4x1 image whose 2x2 windows hold ties.
TIES_IMG = c(np.array([[1, 1, 0, 2], [1, 0, 2, 2], [3, 3, 3, 3], [-1, 3, 3, -1]], F32).reshape(1, 4, 4, 1))
ZEROS = c([[1.0, 0.0, 2.0, -1.5], [0.0, 0.0, 3.0, 0.5], [2.0, -1.0, 0.5, 1.5]])  # one, two, no zeros by row


# -- the table ----------------------------------------------------------------------------------------

_LAYERS: dict[str, Any] = {}


def _layer(key: str, make: Callable[[], Any], shape: tuple[Any, ...]) -> Any:
    """A Keras layer, built once (outside any ``tf.function``): its variables are captured."""
    import tensorflow as tf

    with tf.init_scope():
        if key not in _LAYERS:
            _LAYERS[key] = make()
            _LAYERS[key].build(shape)
    return _LAYERS[key]


def _build() -> list[Case]:  # noqa: PLR0915 (a table)
    import tensorflow as tf

    cases: list[Case] = []

    def case(name: str, fn: Callable[..., Any], *args: Maker, **kw: Any) -> None:
        cases.append(Case(name, fn, tuple(args), **kw))

    la = tf.linalg
    lin = {"tol": LINALG_TOL}

    # reductions
    case("reduce_sum.all", lambda x: tf.reduce_sum(x), r(3, 4))
    case("reduce_sum.axis1_keepdims", lambda x: tf.reduce_sum(x, 1, keepdims=True), r(3, 4))
    case("reduce_mean.axis0", lambda x: tf.reduce_mean(x, 0), r(3, 4))
    case("reduce_prod.all", lambda x: tf.reduce_prod(x), u(0.5, 1.5, 2, 3))
    case("reduce_prod.axis1_zeros", lambda x: tf.reduce_prod(x, 1), ZEROS)
    case("reduce_prod.axis0_zeros_keepdims", lambda x: tf.reduce_prod(x, 0, keepdims=True), ZEROS)
    case("reduce_prod.all_zeros", lambda x: tf.reduce_prod(x), ZEROS)
    case("reduce_max.all_ties", lambda x: tf.reduce_max(x), TIES)
    case("reduce_max.axis1_ties", lambda x: tf.reduce_max(x, 1), TIES)
    case("reduce_max.axis0_ties_keepdims", lambda x: tf.reduce_max(x, 0, keepdims=True), TIES)
    case("reduce_min.axis1_ties", lambda x: tf.reduce_min(x, 1), TIES)
    case("reduce_logsumexp.axis1", lambda x: tf.reduce_logsumexp(x, 1), r(3, 4))
    case("reduce_logsumexp.large_ties", lambda x: tf.reduce_logsumexp(x * 100.0, -1), TIES)
    case("reduce_euclidean_norm.axis1", lambda x: tf.math.reduce_euclidean_norm(x, 1), r(3, 4))
    case("reduce_euclidean_norm.zero_row", lambda x: tf.math.reduce_euclidean_norm(x, 1),
         c([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]]))
    case("reduce_euclidean_norm.complex", lambda a, b: tf.math.real(tf.math.reduce_euclidean_norm(
        tf.complex(a, b), 1)), r(2, 3), r(2, 3))
    case("reduce_std.axis0", lambda x: tf.math.reduce_std(x, 0), r(4, 3))
    case("reduce_std.constant_row", lambda x: tf.math.reduce_std(x, 1), c([[2.0, 2.0, 2.0], [1.0, 0.0, 3.0]]))
    case("reduce_max.f64_ties", lambda x: tf.reduce_max(x, 1), f64(TIES), x64=True)

    # cumulative
    case("reduce_max.signed_zero_ties", lambda x: tf.reduce_max(x, 1), c([[0.0, -0.0, -1.0], [-0.0, -0.0, -2.0]]))
    case("reduce_max.nan", lambda x: tf.reduce_max(x, 1), c([[1.0, np.nan, 2.0], [0.0, 1.0, 1.0]]))
    case("reduce_min.inf", lambda x: tf.reduce_min(x, 1), c([[np.inf, 1.0, np.inf], [np.inf, np.inf, np.inf]]))
    case("reduce_logsumexp.neg_inf_row", lambda x: tf.reduce_logsumexp(x, 1),
         c([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]]))
    case("reduce_prod.3d_axes_zeros", lambda x: tf.reduce_prod(x, [0, 2]),
         c(np.array([[[1, 0, 2], [3, 1, 1]], [[0, 2, 0], [0.5, 2, -1]]], F32)))
    case("reduce_prod.complex_zero", lambda a, b: (lambda p: (tf.math.real(p), tf.math.imag(p)))(
        tf.reduce_prod(tf.complex(a, b), 1)), c([[1.0, 0.0, 2.0], [0.5, -1.0, 1.5]]),
        c([[0.5, 0.0, -1.0], [1.0, 2.0, 0.0]]))
    case("cumsum.exclusive", lambda x: tf.cumsum(x, 1, exclusive=True), r(3, 4))
    case("cumsum.exclusive_reverse_axis0", lambda x: tf.cumsum(x, 0, exclusive=True, reverse=True), r(3, 4))
    case("cumprod.axis1", lambda x: tf.math.cumprod(x, 1), u(0.5, 1.5, 3, 4))
    case("cumprod.zeros_axis1_reverse", lambda x: tf.math.cumprod(x, 1, reverse=True), ZEROS)
    case("cumprod.zeros_axis0_exclusive", lambda x: tf.math.cumprod(x, 0, exclusive=True), ZEROS)
    case("cumprod.complex", lambda a, b: (lambda p: (tf.math.real(p), tf.math.imag(p)))(
        tf.math.cumprod(tf.complex(a, b), 1)), u(0.5, 1.5, 2, 3), r(2, 3, scale=0.5))
    case("cumulative_logsumexp.axis1", lambda x: tf.math.cumulative_logsumexp(x, 1), r(3, 4))
    case("cumulative_logsumexp.exclusive", lambda x: tf.math.cumulative_logsumexp(x, 1, exclusive=True), r(3, 4))
    case("cumulative_logsumexp.ties", lambda x: tf.math.cumulative_logsumexp(x, 1), TIES)
    case("cumulative_logsumexp.neg_inf", lambda x: tf.math.cumulative_logsumexp(x, 1),
         c([[-np.inf, 0.0, -np.inf], [1.0, -np.inf, 2.0]]))
    case("cumsum.f64", lambda x: tf.cumsum(x, -1, reverse=True), f64(r(3, 4)), x64=True)

    # matmul, einsum, tensordot
    case("matmul.plain", lambda a, b: tf.matmul(a, b), r(3, 4), r(4, 2))
    case("matmul.adjoint_ab", lambda a, b: tf.matmul(a, b, adjoint_a=True, adjoint_b=True), r(4, 3), r(2, 4))
    case("matmul.batch_broadcast", lambda a, b: tf.matmul(a, b), r(1, 3, 4), r(2, 4, 5))
    case("matmul.batch_broadcast_rank", lambda a, b: tf.matmul(a, b), r(3, 4), r(2, 2, 4, 5))
    case("matmul.f64", lambda a, b: tf.matmul(a, b), f64(r(3, 4)), f64(r(4, 2)), x64=True)
    case("matmul.complex_adjoint", lambda a, b, cc, d: tf.abs(tf.matmul(tf.complex(a, b), tf.complex(cc, d),
                                                                     adjoint_a=True)), r(3, 2), r(3, 2), r(3, 2), r(3, 2))
    case("einsum.batch", lambda a, b: tf.einsum("bij,bjk->bik", a, b), r(2, 3, 4), r(2, 4, 2))
    case("einsum.diag", lambda a: tf.einsum("ii->i", a), r(3, 3))
    case("einsum.trace", lambda a: tf.einsum("ii", a), r(3, 3))
    case("einsum.ellipsis", lambda a, b: tf.einsum("...ij,jk->...ik", a, b), r(2, 3, 4), r(4, 2))
    case("einsum.complex", lambda a, b, cc: tf.abs(tf.einsum("ij,jk->ik", tf.complex(a, b),
                                                              tf.complex(cc, a))),
         r(3, 3), r(3, 3), r(3, 3))
    case("tensordot.axes_pairs", lambda a, b: tf.tensordot(a, b, [[1, 2], [0, 1]]), r(2, 3, 4), r(3, 4, 5))
    case("matvec.adjoint_batch", lambda a, v: la.matvec(a, v, adjoint_a=True), r(2, 4, 3), r(2, 4))

    # linalg
    case("det.3x3", lambda a: la.det(a), wellcond(3), **lin)
    case("det.f64", lambda a: la.det(a), f64(wellcond(4)), x64=True)
    case("det.complex", lambda a, b: (lambda d: (tf.math.real(d), tf.math.imag(d)))(la.det(tf.complex(a, b))),
         wellcond(3), r(3, 3, scale=0.3), **lin)
    case("inv.complex", lambda a, b: la.inv(tf.complex(a, b)), wellcond(3), r(3, 3, scale=0.3), **lin)
    case("slogdet.complex", lambda a, b: (lambda sg, ld: (tf.math.real(sg), tf.math.imag(sg), ld))(
        *la.slogdet(tf.complex(a, b))), wellcond(3), r(3, 3, scale=0.3), **lin)
    case("solve.complex", lambda a, b, rhs: la.solve(tf.complex(a, b), tf.complex(rhs, rhs)), wellcond(3),
         r(3, 3, scale=0.3), r(3, 2), **lin)
    case("eigh.complex_values", lambda a, b: la.eigvalsh(tf.complex(a + tf.transpose(a), b - tf.transpose(b))),
         spd(3), r(3, 3, scale=0.3), **lin)
    case("svd.complex_values", lambda a, b: la.svd(tf.complex(a, b), compute_uv=False), r(3, 3), r(3, 3), **lin)
    case("cholesky.complex", lambda a, b: (lambda m: la.cholesky(tf.matmul(m, m, adjoint_b=True) + 3.0))(
        tf.complex(a, b)), wellcond(3), r(3, 3, scale=0.3), **lin)
    case("slogdet.negative_det", lambda a: la.slogdet(a), c([[0.0, 2.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 3.0]]), **lin)
    case("logdet.spd", lambda a: la.logdet(a), spd(3), **lin)
    case("inv.3x3", lambda a: la.inv(a), wellcond(3), **lin)
    case("inv.f64", lambda a: la.inv(a), f64(wellcond(4)), x64=True)
    case("solve.plain", lambda a, b: la.solve(a, b), wellcond(3), r(3, 2), **lin)
    case("solve.adjoint", lambda a, b: la.solve(a, b, adjoint=True), wellcond(3), r(3, 2), **lin)
    case("triangular_solve.lower", lambda a, b: la.triangular_solve(a, b, lower=True), tri(3), r(3, 2), **lin)
    case("triangular_solve.upper_adjoint", lambda a, b: la.triangular_solve(a, b, lower=False, adjoint=True),
         tri(3, lower=False), r(3, 2), **lin)
    case("triangular_solve.lower_full_matrix", lambda a, b: la.triangular_solve(a, b, lower=True),
         wellcond(3), r(3, 2), **lin)  # the upper part is ignored: its gradient is zero in TF
    case("triangular_solve.broadcast", lambda a, b: la.triangular_solve(a, b, lower=True), tri(3), r(2, 3, 2),
         **lin)
    case("cholesky.3x3", lambda a: la.cholesky(a), spd(3), **lin)
    case("cholesky.f64", lambda a: la.cholesky(a), f64(spd(4)), x64=True)
    case("cholesky_solve.plain", lambda a, b: la.cholesky_solve(la.cholesky(a), b), spd(3), r(3, 2), **lin)
    case("qr.tall_reduced", lambda a: la.qr(a), r(4, 3), **lin)
    case("qr.square_full", lambda a: la.qr(a, full_matrices=True), wellcond(3), **lin)
    case("qr.f64", lambda a: la.qr(a), f64(r(4, 3)), x64=True)
    case("qr.wide_reduced", lambda a: la.qr(a), r(3, 4), **lin)
    case("svd.values", lambda a: la.svd(a, compute_uv=False), r(4, 3), **lin)
    case("svd.values_wide", lambda a: la.svd(a, compute_uv=False), r(3, 4), **lin)
    case("svd.uv_squared_wide", lambda a: tuple(tf.square(t) for t in la.svd(a, full_matrices=False)), r(3, 4),
         **lin)
    case("svd.uv_squared", lambda a: tuple(tf.square(t) for t in la.svd(a, full_matrices=False)), r(4, 3), **lin)
    case("svd.reconstruct", lambda a: (lambda s, uu, v: tf.matmul(uu * s, v, adjoint_b=True))(*la.svd(a)),
         r(3, 3), **lin)
    case("eigh.values", lambda a: la.eigvalsh(a), spd(3), **lin)
    case("eigh.vectors_squared", lambda a: (lambda e, v: (e, tf.square(v)))(*la.eigh(a)),
         lambda rng: (np.diag([1.0, 3.0, 6.0]) + 0.2 * (lambda m: m + m.T)(rng.standard_normal((3, 3)))).astype(F32),
         **lin)
    case("eigh.f64_values", lambda a: la.eigvalsh(a), f64(spd(4)), x64=True)
    case("eig.real_values_sorted", lambda a: tf.sort(tf.math.real(la.eigvals(a))),
         lambda rng: (np.triu(rng.standard_normal((3, 3))) + np.diag([1.0, 3.0, 6.0])
                      + 0.1 * rng.standard_normal((3, 3))).astype(F32), **lin)
    case("sparse.dense_matmul", lambda v, x: tf.sparse.sparse_dense_matmul(
        tf.SparseTensor([[0, 1], [2, 0], [2, 2]], v, [3, 3]), x), r(3), r(3, 2))
    case("lstsq.fast", lambda a, b: la.lstsq(a, b), r(5, 3), r(5, 2), **lin)
    case("lstsq.l2_regularizer", lambda a, b: la.lstsq(a, b, l2_regularizer=0.5), r(4, 3), r(4, 2), **lin)
    case("expm.3x3", lambda a: la.expm(a), r(3, 3, scale=0.5), **lin)
    case("sqrtm.spd", lambda a: la.sqrtm(a), spd(3), **lin)
    case("pinv.tall", lambda a: la.pinv(a), r(4, 3), **lin)
    case("norm.fro", lambda a: la.norm(a), r(3, 4))
    case("norm.matrix_ord1", lambda a: la.norm(a, 1, axis=[-2, -1]), r(3, 4))
    case("norm.matrix_ord_inf", lambda a: la.norm(a, np.inf, axis=[-2, -1]), r(3, 4))
    case("norm.matrix_ord2", lambda a: la.norm(a, 2, axis=[-2, -1]), r(3, 4), **lin)
    case("norm.vector_ord_inf_ties", lambda a: la.norm(a, np.inf, axis=-1), TIES)
    case("norm.vector_zero", lambda a: la.norm(a, axis=-1), c([[0.0, 0.0], [3.0, -4.0]]))
    case("trace.plain", lambda a: la.trace(a), r(2, 3, 3))
    case("normalize.plain", lambda a: la.normalize(a, axis=-1)[0], r(3, 4))
    case("diag.k_band", lambda v: la.diag(v, k=(-1, 1), num_rows=3, num_cols=3), r(3, 3))
    case("diag.padding_value", lambda v, pv: la.diag(v, k=1, num_rows=3, num_cols=4, padding_value=pv), r(3), r())
    case("diag_part.k_range", lambda a: la.diag_part(a, k=(-1, 1)), r(3, 4))
    case("diag_part.k_range_padding", lambda a, pv: la.diag_part(a, k=(-1, 1), padding_value=pv), r(3, 4), r())
    case("tensor_diag_part.plain", lambda a: tf.linalg.tensor_diag_part(a), r(3, 3))
    case("set_diag.k1", lambda a, d: la.set_diag(a, d, k=1), r(3, 4), r(3))
    case("fill.value", lambda v: tf.fill([2, 3], v), r())
    case("band_part.lower1", lambda a: la.band_part(a, 1, 0), r(4, 4))
    case("matrix_transpose.batch", lambda a: la.matrix_transpose(a), r(2, 3, 4))
    case("cross.plain", lambda a, b: la.cross(a, b), r(2, 3), r(2, 3))
    case("tridiagonal_solve.plain", lambda d, b: la.tridiagonal_solve(d, b),
         lambda rng: (rng.standard_normal((3, 4)) + np.array([[0], [4], [0]])).astype(F32), r(4, 1), **lin)

    # nn
    case("tridiagonal_matmul.plain", lambda d, b: la.tridiagonal_matmul(d, b), r(3, 4), r(4, 2))
    case("linspace.start_stop", lambda a, b: tf.linspace(a, b, 5), r(), r())
    case("softmax.ties_large", lambda x: tf.nn.softmax(x * 50.0), TIES)
    case("softmax.3d_axis1", lambda x: tf.nn.softmax(x, axis=1), r(2, 3, 4))
    case("softmax.f64", lambda x: tf.nn.softmax(x), f64(r(3, 4)), x64=True)
    case("softmax.neg_inf_mask", lambda x: tf.nn.softmax(tf.where(tf.constant([[True, False, True, True],
                                                                               [False, False, True, False]]),
                                                                  x, -np.inf)), r(2, 4))
    case("softmax.all_neg_inf_row", lambda x: tf.nn.softmax(x), c([[-np.inf, -np.inf], [0.0, 1.0]]))
    case("log_softmax.large", lambda x: tf.nn.log_softmax(x * 100.0), TIES)
    case("log_softmax.axis0", lambda x: tf.nn.log_softmax(x, axis=0), r(3, 4))
    case("log_softmax.neg_inf", lambda x: tf.nn.log_softmax(x), c([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -1.0]]))
    case("softmax_ce.dense", lambda lg, lb: tf.nn.softmax_cross_entropy_with_logits(lb, lg), r(3, 4),
         lambda rng: rng.dirichlet(np.ones(4), 3).astype(F32))
    case("softmax_ce.dense_axis0", lambda lg, lb: tf.nn.softmax_cross_entropy_with_logits(lb, lg, axis=0),
         r(4, 3), lambda rng: rng.dirichlet(np.ones(4), 3).T.astype(F32))
    case("softmax_ce.dense_onehot_ties", lambda lg, lb: tf.nn.softmax_cross_entropy_with_logits(lb, lg), TIES,
         c(np.eye(4, dtype=F32)[[1, 0, 3]]))
    case("softmax_ce.f64", lambda lg, lb: tf.nn.softmax_cross_entropy_with_logits(lb, lg), f64(r(3, 4)),
         lambda rng: rng.dirichlet(np.ones(4), 3), x64=True)
    case("softmax_ce.sparse", lambda lg, lb: tf.nn.sparse_softmax_cross_entropy_with_logits(lb, lg), r(3, 4),
         i([0, 3, 3]))
    case("softmax_ce.sparse_runtime_labels", lambda lg, lb: tf.nn.sparse_softmax_cross_entropy_with_logits(lb, lg),
         r(3, 4), i([0, 3, 3]), int_args=True)
    case("sigmoid_ce.plain", lambda lg, lb: tf.nn.sigmoid_cross_entropy_with_logits(lb, lg),
         c([[-2.0, 0.0, 3.0], [0.5, -0.5, 0.0]]), c([[0.0, 1.0, 1.0], [0.3, 0.0, 0.5]]))
    case("keras_categorical_ce.probs",
         lambda p, lb: tf.keras.losses.categorical_crossentropy(lb, tf.nn.softmax(p)), r(3, 4),
         lambda rng: rng.dirichlet(np.ones(4), 3).astype(F32))

    case("conv1d.valid_stride2", lambda x, w: tf.nn.conv1d(x, w, 2, "VALID"), r(1, 8, 2), r(3, 2, 2))
    case("conv2d.same", lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), r(2, 5, 5, 3), r(3, 3, 3, 2))
    case("conv2d.valid_stride2", lambda x, w: tf.nn.conv2d(x, w, 2, "VALID"), r(1, 6, 7, 2), r(3, 3, 2, 3))
    case("conv2d.same_stride2_even", lambda x, w: tf.nn.conv2d(x, w, 2, "SAME"), r(1, 6, 6, 2), r(2, 2, 2, 2))
    case("conv2d.grouped", lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), r(1, 5, 5, 4), r(3, 3, 2, 4))
    case("conv2d.explicit_padding", lambda x, w: tf.nn.conv2d(x, w, [1, 2, 1, 1], [[0, 0], [1, 0], [2, 1], [0, 0]]),
         r(1, 5, 5, 2), r(3, 2, 2, 2))
    case("conv2d.f64", lambda x, w: tf.nn.conv2d(x, w, 1, "SAME"), f64(r(1, 4, 4, 2)), f64(r(3, 3, 2, 2)),
         x64=True)
    case("conv3d.valid_stride2", lambda x, w: tf.nn.conv3d(x, w, [1, 2, 2, 2, 1], "VALID"), r(1, 5, 5, 5, 1),
         r(2, 2, 2, 1, 2))
    case("depthwise_conv2d.stride2_valid", lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "VALID"),
         r(1, 6, 6, 3), r(2, 2, 3, 1))
    case("depthwise_conv2d.dilation", lambda x, w: tf.nn.depthwise_conv2d(x, w, [1] * 4, "SAME", dilations=[2, 2]),
         r(1, 6, 6, 2), r(2, 2, 2, 1))
    case("depthwise_conv2d.same_stride2_even", lambda x, w: tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
         r(1, 6, 6, 2), r(3, 3, 2, 1))
    case("depthwise_conv2d.explicit_padding", lambda x, w: tf.nn.depthwise_conv2d(
        x, w, [1, 1, 1, 1], [[0, 0], [1, 0], [0, 2], [0, 0]]), r(1, 4, 4, 2), r(2, 2, 2, 1))
    case("atrous_conv2d.rate2", lambda x, w: tf.nn.atrous_conv2d(x, w, 2, "SAME"), r(1, 7, 7, 2), r(3, 3, 2, 2))
    case("separable_conv2d.plain", lambda x, dw, pw: tf.nn.separable_conv2d(x, dw, pw, [1] * 4, "SAME"),
         r(1, 5, 5, 2), r(3, 3, 2, 2), r(1, 1, 4, 3))
    case("conv2d_transpose.same_stride2", lambda x, w: tf.nn.conv2d_transpose(x, w, [1, 6, 6, 2], 2, "SAME"),
         r(1, 3, 3, 3), r(3, 3, 2, 3))
    case("conv2d_transpose.odd_output", lambda x, w: tf.nn.conv2d_transpose(x, w, [1, 7, 7, 1], 2, "SAME"),
         r(1, 4, 4, 2), r(3, 3, 1, 2))
    case("conv3d_transpose.plain", lambda x, w: tf.nn.conv3d_transpose(x, w, [1, 4, 4, 4, 1], 2, "SAME"),
         r(1, 2, 2, 2, 2), r(2, 2, 2, 1, 2))
    case("max_pool1d.ties", lambda x: tf.nn.max_pool1d(x, 2, 1, "VALID"),
         c(np.array([1, 1, 0, 2, 2, 2, -1, 3], F32).reshape(1, 8, 1)))
    case("max_pool2d.ties_valid", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), TIES_IMG)
    case("max_pool2d.ties_overlap", lambda x: tf.nn.max_pool2d(x, 2, 1, "VALID"), TIES_IMG)
    case("max_pool2d.same_stride2", lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), r(1, 5, 5, 2))
    case("max_pool2d.stride_gt_ksize", lambda x: tf.nn.max_pool2d(x, 2, 3, "SAME"), r(1, 7, 7, 1))
    case("max_pool2d.explicit_padding", lambda x: tf.nn.max_pool2d(x, 2, 2, [[0, 0], [1, 0], [0, 1], [0, 0]]),
         u(-2, -1, 1, 3, 3, 1))
    case("max_pool2d.negative_same", lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME"), u(-3, -1, 1, 4, 4, 1))
    case("max_pool2d.signed_zero_ties", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"),
         c(np.array([0.0, -0.0, -0.0, 0.0, -0.0, -1.0, -0.0, -0.0], F32).reshape(1, 2, 4, 1)))
    case("max_pool3d.ties", lambda x: tf.nn.max_pool3d(x, 2, 2, "VALID"),
         c(np.array([1, 1, 0, 1, 2, 2, 2, 0], F32).repeat(2).reshape(1, 2, 2, 4, 1)))
    case("max_pool_with_argmax.plain", lambda x: tf.nn.max_pool_with_argmax(x, 2, 2, "VALID")[0], TIES_IMG)
    case("max_pool_with_argmax.batch_index", lambda x: tf.nn.max_pool_with_argmax(
        x, 2, 2, "SAME", include_batch_in_index=True), r(2, 3, 3, 1))
    case("avg_pool2d.same", lambda x: tf.nn.avg_pool2d(x, 3, 2, "SAME"), r(1, 5, 5, 2))
    case("avg_pool1d.plain", lambda x: tf.nn.avg_pool1d(x, 3, 2, "SAME"), r(1, 7, 2))
    case("avg_pool2d.stride_gt_ksize", lambda x: tf.nn.avg_pool2d(x, 2, 3, "VALID"), r(1, 7, 7, 1))
    case("avg_pool3d.same", lambda x: tf.nn.avg_pool3d(x, 2, 2, "SAME"), r(1, 3, 3, 3, 2))
    case("pool.max_dilated", lambda x: tf.nn.pool(x, [2, 2], "MAX", padding="VALID", dilations=[2, 2]),
         TIES_IMG)
    case("fused_batch_norm.training_stats",
         lambda x, s, o: tf.compat.v1.nn.fused_batch_norm(x, s, o, is_training=True)[:3],
         r(2, 3, 3, 2), u(0.5, 1.5, 2), r(2))
    case("fused_batch_norm.inference",
         lambda x, s, o, m, v: tf.compat.v1.nn.fused_batch_norm(x, s, o, m, v, is_training=False)[0],
         r(2, 3, 3, 2), u(0.5, 1.5, 2), r(2), r(2), u(0.5, 2.0, 2))
    case("fused_batch_norm.nchw_training",
         lambda x, s, o: tf.transpose(tf.compat.v1.nn.fused_batch_norm(
             tf.transpose(x, [0, 3, 1, 2]), s, o, is_training=True, data_format="NCHW")[0], [0, 2, 3, 1]),
         r(2, 3, 3, 2), u(0.5, 1.5, 2), r(2))
    case("fused_batch_norm.training_avg_factor", lambda x, s, o, m, v: tf.raw_ops.FusedBatchNormV3(
        x=x, scale=s, offset=o, mean=m, variance=v, epsilon=1e-3, exponential_avg_factor=0.9,
        is_training=True)[:3], r(2, 3, 3, 2), u(0.5, 1.5, 2), r(2), r(2), u(0.5, 2.0, 2))
    case("batch_norm.keras_layer_training", lambda x: _layer("bn", lambda: tf.keras.layers.BatchNormalization(),
                                                              (None, 3))(x, training=True), r(4, 3))
    case("batch_norm.keras_layer_inference", lambda x: _layer("bn", lambda: tf.keras.layers.BatchNormalization(),
                                                               (None, 3))(x, training=False), r(4, 3))
    case("batch_normalization.moments", lambda x, s, o: tf.nn.batch_normalization(
        x, *tf.nn.moments(x, [0]), o, s, 1e-3), r(4, 3), u(0.5, 1.5, 3), r(3))
    case("layer_norm.keras_math", lambda x, g, b: (lambda m, v: (x - m) * tf.math.rsqrt(v + 1e-3) * g + b)(
        *tf.nn.moments(x, [-1], keepdims=True)), r(3, 5), r(5), r(5))
    case("layer_norm.keras_layer", lambda x: _layer("ln", lambda: tf.keras.layers.LayerNormalization(),
                                                    (None, 5))(x), r(3, 5))
    case("moments.keepdims_constant_row", lambda x: tf.nn.moments(x, [1], keepdims=True),
         c([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]]))
    case("weighted_moments.plain", lambda x, w: tf.nn.weighted_moments(x, [0], w), r(4, 3), u(0.1, 1.0, 4, 1))
    case("l2_normalize.axis1", lambda x: tf.math.l2_normalize(x, 1), r(3, 4))
    case("l2_normalize.zero_row", lambda x: tf.math.l2_normalize(x, -1), c([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]]))
    case("lrn.radius2_beta", lambda x: tf.nn.local_response_normalization(x, 2, 1.5, 0.3, 0.75), r(1, 2, 3, 7))
    case("bias_add.nhwc", lambda x, b: tf.nn.bias_add(x, b), r(2, 3, 3, 4), r(4))
    case("bias_add.nchw", lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), r(2, 4, 3, 3), r(4))
    case("top_k.values_ties", lambda x: tf.math.top_k(x, 2).values, TIES)
    case("top_k.both", lambda x: tf.math.top_k(x, 3), TIES)
    case("approx_max_k.plain", lambda x: tf.math.approx_max_k(x, 2)[0], distinct(3, 6))
    case("isotonic_regression.plain", lambda x: tf.nn.isotonic_regression(x)[0], r(2, 5))
    case("top_k.runtime_k_free", lambda x, k: tf.gather(x, tf.math.top_k(x, 2).indices[:, :1] + k * 0, batch_dims=1),
         TIES, i([0, 0, 0]), int_args=True)
    case("in_top_k.no_grad", lambda x, t: x * tf.cast(tf.math.in_top_k(t, x, 2), tf.float32)[:, None], TIES,
         i([1, 0, 3]))
    case("ctc_loss.dense", lambda lg: tf.nn.ctc_loss(tf.constant([[1, 2], [3, 3]]), lg, tf.constant([2, 2]),
                                                     tf.constant([5, 4]), logits_time_major=False, blank_index=0),
         r(2, 5, 4))

    # manipulation
    case("gather.repeated", lambda x, ix: tf.gather(x, ix), r(4, 3), i([0, 2, 2, 0, 3]))
    case("gather.runtime_indices", lambda x, ix: tf.gather(x, ix), r(4, 3), i([0, 2, 2, 0, 3]), int_args=True)
    case("gather_nd.runtime_indices", lambda x, ix: tf.gather_nd(x, ix), r(3, 4), i([[0, 1], [2, 3], [0, 1]]),
         int_args=True)
    case("gather.batch_dims1", lambda x, ix: tf.gather(x, ix, axis=1, batch_dims=1), r(2, 4, 3),
         i([[0, 0, 3], [2, 1, 2]]))
    case("gather_nd.repeated", lambda x, ix: tf.gather_nd(x, ix), r(3, 4), i([[0, 1], [2, 3], [0, 1]]))
    case("gather_nd.batch_dims1", lambda x, ix: tf.gather_nd(x, ix, batch_dims=1), r(2, 3, 4),
         i([[[0, 1], [0, 1]], [[2, 3], [1, 0]]]))
    case("embedding_lookup.variable", lambda v, ix: tf.nn.embedding_lookup(v, ix), r(5, 3), i([[1, 1], [4, 0]]),
         variables=(0,))
    case("embedding_lookup.max_norm", lambda v, ix: tf.nn.embedding_lookup(v, ix, max_norm=1.0), r(5, 3),
         i([[1, 1], [4, 0]]), variables=(0,))
    case("gather.variable_plus_dense", lambda v, ix: tf.gather(v, ix) + 0.5 * v[:3], r(4, 3), i([0, 0, 2]),
         variables=(0,))
    case("dense.variables", lambda x, w, b: tf.nn.relu(tf.matmul(x, w) + b), r(3, 4), r(4, 2), r(2),
         variables=(1, 2))
    case("gather.plus_dense", lambda x, ix: tf.gather(x, ix) + x[:3], r(4, 3), i([3, 3, 1]))
    case("gather.batch_dims_axis2", lambda x, ix: tf.gather(x, ix, axis=2, batch_dims=1), r(2, 3, 4),
         i([[0, 3], [1, 1]]))
    case("scatter_nd.repeated", lambda up, ix: tf.scatter_nd(ix, up, [4, 3]), r(3, 3), i([[1], [3], [1]]))
    case("scatter_nd.runtime_indices", lambda up, ix: tf.scatter_nd(ix, up, [4, 3]), r(3, 3), i([[1], [3], [1]]),
         int_args=True)
    case("tensor_scatter_update.plain", lambda x, up, ix: tf.tensor_scatter_nd_update(x, ix, up), r(4, 3), r(2, 3),
         i([[1], [3]]))
    case("tensor_scatter_update.repeated", lambda x, up, ix: tf.tensor_scatter_nd_update(x, ix, up), r(4, 3),
         r(3, 3), i([[1], [3], [1]]))
    case("tensor_scatter_add.repeated", lambda x, up, ix: tf.tensor_scatter_nd_add(x, ix, up), r(4, 3), r(3, 3),
         i([[1], [3], [1]]))
    case("tensor_scatter_max.ties", lambda x, up, ix: tf.tensor_scatter_nd_max(x, ix, up),
         c([1.0, 2.0, 3.0, 4.0]), c([1.0, 5.0, 0.0]), i([[0], [1], [3]]))
    case("tensor_scatter_min.ties", lambda x, up, ix: tf.tensor_scatter_nd_min(x, ix, up),
         c([1.0, 2.0, 3.0, 4.0]), c([1.0, 0.0, 4.0]), i([[0], [1], [3]]))
    case("tensor_scatter_max.repeated", lambda x, up, ix: tf.tensor_scatter_nd_max(x, ix, up),
         c([1.0, 2.0, 3.0]), c([4.0, 5.0, 0.0]), i([[0], [0], [2]]))
    case("tensor_scatter_max.runtime_indices", lambda x, up, ix: tf.tensor_scatter_nd_max(x, ix, up),
         c([1.0, 2.0, 3.0, 4.0]), c([1.0, 5.0, 0.0]), i([[0], [1], [3]]), int_args=True)
    case("dynamic_stitch.repeated", lambda a, b, ia, ib: tf.dynamic_stitch([ia, ib], [a, b]), r(3, 2), r(2, 2),
         i([0, 2, 1]), i([2, 3]))
    case("dynamic_stitch.scalars", lambda a, b, ia, ib: tf.dynamic_stitch([ia, ib], [a, b]), r(2), r(2),
         i([0, 3]), i([1, 2]))
    case("dynamic_partition.plain", lambda x, p: tf.dynamic_partition(x, p, 3), r(5, 2), i([0, 2, 0, 1, 2]))
    case("dynamic_partition.empty_part", lambda x, p: tf.dynamic_partition(x, p, 3), r(4), i([2, 0, 0, 2]))
    seg = i([0, 0, 1, 3, 3])  # segment 2 empty
    case("segment_sum.plain", lambda x, s: tf.math.segment_sum(x, s), r(5, 2), seg)
    case("segment_mean.plain", lambda x, s: tf.math.segment_mean(x, s), r(5, 2), seg)
    case("segment_max.ties", lambda x, s: tf.math.segment_max(x, s), c([[1.0, 2.0], [1.0, 0.0], [3.0, 3.0],
                                                                       [-1.0, 5.0], [-1.0, 5.0]]), seg)
    case("segment_min.ties", lambda x, s: tf.math.segment_min(x, s), c([[1.0, 2.0], [1.0, 0.0], [3.0, 3.0],
                                                                       [-1.0, 5.0], [-1.0, 5.0]]), seg)
    case("segment_prod.zeros", lambda x, s: tf.math.segment_prod(x, s), c([[1.0, 0.0], [2.0, 0.0], [3.0, 0.5],
                                                                          [0.0, 2.0], [4.0, -1.0]]), seg)
    case("segment_sum.f64", lambda x, s: tf.math.segment_sum(x, s), f64(r(5, 2)), seg, x64=True)
    useg = i([3, 0, 3, 0, 1])  # segment 2 empty, segment 4 past the ids
    case("unsorted_segment_sum.plain", lambda x, s: tf.math.unsorted_segment_sum(x, s, 5), r(5, 2), useg)
    case("unsorted_segment_mean.plain", lambda x, s: tf.math.unsorted_segment_mean(x, s, 5), r(5, 2), useg)
    case("unsorted_segment_sqrt_n.plain", lambda x, s: tf.math.unsorted_segment_sqrt_n(x, s, 5), r(5, 2), useg)
    case("unsorted_segment_max.ties", lambda x, s: tf.math.unsorted_segment_max(x, s, 5),
         c([[1.0, 2.0], [1.0, 0.0], [1.0, 3.0], [1.0, 0.0], [-1.0, 5.0]]), useg)
    case("unsorted_segment_min.ties", lambda x, s: tf.math.unsorted_segment_min(x, s, 5),
         c([[1.0, 2.0], [1.0, 0.0], [1.0, 3.0], [1.0, 0.0], [-1.0, 5.0]]), useg)
    case("unsorted_segment_prod.zeros", lambda x, s: tf.math.unsorted_segment_prod(x, s, 5),
         c([[0.0, 2.0], [1.0, 0.0], [3.0, 0.0], [2.0, 0.0], [-1.0, 5.0]]), useg)
    case("unsorted_segment_sum.negative_id", lambda x, s: tf.math.unsorted_segment_sum(x, s, 3), r(4, 2),
         i([0, -1, 2, 0]))
    case("unsorted_segment_max.negative_id", lambda x, s: tf.math.unsorted_segment_max(x, s, 3), r(4, 2),
         i([0, -1, 2, 0]))
    case("unsorted_segment_prod.runtime_ids", lambda x, s: tf.math.unsorted_segment_prod(x, s, 4),
         c([[0.0, 2.0], [1.0, 0.0], [3.0, 0.0], [2.0, 0.5], [-1.0, 5.0]]), i([3, 0, 3, 0, 1]), int_args=True)
    case("unsorted_segment_max.runtime_ids", lambda x, s: tf.math.unsorted_segment_max(x, s, 4),
         c([[1.0, 2.0], [1.0, 0.0], [1.0, 3.0], [1.0, 0.0], [-1.0, 5.0]]), i([3, 0, 3, 0, 1]), int_args=True)
    case("unsorted_segment_sum.runtime_ids", lambda x, s: tf.math.unsorted_segment_sum(x, s, 4), r(5, 2),
         i([3, 0, 3, 0, 1]), int_args=True)
    case("reverse.axes", lambda x: tf.reverse(x, [0, -1]), r(2, 3, 4))
    case("reverse_sequence.plain", lambda x: tf.reverse_sequence(x, [1, 3, 4], seq_axis=1, batch_axis=0), r(3, 4, 2))
    case("reverse_sequence.batch_axis1", lambda x: tf.reverse_sequence(x, [2, 0, 3], seq_axis=0, batch_axis=1),
         r(4, 3))
    case("roll.multi_negative", lambda x: tf.roll(x, [-1, 5], [0, 1]), r(3, 4))
    case("tile.3d", lambda x: tf.tile(x, [1, 2, 1]), r(2, 1, 3))
    case("pad.constant_value", lambda x: tf.pad(x, [[0, 1], [1, 1]], constant_values=2.5), r(2, 3))
    case("pad.constant_value_arg", lambda x, v: tf.pad(x, [[0, 1], [1, 1]], constant_values=v), r(2, 3), r())
    case("pad.reflect", lambda x: tf.pad(x, [[1, 2], [2, 1]], "REFLECT"), r(3, 4))
    case("pad.symmetric", lambda x: tf.pad(x, [[2, 1], [1, 3]], "SYMMETRIC"), r(3, 4))
    case("concat.axis1", lambda a, b: tf.concat([a, b, a], 1), r(2, 3), r(2, 1))
    case("split.sizes", lambda x: tf.split(x, [1, 3, 0, 1], axis=0), r(5, 2))
    case("split.unused_part", lambda x: tf.split(x, 3, axis=1)[1], r(2, 6))
    case("unstack.partial_use", lambda x: tf.unstack(x)[2], r(3, 2))
    case("strided_slice.reverse", lambda x: x[::-1, ::-2], r(4, 5))
    case("strided_slice.ellipsis_newaxis", lambda x: x[..., None, 0], r(2, 3, 4))
    case("strided_slice.negative_stride_bounds", lambda x: x[3:0:-2, -1:-4:-1], r(5, 4))
    case("strided_slice.masks", lambda x: tf.strided_slice(x, [1, 0, 0], [0, 2, 0], [1, 1, 1], begin_mask=4,
                                                           end_mask=5, shrink_axis_mask=0), r(3, 3, 2))
    case("transpose.perm", lambda x: tf.transpose(x, [2, 0, 1]), r(2, 3, 4))
    case("reshape.plain", lambda x: tf.reshape(x, [3, -1]), r(2, 3, 2))
    case("broadcast_to.plain", lambda x: tf.broadcast_to(x, [2, 3, 4]), r(3, 1))
    case("where.broadcast", lambda c_, a, b: tf.where(c_ > 0, a, b), r(3, 1), r(1, 4), r(3, 4))
    case("clip_by_value.boundaries", lambda x: tf.clip_by_value(x, -1.0, 1.0), c([-2.0, -1.0, 0.0, 1.0, 3.0]))
    case("clip_by_value.tensor_bounds", lambda x, lo, hi: tf.clip_by_value(x, lo, hi),
         c([[-2.0, 0.5, 1.0], [0.0, 3.0, -1.0]]), c([[-1.0, 0.5, 0.0]]), c([[1.0, 1.0, 1.0]]))
    case("clip_by_norm.above", lambda x: tf.clip_by_norm(x, 1.0), r(3, 4))
    case("clip_by_norm.exact", lambda x: tf.clip_by_norm(x, 5.0), c([3.0, 4.0]))
    case("clip_by_norm.axes", lambda x: tf.clip_by_norm(x, 1.0, axes=[1]), c([[0.1, 0.2], [3.0, 4.0], [0.0, 0.0]]))
    case("clip_by_global_norm.above", lambda a, b: tuple(tf.clip_by_global_norm([a, b], 1.0)), r(2, 3), r(4))
    case("clip_by_global_norm.below", lambda a, b: tf.clip_by_global_norm([a, b], 50.0)[0], r(2, 3), r(4))
    case("clip_by_global_norm.zeros", lambda a, b: tuple(tf.clip_by_global_norm([a, b], 1.0)),
         c(np.zeros((2, 2), F32)), c(np.zeros(3, F32)))
    case("sort.values_ties", lambda x: tf.sort(x), TIES)
    case("sort.signed_zeros", lambda x: tf.sort(x), c([0.0, -0.0, 1.0, -0.0, 0.0]))
    case("top_k.signed_zeros", lambda x: tf.math.top_k(x, 3).values, c([0.0, -0.0, -1.0, -0.0, 0.0]))
    case("argsort.gather", lambda x: tf.gather(x, tf.argsort(x)), c([3.0, 1.0, 2.0, 1.0]))
    case("one_hot.on_off_values", lambda on, off, ix: tf.one_hot(ix, 4, on, off), r(), r(), i([0, 3, -1]))
    case("one_hot.runtime_indices", lambda x, ix: tf.one_hot(ix, 4) * x, r(3, 4), i([0, 3, -1]), int_args=True)
    case("reverse_sequence.runtime_lengths", lambda x, n: tf.reverse_sequence(x, n, seq_axis=1, batch_axis=0),
         r(3, 4, 2), i([1, 3, 4]), int_args=True)
    case("roll.runtime_shift", lambda x, k: tf.roll(x, k, 1), r(3, 4), i(3), int_args=True)
    case("boolean_mask.constant_mask", lambda x, m: tf.boolean_mask(x, m), r(3, 4),
         c([[True, False, True, True], [False, False, False, False], [True, True, False, True]], bool))
    case("max_argmax.gather", lambda x: tf.gather(x, tf.argmax(x, 1), batch_dims=1), TIES)

    # images
    img = r(1, 3, 4, 2)
    resize = tf.compat.v1.image
    case("cast.through_int", lambda x: tf.cast(tf.cast(x * 2.0, tf.int32), tf.float32) * x, r(3, 4))
    case("cast.f64_f32_f64", lambda x: tf.cast(tf.cast(x, tf.float32) * 3.0, tf.float64) * x, f64(r(3)), x64=True)
    case("resize_bilinear.up_half_pixel", lambda x: tf.image.resize(x, [5, 7]), img)
    case("resize_bilinear.align_corners", lambda x: resize.resize_bilinear(x, [5, 7], align_corners=True), img)
    case("resize_bilinear.legacy", lambda x: resize.resize_bilinear(x, [5, 7]), img)
    case("resize_bilinear.antialias_down", lambda x: tf.image.resize(x, [2, 3], antialias=True), r(1, 5, 7, 1))
    case("resize_nearest.up", lambda x: tf.image.resize(x, [5, 7], "nearest"), img)
    case("resize_nearest.align_corners", lambda x: resize.resize_nearest_neighbor(x, [5, 7], align_corners=True),
         img)
    case("resize_nearest.legacy", lambda x: resize.resize_nearest_neighbor(x, [5, 7]), img)
    case("resize_bicubic.up", lambda x: tf.image.resize(x, [5, 7], "bicubic"), img)
    case("resize_bicubic.align_corners", lambda x: resize.resize_bicubic(x, [5, 7], align_corners=True), img)
    case("resize_lanczos3.plain", lambda x: tf.image.resize(x, [5, 6], "lanczos3"), r(1, 3, 3, 1))
    case("crop_and_resize.bilinear", lambda x, b: tf.image.crop_and_resize(x, b, [0, 0, 0], [3, 3]), r(1, 5, 5, 2),
         c([[0.1, 0.1, 0.7, 0.8], [0.0, 0.2, 1.0, 0.9], [0.6, 0.5, 0.2, 0.1]]))
    case("crop_and_resize.nearest", lambda x, b: tf.image.crop_and_resize(x, b, [0, 1], [2, 3], "nearest"),
         r(2, 4, 4, 1), c([[0.1, 0.1, 0.7, 0.8], [0.0, 0.2, 1.0, 0.9]]))
    case("crop_and_resize.extrapolate", lambda x, b: tf.image.crop_and_resize(x, b, [0], [3, 2],
                                                                              extrapolation_value=0.5),
         r(1, 4, 4, 1), c([[-0.2, 0.1, 1.1, 0.8]]))
    case("extract_patches.same_strides_rates", lambda x: tf.image.extract_patches(x, [1, 2, 2, 1], [1, 2, 2, 1],
                                                                                 [1, 2, 1, 1], "SAME"), r(1, 5, 5, 1))
    case("space_to_depth.plain", lambda x: tf.nn.space_to_depth(x, 2), r(1, 4, 4, 2))
    case("depth_to_space.plain", lambda x: tf.nn.depth_to_space(x, 2), r(1, 2, 3, 8))
    case("space_to_batch.paddings", lambda x: tf.space_to_batch(x, [2, 2], [[1, 0], [0, 1]]), r(1, 3, 3, 2))
    case("batch_to_space.crops", lambda x: tf.batch_to_space(x, [2, 2], [[1, 0], [0, 1]]), r(4, 2, 2, 1))
    case("rgb_to_hsv.plain", lambda x: tf.image.rgb_to_hsv(x), u(0.05, 0.95, 2, 3, 3))
    case("hsv_to_rgb.plain", lambda x: tf.image.hsv_to_rgb(x), u(0.05, 0.95, 2, 3, 3))
    case("total_variation.plain", lambda x: tf.image.total_variation(x), r(2, 3, 3, 1))
    case("ssim.plain", lambda a, b: tf.image.ssim(a, b, 1.0, filter_size=3), u(0, 1, 1, 6, 6, 1), u(0, 1, 1, 6, 6, 1))
    case("sobel_edges.plain", lambda x: tf.image.sobel_edges(x), r(1, 4, 4, 1))
    case("per_image_standardization.plain", lambda x: tf.image.per_image_standardization(x), r(3, 3, 2))
    case("dilation2d.ties", lambda x, f: tf.nn.dilation2d(x, f, [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]),
         TIES_IMG, c(np.zeros((2, 2, 1), F32)))

    # signal
    def cplx(a: Any, b: Any) -> Any:
        return tf.complex(a, b)

    case("fft.plain", lambda a, b: tf.signal.fft(cplx(a, b)), r(2, 5), r(2, 5))
    case("ifft3d.plain", lambda a, b: tf.signal.ifft3d(cplx(a, b)), r(2, 2, 3), r(2, 2, 3))
    case("rfft.odd", lambda x: tf.signal.rfft(x), r(2, 5))
    case("rfft.fft_length_pad", lambda x: tf.signal.rfft(x, [8]), r(5))
    case("irfft.even", lambda a, b: tf.signal.irfft(cplx(a, b)), r(2, 4), r(2, 4))
    case("irfft.odd_length", lambda a, b: tf.signal.irfft(cplx(a, b), [5]), r(3), r(3))
    case("inverse_stft.plain", lambda a, b: tf.signal.inverse_stft(cplx(a, b), 8, 4), r(3, 5), r(3, 5))
    case("dct.type2", lambda x: tf.signal.dct(x), r(2, 6))
    case("fft.f64", lambda a, b: tf.signal.fft(tf.complex(a, b)), f64(r(2, 5)), f64(r(2, 5)), x64=True)
    case("irfft2d.plain", lambda a, b: tf.signal.irfft2d(cplx(a, b)), r(4, 3), r(4, 3))
    case("stft.plain", lambda x: tf.signal.stft(x, 8, 4), r(2, 24))
    case("complex_abs.plain", lambda a, b: tf.abs(cplx(a, b)), r(5), c([0.0, 1.0, -2.0, 0.5, 0.0]))
    case("complex.real_imag_angle", lambda a, b: (lambda z: (tf.math.real(z * z), tf.math.angle(z)))(cplx(a, b)),
         r(4), r(4))
    case("complex_abs.zero_angle", lambda a, b: (lambda z: (tf.abs(z), tf.math.angle(z)))(cplx(a, b)),
         c([0.0, 1.0, 0.0]), c([0.0, 0.0, -2.0]))

    # special and math (not the elementwise derivatives of tests/test_tf2_derivatives.py: broadcasting,
    # several arguments, composites)
    case("betainc.plain", lambda a, b, x: tf.math.betainc(a, b, x), u(0.5, 3, 4), u(0.5, 3, 4), u(0.1, 0.9, 4))
    case("igamma.both_args", lambda a, x: tf.math.igamma(a, x), u(0.5, 3, 5), u(0.1, 4, 5))
    case("igammac.broadcast", lambda a, x: tf.math.igammac(a, x), u(0.5, 3, 3, 1), u(0.1, 4, 1, 4))
    case("lbeta.plain", lambda x: tf.math.lbeta(x), u(0.5, 3, 3, 4))
    case("polygamma.order1", lambda x: tf.math.polygamma(tf.ones_like(x), x), u(0.5, 4, 5))
    case("zeta.plain", lambda x, q: tf.math.zeta(x, q), u(1.5, 4, 4), u(0.5, 2, 4))
    case("bessel_i1e.broadcast", lambda x, y: tf.math.bessel_i1e(x * y), r(3, 1), r(1, 2))
    case("bessel_k0.plain", lambda x: tf.math.special.bessel_k0(x), u(0.5, 3, 4))
    case("bessel_j0.plain", lambda x: tf.math.special.bessel_j0(x), u(0.5, 3, 4))
    case("dawsn.plain", lambda x: tf.math.special.dawsn(x), r(4))
    case("polyval.plain", lambda a, b, cc, x: tf.math.polyval([a, b, cc], x), r(), r(), r(), r(4))
    case("xlogy.broadcast_zeros", lambda x, y: tf.math.xlogy(x, y), c([[0.0], [1.0], [2.0]]), c([[0.0, 0.5, 2.0]]))
    case("xlog1py.broadcast_zeros", lambda x, y: tf.math.xlog1py(x, y), c([[0.0], [1.0]]), c([[-1.0, 0.0, 2.0]]))
    case("divide_no_nan.broadcast", lambda x, y: tf.math.divide_no_nan(x, y), r(3, 1), c([[0.0, 2.0, -0.5]]))
    case("squared_difference.broadcast", lambda x, y: tf.math.squared_difference(x, y), r(2, 3), r(3))
    case("atan2.broadcast", lambda y, x: tf.math.atan2(y, x), r(3, 1), c([[1.0, -1.0, 0.5, 0.0]]))
    case("pow.negative_base", lambda x, y: tf.pow(x, y), c([[-2.0], [-0.5], [3.0]]), c([[2.0, 3.0, 1.0]]))
    case("pow.zero_base", lambda x, y: tf.pow(x, y), c([0.0, 0.0, 0.0]), c([2.0, 1.0, 0.5]))
    case("floormod.broadcast", lambda x, y: tf.math.floormod(x, y), c([[-3.5], [2.0], [7.25]]), c([[2.0, -1.5]]))
    case("maximum.broadcast_ties", lambda x, y: tf.maximum(x, y), c([[1.0], [2.0]]), c([[1.0, 2.0, 0.0]]))
    case("minimum.broadcast_ties", lambda x, y: tf.minimum(x, y), c([[1.0], [2.0]]), c([[1.0, 2.0, 3.0]]))
    case("cosine_similarity.keras", lambda a, b: tf.keras.losses.cosine_similarity(a, b), r(3, 4), r(3, 4))
    case("huber.keras", lambda a, b: tf.keras.losses.huber(a, b, 0.5), r(3, 4), r(3, 4))

    return cases


_CASES: list[Case] | None = None


def cases() -> list[Case]:
    global _CASES
    if _CASES is None:
        _CASES = _build()
        names = [cs.name for cs in _CASES]
        assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    return _CASES


def by_name(name: str) -> Case:
    return next(cs for cs in cases() if cs.name == name)


# -- the runner ---------------------------------------------------------------------------------------

def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.floating)


def _cotangents(case: Case, outs: Sequence[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]:
    """A (real, imaginary) cotangent per float or complex output, None for the others; and where the
    output is finite and not huge (an empty segment's min or max, a log of 0): the contraction reads only
    those entries, lest it overflow or make a NaN of ``0 * inf``."""
    rng = np.random.default_rng(zlib.crc32(b"ct:" + case.name.encode()))
    cts: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = []
    for o in outs:
        if np.issubdtype(o.dtype, np.floating) or np.issubdtype(o.dtype, np.complexfloating):
            dtype = np.float64 if o.dtype in (np.float64, np.complex128) else np.float32
            re = rng.standard_normal(o.shape).astype(dtype)
            im = rng.standard_normal(o.shape).astype(dtype)
            cts.append((re, im, np.abs(o) < 1e30))
        else:
            cts.append(None)
    return cts


def _flat(out: Any) -> list[Any]:
    """The leaves of a nest of tuples and lists."""
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _flat(o)]
    return [out]


def _contract_tf(tf: Any, outs: list[Any], cts: list[Any]) -> Any:
    total = tf.constant(0.0, tf.float64 if any(ct is not None and ct[0].dtype == np.float64 for ct in cts)
                        else tf.float32)
    for o, ct in zip(outs, cts, strict=True):
        if ct is None:
            continue
        re, im, finite = ct
        if o.dtype.is_complex:
            o = tf.where(finite, o, tf.zeros_like(o))
            total += tf.reduce_sum(tf.math.real(o) * re) + tf.reduce_sum(tf.math.imag(o) * im)
        else:
            total += tf.reduce_sum(tf.where(finite, tf.cast(o, total.dtype), 0) * re)
    return total


def _contract_jnp(outs: list[Any], cts: list[Any]) -> Any:
    import jax.numpy as jnp

    total = 0.0
    for o, ct in zip(outs, cts, strict=True):
        if ct is None:
            continue
        re, im, finite = ct
        o = jnp.where(finite, o, 0)
        if jnp.iscomplexobj(o):
            total = total + jnp.sum(jnp.real(o) * re) + jnp.sum(jnp.imag(o) * im)
        else:
            total = total + jnp.sum(o * re)
    return total


def _dense(tf: Any, g: Any) -> Any:
    return tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g


def _mismatch(got: Any, want: Any, tol: tuple[float, float]) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} vs TF {want.shape}"
    if np.allclose(got, want, rtol=tol[0], atol=tol[1], equal_nan=True):
        return None
    bad = ~np.isclose(got, want, rtol=tol[0], atol=tol[1], equal_nan=True)
    k = np.argwhere(bad)[:3]
    where = ", ".join(f"{tuple(int(v) for v in ix)}: jta {got[tuple(ix)]:.6g} TF {want[tuple(ix)]:.6g}" for ix in k)
    return f"{int(bad.sum())}/{bad.size} differ ({where})"


def _x64(flag: bool) -> Any:
    if not flag:
        return contextlib.nullcontext()
    import jax
    return jax.enable_x64(True)


def run_case(case: Case, eager_grad: bool = False) -> Result:
    """Run ``case``; ``eager_grad``: check ``jax.grad`` eagerly too (not only under ``jit``)."""
    with _x64(case.x64):
        return _run(case, eager_grad)


def _run(case: Case, eager_grad: bool) -> Result:  # noqa: C901, PLR0911, PLR0912, PLR0915 (one check after another)
    import jax
    import tensorflow as tf

    import jta

    # The float inputs are the arguments (or variables: ``case.variables``); the others (indices, ids,
    # labels) are constants of the function.
    raw = case.inputs()
    variables = {k: tf.Variable(raw[k], name=f"sweep_v{k}") for k in case.variables}
    fidx = [k for k, a in enumerate(raw) if (_is_float(a) or case.int_args) and k not in variables]
    args = [raw[k] for k in fidx]
    diff = (tuple(p for p, k in enumerate(fidx) if _is_float(raw[k])) if case.diff is None
            else tuple(fidx.index(k) for k in case.diff))
    labels = [f"argument {fidx[k]}" for k in diff] + [f"variable {k}" for k in variables]

    def call(*fs: Any) -> Any:
        full = [variables[k] if k in variables else tf.constant(a) for k, a in enumerate(raw)]
        for k, f in zip(fidx, fs, strict=True):
            full[k] = f
        return case.fn(*full)

    spec = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in args]

    # TensorFlow: the forward, the eager tape, the train step
    try:
        forward = tf.function(call, input_signature=spec, autograph=False)
        want_outs = [np.asarray(o) for o in _flat(tf.nest.map_structure(lambda t: t.numpy(), forward(*args)))]
        cts = _cotangents(case, want_outs)
        xs = [tf.constant(a) for a in args]
        with tf.GradientTape() as tape:
            for k in diff:
                tape.watch(xs[k])
            loss = _contract_tf(tf, _flat(call(*xs)), cts)
        sources = [xs[k] for k in diff] + list(variables.values())
        tf_grads = tape.gradient(loss, sources)
        tf_none = any(g is None for g in tf_grads)
        want_grads = [np.zeros(x.shape, x.dtype.as_numpy_dtype) if g is None else _dense(tf, g).numpy()
                      for x, g in zip(sources, tf_grads, strict=True)]

        @tf.function(input_signature=spec, autograph=False)
        def train(*ys: Any) -> Any:
            with tf.GradientTape() as tp:
                for k in diff:
                    tp.watch(ys[k])
                value = _contract_tf(tf, _flat(call(*ys)), cts)
            gs = tp.gradient(value, [ys[k] for k in diff] + list(variables.values()),
                             unconnected_gradients=tf.UnconnectedGradients.ZERO)
            return value, [_dense(tf, g) for g in gs]

        want_loss, want_step = train(*args)
        want_loss, want_step = want_loss.numpy(), [g.numpy() for g in want_step]
    except Exception as e:  # noqa: BLE001
        return Result(case.name, "TF_ERROR", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")

    for label, g, s in zip(labels, want_grads, want_step, strict=True):  # TF against itself: a sanity check
        if _mismatch(s, g, (1e-4, 1e-4)):
            return Result(case.name, "TF_ERROR", f"TF's eager and graph gradients differ for {label}")

    def fail(status: str, e: Exception, stage: str) -> Result:
        code = getattr(getattr(e, "jta_error", None), "value", (None,))[0]
        if code == 430:
            return Result(case.name, "REFUSED", f"{stage}: {str(e).splitlines()[1].strip()[:200]}", tf_none)
        text = str(e).splitlines()[0][:200] if str(e) else ""
        return Result(case.name, status, f"{stage}: {type(e).__name__}: {text}", tf_none)

    # jta: the forward and its jax.grad, under one jit (an eager forward only to tell what failed)
    try:
        fn, params = jta.import_function(forward, *args)
    except Exception as e:  # noqa: BLE001
        return fail("CRASH", e, "forward")
    vnames = [v.name.split(":")[0] for v in variables.values()]

    def loss_of(point: tuple[list[Any], list[Any]]) -> Any:
        fargs, vvalues = point
        full = list(args)
        for k, a in zip(diff, fargs, strict=True):
            full[k] = a
        outs = _flat(fn({**params, **dict(zip(vnames, vvalues, strict=True))}, *full))
        return _contract_jnp(outs, cts), outs

    def wrong_value(outs: list[Any]) -> Result | None:
        if len(outs) != len(want_outs):
            return Result(case.name, "WRONG_VALUE", f"{len(outs)} outputs, TF {len(want_outs)}", tf_none)
        for k, (g, w) in enumerate(zip(outs, want_outs, strict=True)):
            if (m := _mismatch(g, w, case.tol)) is not None:
                return Result(case.name, "WRONG_VALUE", f"output {k}: {m}", tf_none)
        return None

    point = ([args[k] for k in diff], [params[n] for n in vnames])
    try:
        (_, got_outs), got = jax.jit(jax.value_and_grad(loss_of, has_aux=True))(point)
    except Exception as e:  # noqa: BLE001
        try:
            got_outs = _flat(fn(params, *args))
        except Exception as e2:  # noqa: BLE001
            return fail("CRASH", e2, "forward")
        if (bad := wrong_value(got_outs)) is not None:
            return bad
        try:  # is it jit's (a value that must be static) or the gradient's?
            jax.grad(lambda p: loss_of(p)[0])(point)
        except Exception:  # noqa: BLE001
            return fail("CRASH", e, "jax.grad")
        return fail("CRASH", e, "jit(jax.grad) (eager jax.grad runs)")
    if (bad := wrong_value(got_outs)) is not None:
        return bad
    for label, g, w in zip(labels, [*got[0], *got[1]], want_grads, strict=True):
        if (m := _mismatch(g, w, case.tol)) is not None:
            return Result(case.name, "WRONG_GRAD", f"jax.grad, {label}: {m}", tf_none)
    if eager_grad:  # (XLA may simplify under jit what an eager call computes: 0 * nan, 0 / 0)
        try:
            got = jax.grad(lambda p: loss_of(p)[0])(point)
        except Exception as e:  # noqa: BLE001
            return fail("CRASH", e, "eager jax.grad")
        for label, g, w in zip(labels, [*got[0], *got[1]], want_grads, strict=True):
            if (m := _mismatch(g, w, case.tol)) is not None:
                return Result(case.name, "WRONG_GRAD", f"eager jax.grad, {label}: {m}", tf_none)

    # jta: the train step, eagerly and under jit
    try:
        step, step_params = jta.import_function(train, *args)
    except Exception as e:  # noqa: BLE001
        return fail("CRASH", e, "train step import")
    for how, run in (("train step", step), ("jit train step", jax.jit(step))):
        try:
            got_loss, got_step = run(step_params, *args)
        except Exception as e:  # noqa: BLE001
            return fail("CRASH", e, how)
        if (m := _mismatch(got_loss, want_loss, case.tol)) is not None:
            return Result(case.name, "WRONG_VALUE", f"{how} loss: {m}", tf_none)
        for label, g, w in zip(labels, got_step, want_step, strict=True):
            if (m := _mismatch(g, w, case.tol)) is not None:
                return Result(case.name, "WRONG_GRAD", f"{how}, {label}: {m}", tf_none)
    return Result(case.name, "PASS", "", tf_none)


def main(names: Sequence[str]) -> None:
    import time

    eager = "--eager-grad" in names
    names = [n for n in names if n != "--eager-grad"]
    chosen = [by_name(n) for n in names] if names else cases()
    for cs in chosen:
        t = time.perf_counter()
        res = run_case(cs, eager)
        print(f"{res}  [{time.perf_counter() - t:.1f}s]", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
