"""The linear-algebra, diagonal-band, resizing, ``Bitcast`` and ``Where`` ops of
``jta/graph_import/_ops_linalg.py`` against TensorFlow.

Each case is a small TF1 graph fed one float tensor ``x`` (float32 and float64, with batch
dimensions), holding the case's outputs, a loss ``sum(w * output)`` over them and TensorFlow's
``tf.gradients`` of the loss. The importer runs the whole graph (TF's gradient graph included)
eagerly and under ``jit`` and matches ``Session.run``; ``jax.grad`` of the imported loss matches
TensorFlow's gradient.

Decompositions are unique only up to signs (phases) and, for ``Eig``, order: those cases output
what is unique, computed in the graph (reconstructions, ``|u|``, ``|v|``, power sums of the
eigenvalues, eigenvalue-weighted ``|v|^2``); ``Qr``'s Householder signs happen to be LAPACK's in
Eigen too, so ``q`` and ``r`` are compared as they are. Tolerances: float32 ``1e-4`` (LAPACK and
Eigen run different algorithms: about ``cond * eps`` apart, at most ``2e-5`` measured, and
eigenvector gradients scale with ``1/gap``), float64 ``1e-9``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest

import jta
from jta import errors
from jta.graph_import import supported_ops
from tests.helpers import budget

# -- the cases --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """``build(tf, x) -> outputs``; every float or complex output enters the loss (complex ones by
    their real and imaginary parts), unless ``grad`` is False."""

    build: Callable[[Any, Any], list[Any]]
    shape: tuple[int, ...]
    grad: bool = True
    tol64: float = 1e-9


def _spd(tf, x):
    """A well-conditioned symmetric positive definite batch from a square batch."""
    n = x.shape[-1]
    return tf.matmul(x, x, transpose_b=True) + n * tf.eye(n, dtype=x.dtype)


def _upper(tf, x):  # an upper triangle the lower-triangle ops must ignore
    return tf.linalg.band_part(x, 0, -1) - tf.linalg.band_part(x, 0, 0)


def _svd(tf, x, full):
    s, u, v = tf.linalg.svd(x, full_matrices=full)
    k = min(x.shape[-2:])
    usv = tf.matmul(u[..., :k] * tf.cast(s, u.dtype)[..., None, :], v[..., :k], adjoint_b=True)
    return [s, usv, tf.abs(u[..., :k]), tf.abs(v[..., :k])]


def _eig(tf, x):
    e, v = tf.linalg.eig(x)
    weighted = tf.linalg.matvec(tf.cast(tf.abs(v) ** 2, e.dtype), e)  # sum_k e_k |v_ik|^2
    return [tf.reduce_sum(e, -1), tf.reduce_sum(e * e * e, -1), weighted, tf.reduce_sum(tf.linalg.eigvals(x) ** 2, -1)]


def _eigh(tf, x):
    e, v = tf.linalg.eigh(_spd(tf, x) + _upper(tf, x))
    return [e, tf.abs(v), tf.matmul(v * e[..., None, :], v, adjoint_b=True)]


def _diag_ops(tf, x):
    band = tf.linalg.diag_part(x, k=(-1, 2), align="LEFT_RIGHT", padding_value=0.5)
    return [tf.linalg.diag_part(x), tf.linalg.diag(x[..., 0, :]), tf.linalg.set_diag(x, x[..., 1, :3] * 2.0),
            band, tf.linalg.diag(band, k=(-1, 2), num_rows=3, align="RIGHT_LEFT"),
            tf.linalg.set_diag(x, band[..., ::-1, :] * 3.0, k=(-1, 2), align="RIGHT_RIGHT"),
            # V2 packs to the left; V1 has the main diagonal only
            tf.raw_ops.MatrixDiagPartV2(input=x, k=(0, 1), padding_value=0.0),
            tf.raw_ops.MatrixDiagV2(diagonal=x[..., :2, :3], k=(-1, 0), num_rows=-1, num_cols=-1, padding_value=0.0),
            tf.raw_ops.MatrixSetDiagV2(input=x, diagonal=x[..., :2, :3], k=(-1, 0)),
            tf.raw_ops.MatrixDiag(diagonal=x[..., 2, :]), tf.raw_ops.MatrixDiagPart(input=x),
            tf.raw_ops.MatrixSetDiag(input=x, diagonal=x[..., 2, :3])]


def _diag_aligns(tf, x):
    """Every alignment of every band op, shapes inferred from ``k`` alone, and MatrixDiagV2 with
    superdiagonals (TensorFlow's gradient of it packs them as V3's default RIGHT_LEFT does, not to
    the left as the op itself: forward only)."""
    out = []
    for align in ("LEFT_LEFT", "LEFT_RIGHT", "RIGHT_LEFT", "RIGHT_RIGHT"):
        band = tf.linalg.diag_part(x, k=(-2, 1), align=align, padding_value=0.5)
        out += [band, tf.linalg.diag(band, k=(-2, 1), num_cols=4, align=align, padding_value=-1.0),
                tf.linalg.set_diag(x, band[..., ::-1, :] * 3.0, k=(-2, 1), align=align)]
    return [*out, tf.linalg.diag(x[..., 0, :2], k=1), tf.linalg.diag(x[..., 0, :2], k=-1, num_rows=4),
            tf.linalg.diag(x[..., :2, :2], k=(-2, -1)), tf.linalg.diag_part(x, k=-2),
            tf.raw_ops.MatrixDiagV2(diagonal=x[..., :2, :3], k=(0, 1), num_rows=-1, num_cols=-1, padding_value=0.0)]


def _bitcast(tf, x):
    """Bytes reread: wider to narrower (a new trailing axis), narrower to wider (the axis removed),
    complex to and from its parts, and a constant (computed while tracing)."""
    pair = tf.complex64 if x.dtype == tf.float32 else tf.complex128
    return [tf.bitcast(x, tf.int32), tf.bitcast(x, tf.uint8), tf.bitcast(tf.bitcast(x, tf.int16), x.dtype),
            tf.bitcast(tf.bitcast(x, tf.uint8), x.dtype), tf.bitcast(x[..., :2], pair),
            tf.bitcast(tf.complex(x, -2.0 * x), x.dtype), tf.bitcast(tf.complex(x, x), tf.int8),
            tf.bitcast(tf.constant([[1.5, -2.0]], x.dtype), tf.uint16),
            tf.bitcast(tf.cast(x * 100.0, tf.int32), tf.float32)]


def _resize(tf, x):
    """Up and down, with each of TensorFlow's coordinate conventions."""
    images = tf.reshape(x, (2, 3, 4, 2))
    out = []
    for align, half, size in ((False, False, (5, 7)), (True, False, (2, 3)), (False, True, (5, 3))):
        out += [tf.raw_ops.ResizeBilinear(images=images, size=size, align_corners=align, half_pixel_centers=half),
                tf.raw_ops.ResizeNearestNeighbor(images=images, size=size, align_corners=align,
                                                 half_pixel_centers=half)]
    return out


def _complex(tf, x):
    """Complex inputs: Hermitian from the lower triangle, ``e`` and ``s`` in the input's dtype."""
    c = tf.complex(x, tf.reverse(x, [-1]))
    h = tf.matmul(c, c, adjoint_b=True) + 3.0 * tf.eye(3, dtype=c.dtype)
    e, v = tf.linalg.eigh(h + _upper(tf, c))
    return [tf.linalg.cholesky(h + _upper(tf, c)), e, tf.abs(v), *_svd(tf, c, False), *tf.linalg.qr(c),
            *tf.linalg.slogdet(c), tf.linalg.inv(c), tf.linalg.triangular_solve(h, c, adjoint=True)]


def _eye(tf, x):
    return 4.0 * tf.eye(3, dtype=x.dtype)


CASES: dict[str, Case] = {
    "cholesky": Case(lambda tf, x: [tf.linalg.cholesky(_spd(tf, x) + _upper(tf, x))], (2, 3, 3)),
    "triangular_solve": Case(lambda tf, x: [
        tf.linalg.triangular_solve(x + _eye(tf, x), x[..., :2], lower=True),
        tf.linalg.triangular_solve(x + _eye(tf, x), x[..., :2], lower=False, adjoint=True),
        tf.linalg.triangular_solve(x[:1] + _eye(tf, x), x, lower=True)], (2, 3, 3)),  # a broadcast batch
    "solve_inverse_det": Case(lambda tf, x: [
        tf.linalg.solve(_spd(tf, x) + x, x[..., :2]), tf.linalg.solve(_spd(tf, x) + x, x, adjoint=True),
        tf.linalg.inv(x + _eye(tf, x)), tf.raw_ops.MatrixInverse(input=_spd(tf, x) + x, adjoint=True),
        tf.linalg.det(x), *tf.linalg.slogdet(x)], (2, 3, 3)),
    "qr": Case(lambda tf, x: [*tf.linalg.qr(x), *tf.linalg.qr(x[..., :3, :], full_matrices=True),
                              *tf.linalg.qr(tf.linalg.matrix_transpose(x), full_matrices=True)], (2, 4, 3)),
    "svd": Case(lambda tf, x: [*_svd(tf, x, False), *_svd(tf, x[..., :3, :], True),
                               tf.linalg.svd(x, compute_uv=False)], (2, 4, 3)),
    "eigh": Case(lambda tf, x: [*_eigh(tf, x), tf.linalg.eigvalsh(_spd(tf, x))], (2, 3, 3)),
    "eig": Case(_eig, (2, 3, 3)),
    "complex": Case(_complex, (2, 3, 3)),
    "diag": Case(_diag_ops, (2, 3, 4)),
    "resize": Case(_resize, (2, 24), tol64=1e-5),  # float32 arithmetic, as TensorFlow's kernels
    # TensorFlow has no gradient of a full q or u of a tall matrix (their extra columns are not unique)
    "forward_only": Case(lambda tf, x: [*tf.linalg.qr(x, full_matrices=True), *_svd(tf, x, True),
                                        *_svd(tf, tf.linalg.matrix_transpose(x), True),
                                        *_diag_aligns(tf, x[..., :3, :]), *_bitcast(tf, x)], (2, 4, 3), grad=False),
}


# -- building and running ---------------------------------------------------------------------
@dataclasses.dataclass
class Built:
    graph_def: Any
    feed: np.ndarray
    fetches: list[str]
    expected: list[np.ndarray]  # outputs, then (with a gradient) the loss and TF's gradient
    loss: str | None
    op_types: set[str]


def _loss(tf, ys, dtype):
    terms = []
    for k, y in enumerate(ys):
        parts = [tf.math.real(y), tf.math.imag(y)] if y.dtype.is_complex else [y] if y.dtype.is_floating else []
        for p in parts:
            w = tf.sin(tf.reshape(tf.cast(tf.range(tf.size(p)), p.dtype) * 0.7 + k, tf.shape(p)))
            terms.append(tf.cast(tf.reduce_sum(w * p), dtype))  # resizing gives float32
    return tf.add_n(terms, name="loss")


def _build(case: Case, seed: int, dtype: str) -> Built:
    import tensorflow as tf

    from tests.helpers.tfgraph import k_graph

    feed = np.random.default_rng(seed).standard_normal(case.shape).astype(dtype)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(dtype, case.shape, name="x")
        fetches = case.build(tf, x)
        loss = None
        if case.grad:
            loss = _loss(tf, fetches, dtype)
            fetches = [*fetches, loss, *tf.compat.v1.gradients(loss, [x])]
        with tf.compat.v1.Session(graph=g) as sess:
            expected = sess.run(fetches, {x: feed})
        op_types = {op.type for op in g.get_operations()}
    return Built(g.as_graph_def(), feed, [t.name for t in fetches], expected, None if loss is None else loss.name, op_types)


@functools.cache
def _built(name: str, dtype: str) -> Built:
    return _build(CASES[name], list(CASES).index(name), dtype)


def _compare(got: list[Any], expected: list[np.ndarray], tol: float) -> None:
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        g = np.asarray(g)
        assert g.shape == e.shape, k
        assert g.dtype == e.dtype, k
        if np.issubdtype(e.dtype, np.inexact):
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")


# XLA:CPU compiling these graphs is the cost: by default every case runs under jit in float32 and
# the decompositions whose float64 accuracy is worth checking in float64 too; --long runs every case
# in both dtypes, eagerly and under jit.
RUNS = [(name, "float32", False) for name in CASES] + (
    [(name, dtype, True) for name in CASES for dtype in ("float32", "float64")] if budget.LONG
    else [(name, "float64", False) for name in ("cholesky", "eigh", "svd")])


@pytest.mark.parametrize(("name", "dtype", "eager"), RUNS)
def test_outputs_tf_gradient_and_jax_grad_match_tensorflow(name, dtype, eager):
    """The whole graph (outputs, loss, TensorFlow's gradient) matches ``Session.run``, and
    ``jax.grad`` of the imported loss matches TensorFlow's gradient."""
    pytest.importorskip("tensorflow")
    b = _built(name, dtype)
    tol = 1e-4 if dtype == "float32" else CASES[name].tol64
    with jax.enable_x64(dtype == "float64"):
        whole = jta.import_graph_def(b.graph_def, inputs=["x:0"], outputs=b.fetches)
        expected = b.expected
        run = whole
        if b.loss is not None:
            loss = jta.import_graph_def(b.graph_def, inputs=["x:0"], outputs=[b.loss])
            expected = [*expected, expected[-1]]

            def run(x):
                return [*whole(x), jax.grad(lambda x: loss(x)[0])(x)]
        if eager:
            _compare(run(b.feed), expected, tol)
        _compare(jax.jit(run)(b.feed), expected, tol)


ADDED = {"Cholesky", "MatrixTriangularSolve", "MatrixSolve", "MatrixInverse", "MatrixDeterminant",
         "LogMatrixDeterminant", "Qr", "Svd", "SelfAdjointEigV2", "Eig", "MatrixDiagV3", "MatrixDiagPartV3",
         "MatrixSetDiagV3", "MatrixDiagV2", "MatrixDiagPartV2", "MatrixSetDiagV2", "MatrixDiag", "MatrixDiagPart",
         "MatrixSetDiag", "ResizeBilinear", "ResizeBilinearGrad", "ResizeNearestNeighbor",
         "ResizeNearestNeighborGrad", "Bitcast"}


def test_every_added_op_is_exercised_and_its_gradient_closure_is_supported():
    pytest.importorskip("tensorflow")
    seen = set().union(*(_built(name, "float32").op_types for name in CASES))
    assert ADDED <= seen, sorted(ADDED - seen)
    assert seen <= set(supported_ops()), sorted(seen - set(supported_ops()))


# -- Where: its output's shape is the number of true entries ----------------------------------
def _where_graph():
    import tensorflow as tf

    from tests.helpers.tfgraph import k_graph

    feed = np.array([[0.5, -1.0, 2.0], [-0.5, 0.0, 3.0]], np.float32)
    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, (2, 3), name="x")
        fed = tf.identity(tf.gather_nd(x, tf.where(x > 0)), name="fed")
        const = tf.identity(tf.gather_nd(x, tf.where(tf.constant([[True, False, True], [False, False, True]]))),
                            name="on_const")
        with tf.compat.v1.Session(graph=g) as sess:
            expected = sess.run([fed, const], {x: feed})
    return g.as_graph_def(), feed, expected


def test_where_runs_eagerly_and_on_constants_under_jit():
    pytest.importorskip("tensorflow")
    graph_def, feed, expected = _where_graph()
    f = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["fed:0", "on_const:0"])
    _compare(f(feed), expected, 0.0)
    g = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["on_const:0"])
    _compare(jax.jit(g)(feed), expected[1:], 0.0)


def test_where_of_a_traced_value_names_the_node_under_jit():
    pytest.importorskip("tensorflow")
    graph_def, feed, _ = _where_graph()
    f = jta.import_graph_def(graph_def, inputs=["x:0"], outputs=["fed:0"])
    with pytest.raises(errors.UnimplementedError) as info:
        jax.jit(f)(feed)
    assert str(info.value) == ("Node Where (Where): its input (the number of true entries is the output's shape; "
                               "jta.checked learns it at run time) must be static (computable from constants and shapes while tracing), but it "
                               "depends on the inputs' values. An eager call (outside jax.jit and jax.grad) knows them.")
    f(feed)  # (as the text says)


def test_bitcast_to_a_64_bit_type_without_x64_is_refused():
    pytest.importorskip("tensorflow")
    import tensorflow as tf

    from tests.helpers.tfgraph import k_graph

    with k_graph() as g:
        x = tf.compat.v1.placeholder(tf.float32, (3, 2), name="x")
        tf.bitcast(x, tf.float64, name="wide")
    f = jta.import_graph_def(g.as_graph_def(), inputs=["x:0"], outputs=["wide:0"])
    with jax.enable_x64(False), pytest.raises(errors.UnimplementedError, match="float64 needs jax_enable_x64"):
        f(np.ones((3, 2), np.float32))
    with jax.enable_x64(True):
        np.testing.assert_array_equal(np.asarray(f(np.ones((3, 2), np.float32))[0]),
                                      np.ones((3, 2), np.float32).view(np.float64)[:, 0])
